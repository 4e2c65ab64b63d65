//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/demo/migrate"
	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	failedMigrationScenario    = scenarios.Declare(framework.NeverSkipped, framework.Matrix, "failed-migration")
	signalledMigrationScenario = scenarios.Declare(framework.NeverSkipped, framework.CI, "signalled-migration")
	slowDatabaseScenario       = scenarios.Declare(framework.NeverSkipped, framework.CI, "slow-database")
)

func TestAFailedMigrationFailsTheUpgradeKeepsOldPodsServingAndTheNextUpgradeWorks(t *testing.T) {
	share(t, weightAll(), 45*time.Second)
	res := scenario(t, failedMigrationScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "fail", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	r.MustDeploy(framework.BaseValues())
	oldID := r.AppIdentity(ctx)
	load := env.StartLoad(t, ns, r.Fullname())

	broken := framework.Merge(framework.BaseValues(), map[string]any{
		"image":     map[string]any{"tag": "v2"},
		"migration": map[string]any{"backoffLimit": 0, "env": []any{framework.EnvVar("DEMO_FAIL_MIGRATION", "2")}},
	})
	out, d, err := r.Deploy(broken)
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	if err == nil {
		t.Fatalf("helm upgrade with a failing migration succeeded:\n%s", out)
	}
	if !strings.Contains(out, "injected failure in migration 2") {
		t.Errorf("helm's output does not show the migration's log:\n%s", out)
	}
	if got := r.AppIdentity(ctx); got != oldID {
		t.Errorf("the app Deployment moved to identity %s although its migration failed", got)
	}
	if v := r.PsqlInt("select max(version) from schema_migrations"); v != 1 {
		t.Errorf("schema at version %d after the failed migration, want 1 (nothing half-applied)", v)
	}
	brokenID := r.JobIdentity(ctx)
	if job := r.MigrationJob(ctx, brokenID); job == nil {
		t.Errorf("the failed migration Job was deleted; its logs must stay readable")
	}
	// a failed migration is never recorded: the failed identity's pods, brought by an upgrade that skips the
	// hooks, wait (no app start of that identity, by the API server and by the app's own record)
	if out, _, err := r.Deploy(broken, "--no-hooks", "--wait=false"); err != nil {
		t.Fatalf("helm upgrade --no-hooks: %v\n%s", err, out)
	}
	if got := r.AppIdentity(ctx); got != brokenID {
		t.Fatalf("the upgrade without hooks moved the Deployment to identity %s, want the failed one %s", got, brokenID)
	}
	r.AssertHeld(ctx, brokenID, 20*time.Second)

	fixed := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"}})
	_, d = r.MustDeploy(fixed)
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 3
	if v := r.PsqlInt("select max(version) from schema_migrations"); v != 2 {
		t.Errorf("schema at version %d after the fixed upgrade, want 2", v)
	}
	rep := load.Stop()
	recordLoad(res, rep)
	rep.Check(t, "while the migration failed")
}

// A migration tool that traps SIGTERM and exits 0 halfway (here the demo's DEMO_EXIT_0_ON_SIGTERM) must not
// be recorded when its pod is stopped mid-run (a deletion, a drain, a deadline): its pods would start on a
// half-migrated schema, and every retry would skip the rest. The database, not the gate, says what was applied.
// The pod is deleted once the migration holds the migrations' lock, so the signal lands mid-run on any machine.
func TestAMigrationStoppedMidRunIsNeverRecordedEvenWhenItExitsZero(t *testing.T) {
	share(t, weightOne, 35*time.Second)
	res := scenario(t, signalledMigrationScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "signalled", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	// the records bound to no database: with the binding, gate run names the database again after the command
	// exits, on the stopped context, and fails there too, which would hide a record made after the signal
	base := framework.Merge(framework.BaseValues(), map[string]any{
		"migration":  map[string]any{"mode": "job", "backoffLimit": 0, "bindRecordsToDatabase": false},
		"postgresql": map[string]any{"auth": map[string]any{"password": "signalled-test-password"}},
	})
	r.MustDeploy(base) // v1, with the database up: the next migration starts at once
	// v2, whose migration sleeps 600 s inside its transaction
	slow := framework.Merge(base, map[string]any{
		"image": map[string]any{"tag": "v2"},
		"migration": map[string]any{"mode": "job", "backoffLimit": 0, "bindRecordsToDatabase": false,
			"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "600s"), framework.EnvVar("DEMO_EXIT_0_ON_SIGTERM", "true")}},
	})
	start := time.Now()
	env.Run.Must(t, env.Helm3, "upgrade", r.Name, env.Chart, "-n", ns, "--values", r.ValuesFile(slow))
	id := r.AppIdentity(ctx)
	job := appMigrationJob(ctx, r)
	key := migrate.LockKey
	framework.WaitUntil(t, "the migration of "+id+" to run (it holds the migrations' lock)", 3*time.Minute, func(context.Context) (bool, error) {
		return r.PsqlInt(fmt.Sprintf("select count(*) from pg_locks where locktype = 'advisory' and granted and classid = %d and objid = %d",
			uint32(key>>32), uint32(key))) > 0, nil
	})
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the pods of Job %s: %v (err %v), want one", job, pods, err)
	}
	pod := pods.Items[0].Name
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil { // SIGTERM, as a drain sends
		t.Fatal(err)
	}
	framework.WaitUntil(t, "the stopped migration pod "+pod+" to be gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	time.Sleep(5 * time.Second)

	if v, ok := r.Records(ctx)[id]; ok {
		t.Errorf("identity %s was recorded (%s) though SIGTERM stopped its migration halfway", id, v)
	}
	if v := r.PsqlInt("select coalesce(max(version), 0) from schema_migrations"); v != 1 {
		t.Errorf("schema at version %d, want 1: the stopped migration applied nothing", v)
	}
	for _, p := range r.AppPods(ctx, id) {
		if _, started := framework.AppStart(p); started {
			t.Errorf("pod %s of %s started its app though its migration was stopped", p.Name, id)
		}
	}
	if n := r.PsqlInt(fmt.Sprintf("select count(*) from demo_pod_starts where identity = '%s'", id)); n != 0 {
		t.Errorf("the witness has %d app processes of %s, whose migration never completed", n, id)
	}
}

// Issue: the first install with the embedded database waits for PostgreSQL, whatever the migration's own
// retry: a migration that gives up after 1 s still succeeds when PostgreSQL takes 60 s to come up.
func TestTheFirstInstallWaitsForASlowDatabaseBeforeTheMigrationStarts(t *testing.T) {
	share(t, weightOne, 75*time.Second)
	res := scenario(t, slowDatabaseScenario, env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "slowdb", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	_, d := r.MustDeploy(framework.Merge(framework.BaseValues(), map[string]any{
		"postgresql": map[string]any{"env": []any{framework.EnvVar("POSTGRES_START_DELAY", "60s")}},
		"migration": map[string]any{"backoffLimit": 0,
			// 10 s: far shorter than PostgreSQL's 60 s delay, so only the gate's wait can make the migration
			// pass, yet long enough for a connection and its SASL exchange on a busy node (1 s failed so once,
			// the run history showed: "failed SASL auth: timeout")
			"env": []any{framework.EnvVar("MIGRATE_CONNECT_TIMEOUT", "10s")}},
	}))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	id := r.AppIdentity(ctx)
	name := appMigrationJob(ctx, r)
	// the gate lets the pods go on the record, written just before the Job's pod exits: the Job's own
	// status may follow a moment later
	framework.WaitUntil(t, "Job "+name+" to finish", time.Minute, func(ctx context.Context) (bool, error) {
		j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && (j.Status.Succeeded == 1 || jobFailed(j)), nil
	})
	if j := releaseJob(ctx, r, name); j.Status.Succeeded != 1 || j.Status.Failed != 0 {
		t.Errorf("Job %s: %d succeeded, %d failed pods, want 1 and 0", name, j.Status.Succeeded, j.Status.Failed)
	}
	if log := jobLog(r, name); !strings.Contains(log, "waiting for PostgreSQL at") {
		t.Errorf("the migration's log does not show the wait for PostgreSQL:\n%s", log)
	}
	if d < 55*time.Second {
		t.Errorf("the install took %s although PostgreSQL was held back 60 s: the delay did not apply", d)
	}
	r.AssertWitness(ctx, id)
}
