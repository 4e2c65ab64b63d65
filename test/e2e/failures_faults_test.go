//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	migrationPodKilledScenario = scenarios.Declare(framework.NeverSkipped, framework.Matrix, "migration-pod-killed")
	databaseDownScenario       = scenarios.Declare(framework.NeverSkipped, framework.Matrix, "database-down")
)

// deployResult is what deploy returned, for a deploy run in the background.
type deployResult struct {
	out string
	d   time.Duration
	err error
}

// deployAsync runs deploy in the background, so a fault can be injected while Helm waits. What can fail the test
// (writing the values file) runs here, on the test's goroutine: a t.Fatal on another goroutine would end only that
// goroutine, done would never be sent and the scenario would hang until go test's -timeout.
func deployAsync(r *framework.Release, values map[string]any) <-chan deployResult {
	r.T.Helper()
	args := r.DeployArgs(values)
	done := make(chan deployResult, 1)
	go func() { out, d, err := r.RunDeploy(args); done <- deployResult{out, d, err} }()
	return done
}

// migratingPod waits for a pod of the hook migration Job whose `migrate` container runs, and returns it.
func migratingPod(r *framework.Release, t *testing.T, timeout time.Duration) corev1.Pod {
	t.Helper()
	var found corev1.Pod
	framework.WaitUntil(t, "a migration pod running its migrate container", timeout, func(ctx context.Context) (bool, error) {
		pods, err := env.Client.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + r.Fullname() + "-migrate"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == "migrate" && cs.State.Running != nil && p.DeletionTimestamp == nil {
					found = p
					return true, nil
				}
			}
		}
		return false, nil
	})
	return found
}

func TestAMigrationPodKilledMidRunIsRetriedAndAppliedOnce(t *testing.T) {
	share(t, weightOne, 60*time.Second)
	res := scenario(t, migrationPodKilledScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "kill", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	r.MustDeploy(framework.BaseValues())
	slow := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"},
		"migration": map[string]any{"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "15s")}}})
	done := deployAsync(r, slow)
	victim := migratingPod(r, t, 2*time.Minute)
	time.Sleep(3 * time.Second) // well inside the 15 s migration transaction
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatalf("killing %s: %v", victim.Name, err)
	}
	t.Logf("killed migration pod %s mid-run", victim.Name)
	got := <-done
	res.DurationsSec = append(res.DurationsSec, got.d.Seconds())
	res.Upgrades = 1
	if got.err != nil {
		t.Fatalf("the upgrade failed although the killed migration had retries left: %v", got.err)
	}
	id := r.AppIdentity(ctx)
	job := r.MigrationJob(ctx, id)
	if job == nil || job.Status.Succeeded != 1 {
		t.Fatalf("no succeeded migration Job for identity %s", id)
	}
	if job.Status.Failed < 1 {
		t.Errorf("the Job counts %d failed pods: the kill did not land mid-run", job.Status.Failed)
	}
	if got := r.Psql("select string_agg(version::text, ',' order by version) from schema_migrations"); got != "1,2" {
		t.Errorf("schema_migrations holds %q, want 1,2 (version 2 applied once)", got)
	}
	if n := r.PsqlInt("select count(*) from demo_migrate_runs where identity = '" + id + "'"); n != 1 {
		t.Errorf("identity %s completed %d migration runs, want 1", id, n)
	}
}

func TestADatabaseDownDuringTheMigrationFailsClearlyWithNothingHalfApplied(t *testing.T) {
	share(t, weightOne, 55*time.Second)
	res := scenario(t, databaseDownScenario, env.Helm3)
	ns := env.NewNamespace(t, "dbdown", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	r.MustDeploy(framework.BaseValues())
	values := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"},
		"migration": map[string]any{"backoffLimit": 1, "env": []any{
			framework.EnvVar("DEMO_MIGRATION_DELAY", "15s"), framework.EnvVar("MIGRATE_CONNECT_TIMEOUT", "10s")}}})
	done := deployAsync(r, values)
	migratingPod(r, t, 2*time.Minute)
	time.Sleep(3 * time.Second)
	env.Run.Must(t, env.Kubectl, "scale", "-n", ns, "statefulset/"+r.Fullname()+"-postgresql", "--replicas=0")
	t.Logf("database scaled to 0 during the migration (the image stops PostgreSQL with SIGINT: a fast shutdown that aborts open transactions)")
	got := <-done
	res.DurationsSec = append(res.DurationsSec, got.d.Seconds())
	if got.err == nil {
		t.Fatalf("the upgrade succeeded with the database down:\n%s", got.out)
	}
	if !strings.Contains(got.out, "BackoffLimitExceeded") {
		t.Errorf("helm's error does not say the migration Job failed (BackoffLimitExceeded):\n%s", got.out)
	}
	if !strings.Contains(got.out, "connect") {
		t.Errorf("helm's output does not show the migration's connection failure:\n%s", got.out)
	}
	env.Run.Must(t, env.Kubectl, "scale", "-n", ns, "statefulset/"+r.Fullname()+"-postgresql", "--replicas=1")
	env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", ns, "statefulset/"+r.Fullname()+"-postgresql", "--timeout=2m")
	if got := r.Psql("select string_agg(version::text, ',' order by version) from schema_migrations"); got != "1" {
		t.Errorf("schema_migrations holds %q after the failed migration, want 1 (nothing half-applied)", got)
	}
	if n := r.PsqlInt("select count(*) from information_schema.columns where table_name='records' and column_name='author'"); n != 0 {
		t.Errorf("records.author exists: the interrupted migration was half-applied")
	}
}
