//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/premigrate/premigrate/test/framework"
)

var workloadsScenario = scenarios.Declare(framework.Adoption, framework.CI, "every-workload-gated")

const shopSecret = `apiVersion: v1
kind: Secret
metadata:
  name: shop-db
stringData:
  url: postgres://ledger:ledger-pw@ledger-db:5432/ledger?sslmode=disable
`

// shopValues run docs/workloads.md's umbrella chart with the demo of version v: the web and the worker serve,
// the report is `demo report`, the migration `demo migrate` in job mode (its pods and the Job are created
// together, so the gate holds every workload's pods), 5 s per schema version, its Jobs gone 5 s after they
// finish. The schedule never fires during the test: its runs are started by hand.
func shopValues(v string) map[string]any {
	return map[string]any{
		"global": map[string]any{
			"image": map[string]any{"repository": "ghcr.io/premigrate/demo", "tag": v},
			"premigrate": map[string]any{
				"mode": "job", "command": []any{"/demo", "migrate"}, "ttlSecondsAfterFinished": 5,
				"env": []any{
					map[string]any{"name": "DATABASE_URL", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "shop-db", "key": "url"}}},
					map[string]any{"name": "DEMO_MIGRATION_DELAY", "value": "5s"},
				},
			},
		},
		"web":    map[string]any{"command": []any{"/demo", "serve"}},
		"report": map[string]any{"command": []any{"/demo", "report"}, "schedule": "0 0 1 1 *"},
		"worker": map[string]any{"command": []any{"/demo", "serve"}},
	}
}

// TestEveryWorkloadOfAReleaseWaitsForTheSameMigration runs docs/workloads.md's chart, built from the page's
// blocks: a web Deployment and a report CronJob in the umbrella, a worker Deployment in its subchart, each on
// its own ServiceAccount, all gated by the umbrella's one migration. On the install and on an upgrade, every
// workload's pods (a report run started by hand while the migration runs) are created before the migration
// finishes and start after it, by the database's clock and the API server's; after the migration Jobs' TTL a
// report run finds its migration recorded and completes.
func TestEveryWorkloadOfAReleaseWaitsForTheSameMigration(t *testing.T) {
	share(t, weightOne, 90*time.Second)
	res := scenario(t, workloadsScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "workloads", restricted)
	for _, m := range []string{ledgerDBManifest, shopSecret} {
		if out, err := env.Run.Input(t, []byte(m), env.Kubectl, "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("creating the shop's database: %v\n%s", err, out)
		}
	}
	env.Run.Must(t, env.Kubectl, "wait", "-n", ns, "--for=condition=Ready", "pod/ledger-db", "--timeout=3m")
	chart := filepath.Join(t.TempDir(), "shop")
	framework.BuildFromDocs(t, env.Run, filepath.Join(env.RepoRoot, "docs", "workloads.md"), chart,
		filepath.Join(env.RepoRoot, "charts", "premigrate-lib"), ".", "charts/worker")
	r := env.NewRelease(t, ns, "shop", env.Helm3)
	r.PsqlArgs = []string{"ledger-db", "psql", "-U", "ledger", "-d", "ledger"}
	r.AppSelector = "app.kubernetes.io/instance=shop,app.kubernetes.io/name in (web,worker,report)"
	want := map[string]int{"web": 2, "worker": 1, "report": 1}

	report := func(name string) {
		t.Helper()
		env.Run.Must(t, env.Kubectl, "create", "job", "-n", ns, name, "--from=cronjob/shop-report")
		env.Run.Must(t, env.Kubectl, "wait", "-n", ns, "--for=condition=Complete", "job/"+name, "--timeout=3m")
	}
	for i, v := range []string{"v1", "v2"} {
		start := time.Now()
		env.Run.Must(t, env.Helm3, "upgrade", "--install", r.Name, chart, "-n", ns, "--values", r.ValuesFile(shopValues(v)))
		id := identityOf(ctx, t, ns, "shop-web")
		if w := identityOf(ctx, t, ns, "shop-worker"); w != id || id == "" {
			t.Fatalf("%s: the subchart's worker carries identity %q, the umbrella's web %q", v, w, id)
		}
		report(fmt.Sprintf("report-%d", i+1)) // started while the migration runs
		for _, d := range []string{"shop-web", "shop-worker"} {
			env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", ns, "deployment/"+d, "--timeout=3m")
		}
		res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
		r.AssertWitness(ctx, id)
		assertEachWorkloadHeld(ctx, t, r, id, want)
	}
	res.Upgrades = 1
	if got := r.Psql(`select max(version) from schema_migrations`); got != "2" {
		t.Errorf("schema %q after the upgrade, want 2", got)
	}

	// the TTL ends the migration Jobs; a report run after it finds its migration in the records
	framework.WaitUntil(t, "the TTL to delete the migration Jobs", 90*time.Second, func(ctx context.Context) (bool, error) {
		return len(r.Jobs(ctx)) == 0, nil
	})
	report("report-after-ttl")
	r.AssertWitness(ctx, identityOf(ctx, t, ns, "shop-web"))
}

// assertEachWorkloadHeld checks that each workload of want has its number of pods of identity id, and that
// at least one of them was created (by the API server's clock) before the database says the migration of
// id finished: the gate held it, it did not merely start late (AssertWitness checked that none started early).
func assertEachWorkloadHeld(ctx context.Context, t *testing.T, r *framework.Release, id string, want map[string]int) {
	t.Helper()
	done, ok := r.MigrationFinished(id)
	if !ok {
		t.Fatalf("the database has no finished migration of identity %s", id)
	}
	byWorkload := map[string][]corev1.Pod{}
	for _, p := range r.AppPods(ctx, id) {
		if p.DeletionTimestamp == nil {
			byWorkload[p.Labels["app.kubernetes.io/name"]] = append(byWorkload[p.Labels["app.kubernetes.io/name"]], p)
		}
	}
	for workload, n := range want {
		pods := byWorkload[workload]
		if len(pods) < n {
			t.Errorf("%d %s pods of identity %s, want %d", len(pods), workload, id, n)
			continue
		}
		held := false
		for _, p := range pods {
			held = held || p.CreationTimestamp.Time.Before(done.Truncate(time.Second))
		}
		if !held {
			t.Errorf("no %s pod of identity %s was created before its migration finished at %s: the scenario did not make the gate hold it",
				workload, id, done.Format(time.RFC3339Nano))
		}
	}
}
