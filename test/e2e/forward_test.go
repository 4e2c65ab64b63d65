//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	destructiveMigrationScenario    = scenarios.Declare(framework.Forward, framework.CI, "destructive-migration")
	rollbackPastKeptRecordsScenario = scenarios.Declare(framework.Forward, framework.CI, "rollback-past-kept-records")
	heldBackOlderMigrationScenario  = scenarios.Declare(framework.Forward, framework.CI, "held-back-older-migration")
)

func TestADestructiveMigrationIsRefusedUntilTheOperatorAcceptsDataLoss(t *testing.T) {
	share(t, weightOne, 45*time.Second)
	res := scenario(t, destructiveMigrationScenario, env.Helm4)
	ns := env.NewNamespace(t, "destr", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	r.MustDeploy(framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v5"}}))
	column := "select count(*) from information_schema.columns where table_name='records' and column_name='source'"
	if r.PsqlInt(column) != 1 {
		t.Fatalf("records.source is missing at v5")
	}
	out, d, err := r.Deploy(framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v6"}}))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	if err == nil {
		t.Fatalf("the destructive upgrade succeeded without SCHEMA_ACCEPT_DATA_LOSS:\n%s", out)
	}
	if !strings.Contains(out, "records.source") {
		t.Errorf("the refusal shown by helm does not name the column it would drop:\n%s", out)
	}
	if r.PsqlInt(column) != 1 {
		t.Errorf("records.source was dropped although the migration was refused")
	}
	// the refusal (exit 3) fails the Job at once through its podFailurePolicy: one pod, no retry
	ctx := context.Background()
	if j := releaseJob(ctx, r, r.Fullname()+"-migrate"); j.Status.Failed != 1 || !failedFor(j, "PodFailurePolicy") {
		t.Errorf("the refused migration's Job has %d failed pods and conditions %+v: want 1 pod and Failed for PodFailurePolicy, not retried",
			j.Status.Failed, j.Status.Conditions)
	}
	_, d = r.MustDeploy(framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v6"},
		"migration": map[string]any{"env": []any{framework.EnvVar("SCHEMA_ACCEPT_DATA_LOSS", "true")}}}))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 2
	if r.PsqlInt(column) != 0 {
		t.Errorf("records.source still exists after the accepted destructive migration")
	}
}

// A rollback past the records that migration.keepRecords keeps: the identity ran on this database, but its
// record was pruned. Its re-created Job must refuse to run it (an older migration on a newer schema), naming
// the value to raise, and its pods must fail at once with that reason instead of waiting for the timeout.
func TestARollbackPastTheKeptRecordsIsRefusedNamingKeepRecords(t *testing.T) {
	share(t, weightOne, 60*time.Second)
	res := scenario(t, rollbackPastKeptRecordsScenario, env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "pruned", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	base := framework.Merge(framework.BaseValues(), map[string]any{
		"migration":  map[string]any{"mode": "job", "keepRecords": 1},
		"postgresql": map[string]any{"auth": map[string]any{"password": "pruned-test-password"}},
	})
	r.MustDeploy(base)
	first, firstJob := r.AppIdentity(ctx), appMigrationJob(ctx, r)
	r.MustDeploy(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v2"}}))
	second := r.AppIdentity(ctx)
	data := r.Records(ctx)
	if _, ok := data[second]; !ok || !record.WasPruned(data, first) {
		t.Fatalf("records %v: want %s kept (the identity just recorded) and %s listed as pruned (keepRecords 1)", data, second, first)
	}
	runs := r.PsqlInt("select count(*) from demo_migrate_runs")

	start := time.Now()
	env.Run.Must(t, env.Helm4, "rollback", r.Name, "1", "-n", ns)
	job := firstJob
	framework.WaitUntil(t, "the re-created Job "+job+" to fail", 3*time.Minute, func(ctx context.Context) (bool, error) {
		j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		return err == nil && jobFailed(j), nil
	})
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if j := releaseJob(ctx, r, job); j.Status.Failed != 1 || !failedFor(j, "PodFailurePolicy") {
		t.Errorf("Job %s: %d failed pods, conditions %+v: want one refusal (exit 3) failing it at once", job, j.Status.Failed, j.Status.Conditions)
	}
	if log := jobLog(r, job); !strings.Contains(log, "its record was pruned") || !strings.Contains(log, "migration.keepRecords") {
		t.Errorf("the refusal does not say why and what to raise:\n%s", log)
	}
	if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
		t.Errorf("%d migration runs, was %d: the migration of pruned identity %s ran again", got, runs, first)
	}
	if v := r.PsqlInt("select max(version) from schema_migrations"); v != 2 {
		t.Errorf("schema at version %d, want 2", v)
	}
	framework.WaitUntil(t, "a pod of "+first+" to fail its gate", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, p := range r.AppPods(ctx, first) {
			for _, s := range p.Status.InitContainerStatuses {
				term := s.State.Terminated
				if term == nil {
					term = s.LastTerminationState.Terminated
				}
				if s.Name == "wait-for-migration" && term != nil && term.ExitCode == 1 {
					return true, nil
				}
			}
		}
		return false, nil
	})
	checked := 0
	for _, p := range r.AppPods(ctx, first) {
		// the rollback's pods only: an install pod of the same identity may still be terminating (the app
		// keeps serving 15 s after SIGTERM), and it started its app before the upgrade, as it should
		if p.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
			continue
		}
		checked++
		if n := r.PsqlInt(fmt.Sprintf("select count(*) from demo_pod_starts where pod = '%s'", p.Name)); n != 0 {
			t.Errorf("pod %s of the pruned identity %s started its app after the rollback", p.Name, first)
		}
	}
	if checked == 0 {
		t.Errorf("no pod of the pruned identity %s was created by the rollback: nothing was checked", first)
	}

	// without the refused Job (a TTL, a cleanup), new pods of the pruned identity have no evidence left at all:
	// their gate must still fail at once, not wait out its timeout for a migration that will never run
	if err := env.Client.BatchV1().Jobs(ns).Delete(ctx, job, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	framework.WaitUntil(t, "Job "+job+" to be gone", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.Client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	deleted := time.Now()
	for _, p := range r.AppPods(ctx, first) {
		_ = env.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
	}
	framework.WaitUntil(t, "a new pod of "+first+" without its Job to fail its gate at once", time.Minute, func(ctx context.Context) (bool, error) {
		for _, p := range r.AppPods(ctx, first) {
			if p.CreationTimestamp.Time.Before(deleted.Truncate(time.Second)) {
				continue
			}
			for _, s := range p.Status.InitContainerStatuses {
				for _, term := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
					if s.Name == "wait-for-migration" && term != nil && term.ExitCode == 1 {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
}

// An older deploy's migration Job that starts only after a newer deploy's migration succeeded (held back: a
// node that was down, a quota, a Job suspended by a queueing controller) must never run: it would apply an
// older migration after a newer one. Job mode, by `helm template | kubectl apply`: v3's Job is applied
// suspended, v4 is applied and migrates, then v3's Job is let go. The evidence is the migration's own: no run
// of v3's identity in demo_migrate_runs (the demo leaves a newer schema alone and records a run, so a run of
// v3 would show there), and the schema as v4 left it.
func TestAnOlderMigrationHeldBackUntilANewerOneSucceededNeverRuns(t *testing.T) {
	share(t, weightOne, 75*time.Second)
	res := scenario(t, heldBackOlderMigrationScenario, env.Kubectl)
	ctx := context.Background()
	ns := env.NewNamespace(t, "heldback", restricted)
	r := env.NewRelease(t, ns, "app", "")
	base := framework.Merge(framework.BaseValues(), map[string]any{
		"migration":  map[string]any{"mode": "job"},
		"postgresql": map[string]any{"auth": map[string]any{"password": "held-back-password"}},
	})
	r.Apply(suspendJobs(t, r.Template(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v3"}}))))
	older := r.AppIdentity(ctx)
	olderJob := r.MigrationJob(ctx, older)
	if olderJob == nil || olderJob.Spec.Suspend == nil || !*olderJob.Spec.Suspend {
		t.Fatalf("v3's migration Job (identity %s) was not applied suspended: %+v", older, olderJob)
	}
	time.Sleep(1100 * time.Millisecond) // Jobs' creation times have a resolution of one second
	start := time.Now()
	r.Apply(r.Template(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v4"}})))
	newer := r.AppIdentity(ctx)
	r.RolledOut(4 * time.Minute)
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if _, ok := r.Records(ctx)[newer]; !ok {
		t.Fatalf("v4's identity %s is not recorded after its rollout", newer)
	}

	env.Run.Must(t, env.Kubectl, "patch", "job", "-n", ns, olderJob.Name, "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	var finished *batchv1.Job
	framework.WaitUntil(t, "v3's migration Job to finish", 3*time.Minute, func(ctx context.Context) (bool, error) {
		j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, olderJob.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		finished = j
		return j.Status.Succeeded > 0 || jobFailed(j), nil
	})
	res.Upgrades = 2
	if n := r.PsqlInt("select count(*) from demo_migrate_runs where identity = '" + older + "'"); n != 0 {
		t.Errorf("v3's migration ran %d times after v4's had succeeded: an older migration ran after a newer one", n)
	}
	if got := r.Psql("select string_agg(version::text, ',' order by version) from schema_migrations"); got != "1,2,3,4" {
		t.Errorf("schema_migrations holds %q, want 1..4 as v4's migration left it", got)
	}
	if _, ok := r.Records(ctx)[older]; ok {
		t.Errorf("v3's identity %s was recorded after v4's", older)
	}
	log, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", ns, "job/"+olderJob.Name, "-c", "migrate")
	if err != nil {
		t.Fatal(err)
	}
	if !failedFor(finished, "PodFailurePolicy") || !strings.Contains(log, "a migration never runs after one deployed after it") {
		t.Errorf("v3's Job was not refused at once as backwards (conditions %+v); its log:\n%s", finished.Status.Conditions, log)
	}
	if got := r.AppIdentity(ctx); got != newer {
		t.Errorf("the Deployment runs identity %s, want v4's %s", got, newer)
	}
	r.AssertWitness(ctx, newer)
}
