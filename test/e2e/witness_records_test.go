//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/internal/demo/migrate"
	"github.com/premigrate/premigrate/internal/record"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	signalledMigrationScenario      = scenarios.Declare(framework.NeverSkipped, "signalled-migration")
	recordsUnreadableScenario       = scenarios.Declare(framework.LeastPrivilege, "records-unreadable")
	rollbackPastKeptRecordsScenario = scenarios.Declare(framework.Forward, "rollback-past-kept-records")
)

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
	job := r.Fullname() + "-migrate-" + id
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

// When `gate run` cannot read the records (here its Role no longer names the store that keeps them; the
// release's ConfigMap it still may read and write), it cannot tell whether its
// identity already ran, so it must run nothing: a re-created Job of a recorded identity (a rollback, a revert,
// a TTL) would otherwise run an older migration against a newer schema.
func TestAMigrationJobThatCannotReadTheRecordsRunsNothing(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, recordsUnreadableScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "unreadable", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	values := framework.Merge(framework.BaseValues(), map[string]any{
		"image":      map[string]any{"tag": "v2"},
		"migration":  map[string]any{"mode": "job", "backoffLimit": 0},
		"postgresql": map[string]any{"auth": map[string]any{"password": "unreadable-test-password"}},
	})
	r.MustDeploy(values)
	id := r.AppIdentity(ctx)
	job := r.Fullname() + "-migrate-" + id
	runs := r.PsqlInt("select count(*) from demo_migrate_runs")

	// the Job's manifest as Helm applied it, to re-create it as a revert or a TTL's re-apply would
	var manifest string
	for _, doc := range strings.Split(env.Run.Must(t, env.Helm3, "get", "manifest", r.Name, "-n", ns), "\n---") {
		if strings.Contains(doc, "\nkind: Job\n") {
			manifest = doc
		}
	}
	if manifest == "" {
		t.Fatal("no Job in the release's manifest")
	}
	env.Run.Must(t, env.Kubectl, "patch", "role", job, "-n", ns, "--type", "json",
		"-p", `[{"op":"test","path":"/rules/0/resourceNames/1","value":"`+r.StoreName()+`"},`+
			`{"op":"replace","path":"/rules/0/resourceNames","value":["`+r.AnchorName()+`"]}]`)
	if err := env.Client.BatchV1().Jobs(ns).Delete(ctx, job, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	framework.WaitUntil(t, "Job "+job+" to be gone", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.Client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	start := time.Now()
	if _, err := env.Run.Input(t, []byte(manifest), env.Kubectl, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("re-creating Job %s: %v", job, err)
	}
	// gate run retries the records for --wait-for-configmap (2m), then gives up
	framework.WaitUntil(t, "the re-created Job "+job+" to fail", 4*time.Minute, func(ctx context.Context) (bool, error) {
		j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		return err == nil && jobFailed(j), nil
	})
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
		t.Errorf("%d migration runs, was %d: the Job ran its migration without knowing whether it was recorded", got, runs)
	}
	log := jobLog(r, job)
	if !strings.Contains(log, "cannot tell whether identity "+id+" is already recorded") {
		t.Errorf("the Job's log does not say why it ran nothing:\n%s", log)
	}
	if pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job}); err == nil {
		for _, p := range pods.Items {
			for _, s := range p.Status.ContainerStatuses {
				if s.Name == "migrate" && s.State.Terminated != nil && s.State.Terminated.ExitCode != 1 {
					t.Errorf("the migration container exited %d, want 1", s.State.Terminated.ExitCode)
				}
			}
		}
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
	first := r.AppIdentity(ctx)
	r.MustDeploy(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v2"}}))
	second := r.AppIdentity(ctx)
	data := r.Records(ctx)
	if _, ok := data[second]; !ok || !record.WasPruned(data, first) {
		t.Fatalf("records %v: want %s kept (the identity just recorded) and %s listed as pruned (keepRecords 1)", data, second, first)
	}
	runs := r.PsqlInt("select count(*) from demo_migrate_runs")

	start := time.Now()
	env.Run.Must(t, env.Helm4, "rollback", r.Name, "1", "-n", ns)
	job := r.Fullname() + "-migrate-" + first
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
