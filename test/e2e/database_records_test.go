//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	forceUpgradeScenarios          = scenarios.DeclareEach(framework.ThisDatabase, "force-upgrade", framework.In(framework.CI, "helm3"), framework.In(framework.Matrix, "helm4"))
	reinstallKeptDatabaseScenarios = scenarios.DeclareEach(framework.ThisDatabase, "reinstall-kept-database", framework.In(framework.Matrix, "helm3"), framework.In(framework.Matrix, "helm4"))
)

// forceFlag is the CLI's flag for updates by replacement (a PUT of the rendered object): Helm 4 renamed it.
func forceFlag(helmBin string) []string {
	if toolName(helmBin) == "helm4" {
		return []string{"--force-replace", "--server-side=false"}
	}
	return []string{"--force"}
}

// Issue: `helm upgrade --force` and `helm rollback --force` PUT the rendered objects. The release's records
// ConfigMap renders no data, so up to chart 0.3.0 every record went with it, and a later rollback held its pods
// forever or ran an older migration on a newer schema. The records now live in a store Helm never renders.
// The marker put into the release's ConfigMap shows that the replacement happened in this run: a record kept
// there would have gone the same way. A forced rollback then runs no hook (its pods start on their record), and
// a forced revert through an upgrade runs the hook, which must find the record and run nothing.
func TestAForcedUpgradeKeepsEveryRecord(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range helmCLIs() {
		t.Run(h.name, func(t *testing.T) {
			share(t, weightOne, 110*time.Second)
			res := scenario(t, forceUpgradeScenarios[h.name], h.bin)
			ctx := context.Background()
			ns := env.NewNamespace(t, "force-"+h.name, restricted)
			r := env.NewRelease(t, ns, "app", h.bin)
			// the Jobs go at once: only the records can release the pods of a rollback
			values := func(tag string) map[string]any {
				return framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": tag},
					"migration": map[string]any{"ttlSecondsAfterFinished": 0}})
			}
			var ids []string
			for _, tag := range []string{"v1", "v2"} {
				_, d := r.MustDeploy(values(tag))
				res.DurationsSec = append(res.DurationsSec, d.Seconds())
				ids = append(ids, r.AppIdentity(ctx))
			}
			env.Run.Must(t, env.Kubectl, "patch", "configmap", r.AnchorName(), "-n", ns, "--type", "merge",
				"-p", `{"data":{"marker":"kept only if Helm does not replace this object"}}`)
			_, d := r.MustDeploy(values("v3"), forceFlag(h.bin)...)
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			ids = append(ids, r.AppIdentity(ctx))
			r.AssertWitness(ctx, ids[2])
			anchor, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, r.AnchorName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := anchor.Data["marker"]; ok {
				t.Fatalf("the forced upgrade did not replace ConfigMap %s (its marker is still there): the scenario proves nothing", r.AnchorName())
			}
			records := r.Records(ctx)
			for i, id := range ids {
				if _, ok := records[id]; !ok {
					t.Errorf("after the forced upgrade the store lacks the record of revision %d (%s): %v", i+1, id, records)
				}
			}
			runs := r.PsqlInt("select count(*) from demo_migrate_runs")

			// a forced rollback to revision 2: no hook runs; its pods start on their record, nothing migrates
			start := time.Now()
			env.Run.Must(t, h.bin, append([]string{"rollback", r.Name, "2", "-n", ns, "--wait", "--timeout", "4m"}, forceFlag(h.bin)...)...)
			res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
			res.Upgrades = 3
			r.RolledOut(2 * time.Minute)
			if got := r.AppIdentity(ctx); got != ids[1] {
				t.Fatalf("after the rollback the Deployment has identity %s, want revision 2's %s", got, ids[1])
			}
			r.AssertWitness(ctx, ids[1])
			if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
				t.Errorf("%d migration runs after the forced rollback, want %d (nothing runs again)", got, runs)
			}
			if v := r.PsqlInt("select max(version) from schema_migrations"); v != 3 {
				t.Errorf("schema at version %d, want 3 (migrations are not undone)", v)
			}
			if records := r.Records(ctx); len(records) < 3 {
				t.Errorf("after the forced rollback the store holds %v, want the three records", records)
			}

			// a revert through a forced upgrade (what a GitOps revert does): the hook runs gate run, which must find
			// revision 2's record; the v2 migration on the v3 schema would be refused and fail the upgrade
			_, d = r.MustDeploy(values("v2"), forceFlag(h.bin)...)
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades = 4
			r.AssertWitness(ctx, ids[1])
			if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
				t.Errorf("%d migration runs after the forced revert, want %d (nothing runs again)", got, runs)
			}
		})
	}
}

// Issue: `helm uninstall` keeps the embedded database's claim (and its Secret); a reinstall of the same values
// finds its data migrated. The records live exactly as long as that data: the store is owned by the claim, so
// it outlives the release with it, and the reinstall's migration Job finds its identity recorded on this
// database and runs nothing. A reinstall of the older version after that runs nothing either (its identity is
// recorded on this database), as a rollback would.
func TestAReinstallWithTheDatabaseKeptRunsNothingAgain(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range helmCLIs() {
		t.Run(h.name, func(t *testing.T) {
			share(t, weightOne, 140*time.Second)
			res := scenario(t, reinstallKeptDatabaseScenarios[h.name], h.bin)
			ctx := context.Background()
			ns := env.NewNamespace(t, "kept-"+h.name, restricted)
			r := env.NewRelease(t, ns, "app", h.bin)
			r.MustDeploy(framework.BaseValues())
			values := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"}})
			_, d := r.MustDeploy(values)
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			id := r.AppIdentity(ctx)
			runs := r.PsqlInt("select count(*) from demo_migrate_runs")
			claim := "data-" + r.Fullname() + "-postgresql-0"
			store, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, r.StoreName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(store.OwnerReferences) != 1 || store.OwnerReferences[0].Kind != "PersistentVolumeClaim" || store.OwnerReferences[0].Name != claim {
				t.Errorf("the store's owners are %+v, want the database's claim %s", store.OwnerReferences, claim)
			}

			uninstall(r)
			assertNothingLeftAfterUninstall(t, ns, map[string]bool{"PersistentVolumeClaim/" + claim: true,
				"Secret/" + r.Fullname() + "-postgresql": true, "ConfigMap/" + r.StoreName(): true})

			_, d = r.MustDeploy(values)
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades = 1
			if got := r.AppIdentity(ctx); got != id {
				t.Fatalf("the reinstall has identity %s, want %s (same values)", got, id)
			}
			job := r.MigrationJob(ctx, id)
			if job == nil {
				t.Fatalf("the reinstall has no migration Job of identity %s", id)
			}
			assertSkipped(ctx, r, job.Name, runs, 2)
			r.AssertWitness(ctx, id)
			if log := jobLog(r, job.Name); !strings.Contains(log, "persistentvolumeclaim/"+claim) {
				t.Errorf("the reinstall's migration does not name the database it found the record on:\n%s", log)
			}

			// an older version reinstalled onto the kept data is a rollback by other means: its identity is
			// recorded on this database (the first install), so nothing runs, the schema stays as the newer
			// version left it, and its pods start on the newer schema (which the demo, like any app deployed
			// expand/contract, serves); the witness sees no pod on a schema older than its own
			uninstall(r)
			older := framework.BaseValues()
			_, d = r.MustDeploy(older)
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades = 2
			olderID := r.AppIdentity(ctx)
			if olderID == id {
				t.Fatalf("the older version has the newer's identity %s", id)
			}
			job = r.MigrationJob(ctx, olderID)
			if job == nil {
				t.Fatalf("the older version's reinstall has no migration Job of identity %s", olderID)
			}
			assertSkipped(ctx, r, job.Name, runs, 2)
			r.AssertWitness(ctx, olderID)
		})
	}
}
