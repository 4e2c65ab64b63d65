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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	installRacingUpgradeScenarios   = scenarios.DeclareEach(framework.Once, "install-racing-upgrade", framework.In(framework.Matrix, "helm3"), framework.In(framework.Matrix, "helm4"))
	timedOutInstallRetriedScenarios = scenarios.DeclareEach(framework.Once, "timed-out-install-retried", framework.In(framework.Matrix, "helm3"), framework.In(framework.CI, "helm4"))
	concurrentMigrationsScenario    = scenarios.Declare(framework.Once, framework.Matrix, "concurrent-migrations")
	backToBackMigrationsScenario    = scenarios.Declare(framework.Once, framework.CI, "back-to-back-migrations")
)

func TestTwoMigrationsStartedAtOnceAreSerializedByTheLock(t *testing.T) {
	share(t, weightOne, 40*time.Second)
	res := scenario(t, concurrentMigrationsScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "lock", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	r.MustDeploy(framework.BaseValues())
	dep, err := env.Client.AppsV1().Deployments(ns).Get(ctx, r.Fullname(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the app Deployment: %v", err)
	}
	app := dep.Spec.Template.Spec.Containers[0]
	// the app's env without its PREMIGRATE_IDENTITY (from the pod annotation): each racer names its own
	var appEnv []corev1.EnvVar
	for _, e := range app.Env {
		if e.Name != "PREMIGRATE_IDENTITY" {
			appEnv = append(appEnv, e)
		}
	}
	for i := 1; i <= 2; i++ {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("racer-%d", i)},
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{Spec: framework.RestrictedPod(corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "migrate", Image: "ghcr.io/premigrate/demo:v5", Args: []string{"migrate"},
						// each version sleeps 4 s inside its transaction: whichever run takes the lock first holds it
						// for about 16 s, so the two runs overlap and the second must wait
						Env: append(append([]corev1.EnvVar{}, appEnv...),
							corev1.EnvVar{Name: "PREMIGRATE_IDENTITY", Value: fmt.Sprintf("racer-%d", i)},
							corev1.EnvVar{Name: "DEMO_MIGRATION_DELAY", Value: "4s"}),
					}},
				})},
			},
		}
		job.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](65532)
		if _, err := env.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", job.Name, err)
		}
	}
	start := time.Now()
	framework.WaitUntil(t, "both racing migrations to finish", 3*time.Minute, func(ctx context.Context) (bool, error) {
		done := 0
		for i := 1; i <= 2; i++ {
			j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, fmt.Sprintf("racer-%d", i), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if j.Status.Failed > 0 {
				return false, fmt.Errorf("%s failed", j.Name)
			}
			done += int(j.Status.Succeeded)
		}
		return done == 2, nil
	})
	res.Numbers["bothDoneSec"] = time.Since(start).Seconds()
	if got := r.Psql("select string_agg(version::text, ',' order by version) from schema_migrations"); got != "1,2,3,4,5" {
		t.Errorf("schema_migrations holds versions %q, want each of 1..5 once", got)
	}
	applied := r.PsqlInt("select coalesce(sum(cardinality(applied)), 0) from demo_migrate_runs where identity like 'racer-%'")
	if applied != 4 {
		t.Errorf("the two racing runs applied %d versions between them, want 4 (2..5, each once)", applied)
	}
	waited := 0
	for i := 1; i <= 2; i++ {
		log, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", ns, fmt.Sprintf("job/racer-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(log, "another migration run holds the lock; waiting for it") {
			waited++
		}
	}
	if waited != 1 {
		t.Errorf("%d of the two racing runs logged that they waited for the lock, want exactly 1: the runs did not overlap", waited)
	}
}

// Three deploys of job mode applied back to back (a GitOps tool, a CI pipeline that applies each commit):
// three Jobs at once. The first migration is slow, so the other two start while it runs. The release's
// migration lock must run them one at a time; and no migration may run after one deployed after it
// succeeded. The evidence is the migration's own: the demo's migrate takes a PostgreSQL advisory lock and
// logs when another run holds it, which the gate's lock must make impossible; its runs, with the database's
// start and finish times, are in demo_migrate_runs.
func TestMigrationsAppliedBackToBackRunOneAtATimeInTheOrderTheyWereDeployed(t *testing.T) {
	share(t, weightOne, 90*time.Second)
	res := scenario(t, backToBackMigrationsScenario, env.Kubectl)
	ctx := context.Background()
	ns := env.NewNamespace(t, "backtoback", restricted)
	r := env.NewRelease(t, ns, "app", "")
	base := framework.Merge(framework.BaseValues(), map[string]any{
		"migration":  map[string]any{"mode": "job"},
		"postgresql": map[string]any{"auth": map[string]any{"password": "back-to-back-password"}},
	})
	r.Apply(r.Template(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v1"}})))
	r.RolledOut(4 * time.Minute)

	type deploy struct {
		tag, id, job string
		created      time.Time
	}
	var deploys []deploy
	start := time.Now()
	for i, tag := range []string{"v3", "v4", "v5"} {
		values := framework.Merge(base, map[string]any{"image": map[string]any{"tag": tag}})
		if i == 0 {
			// versions 2 and 3, 15 s each: the next two deploys come while it runs
			values = framework.Merge(values, map[string]any{"migration": map[string]any{"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "15s")}}})
		}
		r.Apply(r.Template(values))
		id := r.AppIdentity(ctx)
		job := r.MigrationJob(ctx, id)
		if job == nil {
			t.Fatalf("deploy of %s: no migration Job for identity %s", tag, id)
		}
		deploys = append(deploys, deploy{tag: tag, id: id, job: job.Name, created: job.CreationTimestamp.Time})
		if i < 2 {
			// Jobs' creation times have a resolution of one second; and each Job's pod reads its own Job, by
			// name, before the next apply renames the Job in the migration's Role (else it orders itself by
			// its pod's start, which misses a deploy made before that)
			time.Sleep(8 * time.Second)
		}
	}
	r.RolledOut(4 * time.Minute)
	last := deploys[len(deploys)-1]
	if got := r.AppIdentity(ctx); got != last.id {
		t.Fatalf("the Deployment runs identity %s, want the last deploy's %s", got, last.id)
	}
	finished := map[string]*batchv1.Job{}
	framework.WaitUntil(t, "every migration Job to finish", 3*time.Minute, func(ctx context.Context) (bool, error) {
		for _, d := range deploys {
			j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, d.job, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if j.Status.Succeeded == 0 && !jobFailed(j) {
				return false, nil
			}
			finished[d.tag] = j
		}
		return true, nil
	})
	res.Numbers["allFinishedSec"] = time.Since(start).Seconds()
	r.AssertWitness(ctx, last.id)

	waitedForTheGate, refused := 0, 0
	for _, d := range deploys {
		log, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", ns, "job/"+d.job, "-c", "migrate")
		if err != nil {
			t.Fatal(err)
		}
		// the demo's own lock: held by another run only when two migrations ran at once
		if strings.Contains(log, "another migration run holds the lock") {
			t.Errorf("the migration of %s (Job %s) found another migration running on the database: the release's lock "+
				"did not keep them apart; its log:\n%s", d.tag, d.job, log)
		}
		if strings.Contains(log, "another migration of this release holds the lock") {
			waitedForTheGate++
		}
		if jobFailed(finished[d.tag]) {
			if !strings.Contains(log, "a migration never runs after one deployed after it") {
				t.Errorf("Job %s of %s failed, and not because a later deploy's migration had succeeded; its log:\n%s", d.job, d.tag, log)
			}
			refused++
		}
	}
	res.Numbers["waitedForTheLock"] = float64(waitedForTheGate)
	res.Numbers["refusedAsBackwards"] = float64(refused)
	if waitedForTheGate == 0 {
		t.Errorf("no migration waited for the release's lock: the deploys did not overlap, so this proves nothing")
	}
	// the runs, as the database recorded them: one at a time, in the order of the deploys
	ids := make([]string, len(deploys))
	for i, d := range deploys {
		ids[i] = "'" + d.id + "'"
	}
	ts := func(col string) string {
		return "to_char(" + col + " at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
	}
	rows := strings.Split(r.Psql("select identity || ' ' || "+ts("started_at")+" || ' ' || "+ts("finished_at")+
		" from demo_migrate_runs where identity in ("+strings.Join(ids, ",")+") order by started_at"), "\n")
	order := map[string]int{}
	for i, d := range deploys {
		order[d.id] = i
	}
	prevOrder, prevEnd := -1, time.Time{}
	for _, row := range rows {
		f := strings.Fields(row)
		if len(f) != 3 {
			continue
		}
		i, ours := order[f[0]]
		if !ours {
			continue
		}
		started, err1 := time.Parse(time.RFC3339Nano, f[1])
		ended, err2 := time.Parse(time.RFC3339Nano, f[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("demo_migrate_runs row %q: %v %v", row, err1, err2)
		}
		if i < prevOrder {
			t.Errorf("the migration of %s ran after that of a later deploy: runs %v", deploys[i].tag, rows)
		}
		if started.Before(prevEnd) {
			t.Errorf("the migration of %s started at %s, before the previous run finished at %s: runs %v", deploys[i].tag, f[1], prevEnd, rows)
		}
		prevOrder, prevEnd = i, ended
	}
	if got := r.Psql("select string_agg(version::text, ',' order by version) from schema_migrations"); got != "1,2,3,4,5" {
		t.Errorf("schema_migrations holds %q, want each of 1..5 once", got)
	}
	if n := r.PsqlInt("select count(*) from demo_migrate_runs where identity = '" + last.id + "'"); n != 1 {
		t.Errorf("the last deploy's migration ran %d times, want once", n)
	}
	t.Logf("three deploys back to back: %d waited for the release's lock, %d refused as backwards, all done in %s",
		waitedForTheGate, refused, time.Since(start).Round(time.Second))
}

// An install whose migration still runs when the first upgrade starts (an install without --wait and an
// upgrade at once in a pipeline; an install that timed out, then `helm upgrade --install`). The install's Job
// is a plain one; the upgrade's is a pre-upgrade hook, beside the install's ServiceAccount, which the upgrade
// keeps (docs/design.md). The two migrations must not run at once, and the upgrade must end with its own migration
// recorded and its pods released. The evidence is the demo migration's own advisory lock, which it logs
// finding held, and its runs in demo_migrate_runs.
func TestTheFirstUpgradeWaitsForTheInstallsMigrationStillRunning(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range helmCLIs() {
		t.Run(h.name, func(t *testing.T) {
			share(t, weightOne, 120*time.Second)
			res := scenario(t, installRacingUpgradeScenarios[h.name], h.bin)
			ctx := context.Background()
			ns := env.NewNamespace(t, "race-"+h.name, restricted)
			r := env.NewRelease(t, ns, "app", h.bin)
			install := framework.Merge(framework.BaseValues(), map[string]any{
				"image":     map[string]any{"tag": "v2"},
				"migration": map[string]any{"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "15s")}},
			})
			env.Run.Must(t, h.bin, "install", r.Name, env.Chart, "-n", ns, "--values", r.ValuesFile(install)) // no --wait
			installJob := appMigrationJob(ctx, r)
			framework.WaitUntil(t, "the install's migration to run", 2*time.Minute, func(ctx context.Context) (bool, error) {
				pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + installJob})
				if err != nil {
					return false, err
				}
				for _, p := range pods.Items {
					for _, cs := range p.Status.ContainerStatuses {
						if cs.Name == "migrate" && cs.State.Running != nil {
							return true, nil
						}
					}
				}
				return false, nil
			})
			time.Sleep(3 * time.Second) // inside the install's migration (two versions of 15 s)
			_, d, err := r.Deploy(framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v3"}}))
			if err != nil {
				t.Fatalf("the first upgrade, while the install's migration ran: %v", err)
			}
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades = 1
			id := r.AppIdentity(ctx)
			r.AssertWitness(ctx, id)

			log, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", ns, "job/"+r.Fullname()+"-migrate", "-c", "migrate")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(log, "another migration run holds the lock") {
				t.Errorf("the upgrade's migration found the install's running on the database: the release's lock did not keep them apart; its log:\n%s", log)
			}
			if !strings.Contains(log, "another migration of this release holds the lock") {
				t.Errorf("the upgrade's migration did not wait for the install's: the race this scenario is about did not happen; its log:\n%s", log)
			}
			if got := r.Psql("select string_agg(version::text, ',' order by version) from schema_migrations"); got != "1,2,3" {
				t.Errorf("schema_migrations holds %q, want each of 1..3 once", got)
			}
			if n := r.PsqlInt("select count(*) from demo_migrate_runs where identity = '" + id + "'"); n != 1 {
				t.Errorf("the upgrade's migration ran %d times, want once", n)
			}
			if _, ok := r.Records(ctx)[id]; !ok {
				t.Errorf("the upgrade's identity %s is not recorded", id)
			}
			t.Logf("the first upgrade, started while the install's migration ran, took %s; the upgrade's migration log:\n%s", d.Round(time.Second), log)
		})
	}
}

// suspendJobs marks every Job of a rendering suspended (spec.suspend: true): its pods start only when the
// Job is let go.
func suspendJobs(t *testing.T, manifest []byte) []byte {
	t.Helper()
	docs := strings.Split(string(manifest), "\n---")
	n := 0
	for i, d := range docs {
		if strings.Contains(d, "\nkind: Job\n") && strings.Count(d, "\nspec:\n") == 1 {
			docs[i] = strings.Replace(d, "\nspec:\n", "\nspec:\n  suspend: true\n", 1)
			n++
		}
	}
	if n == 0 {
		t.Fatalf("the rendering has no Job to suspend:\n%s", manifest)
	}
	return []byte(strings.Join(docs, "\n---"))
}

// A first `helm upgrade --install --wait` whose timeout is shorter than its migration fails and leaves a
// failed release with the install's Job still running; a pipeline's retry, `helm upgrade --install` with the
// same values, is then an upgrade whose pre-upgrade hook has the same identity. The two must not run at once,
// the retry must succeed, and the migration's versions are applied once (the demo's own records).
func TestARetryAfterAnInstallThatTimedOutFinishesTheSameMigration(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range helmCLIs() {
		t.Run(h.name, func(t *testing.T) {
			share(t, weightOne, 100*time.Second)
			res := scenario(t, timedOutInstallRetriedScenarios[h.name], h.bin)
			ctx := context.Background()
			ns := env.NewNamespace(t, "retry-"+h.name, restricted)
			r := env.NewRelease(t, ns, "app", h.bin)
			values := framework.Merge(framework.BaseValues(), map[string]any{
				"image": map[string]any{"tag": "v2"},
				// two versions of 25 s: the install's migration outlives the release lock's lease (30 s) after the
				// retry started, so a retry that took its ServiceAccount away (its token then fails to renew the
				// lock) is seen every time, not only on a slow node
				"migration": map[string]any{"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "25s")}},
			})
			if out, _, err := r.Deploy(values, "--timeout", "10s"); err == nil {
				t.Fatalf("the install with a 10 s timeout and a 50 s migration succeeded:\n%s", out)
			}
			id := r.AppIdentity(ctx)
			installJob := r.MigrationJob(ctx, id)
			if installJob == nil || installJob.Status.Succeeded > 0 || jobFailed(installJob) {
				t.Fatalf("want the install's migration Job of identity %s still running after the timeout, got %+v", id, installJob)
			}
			// the race needs the install's migration to hold the release's lock when the retry's hook starts; on
			// a busy node its pod may not even have started within the install's 10 s (the hook then took the
			// lock first, and the scenario judged a race that did not happen)
			framework.WaitUntil(t, "the install's migration to hold the release's lock", 3*time.Minute, func(ctx context.Context) (bool, error) {
				cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, r.StoreName(), metav1.GetOptions{})
				return err == nil && strings.Contains(cm.Annotations[record.LockAnnotation], installJob.Name), nil
			})
			// the install's Job leaves the release with the retry (its manifest has the hook instead): follow its
			// log now
			installLog := make(chan string, 1)
			go func() {
				out, _ := env.Run.Stdout(t, env.Kubectl, "logs", "-f", "-n", ns, "job/"+installJob.Name, "-c", "migrate")
				installLog <- out
			}()
			_, d := r.MustDeploy(values)
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades = 1
			if got := r.AppIdentity(ctx); got != id {
				t.Errorf("the retry moved the Deployment to identity %s, want %s (same values)", got, id)
			}
			r.AssertWitness(ctx, id)
			hookLog, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", ns, "job/"+r.Fullname()+"-migrate", "-c", "migrate")
			if err != nil {
				t.Fatal(err)
			}
			var first string
			select {
			case first = <-installLog:
			case <-time.After(time.Minute):
				t.Fatalf("the install's migration log did not end a minute after the retry")
			}
			for job, log := range map[string]string{installJob.Name: first, r.Fullname() + "-migrate": hookLog} {
				if strings.Contains(log, "another migration run holds the lock") {
					t.Errorf("Job %s found another migration running on the database: the release's lock did not keep them apart; its log:\n%s", job, log)
				}
			}
			if !strings.Contains(hookLog, "another migration of this release holds the lock") {
				t.Errorf("the retry's migration did not wait for the install's: the race this scenario is about did not happen; its log:\n%s", hookLog)
			}
			if got := r.Psql("select string_agg(version::text, ',' order by version) from schema_migrations"); got != "1,2" {
				t.Errorf("schema_migrations holds %q, want each of 1..2 once", got)
			}
			// the install's own run applied it: the demo commits a row when a run starts applying, so a run stopped
			// mid-way leaves its start
			if starts := r.PsqlInt("select count(*) from demo_migrate_starts where identity = '" + id + "'"); starts != 1 {
				t.Errorf("%d runs of %s started applying, want 1: the install's migration did not finish its own run: %s", starts, id,
					r.Psql("select string_agg(array_to_string(pending, ',') || ' at ' || started_at, '; ' order by id) from demo_migrate_starts"))
			}
			if _, ok := r.Records(ctx)[id]; !ok {
				t.Errorf("identity %s is not recorded after the retry", id)
			}
			if status := env.Run.Must(t, h.bin, "status", r.Name, "-n", ns); !strings.Contains(status, "STATUS: deployed") {
				t.Errorf("the release is not deployed after the retry:\n%s", status)
			}
			// the migration command ran once: the install's run recorded the identity, so the retry's hook, which
			// waited for it, had nothing to run. Had the retry taken the install migration's ServiceAccount, the
			// install's run would have finished unable to record it, and the hook would have run the command again
			// (the demo records every run that ends, one that applies nothing too)
			runs := r.PsqlInt("select count(*) from demo_migrate_runs where identity = '" + id + "'")
			res.Numbers["migrationRuns"] = float64(runs)
			if runs != 1 {
				t.Errorf("the migration command of %s ran %d times to its end, want once: the install's run did not record it", id, runs)
			}
		})
	}
}
