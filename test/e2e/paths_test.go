//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	jobModeKubectlApplyScenario = scenarios.Declare(framework.EveryPath, framework.Matrix, "job-mode-kubectl-apply")
	rollbackScenario            = scenarios.Declare(framework.EveryPath, framework.Matrix, "rollback")
	noHooksUpgradeScenario      = scenarios.Declare(framework.EveryPath, framework.Matrix, "no-hooks-upgrade")
)

func TestTemplateAndKubectlApplyInJobModeNeverConflictsAndGatesEveryRollout(t *testing.T) {
	share(t, weightOne, 210*time.Second)
	res := scenario(t, jobModeKubectlApplyScenario, env.Kubectl)
	ctx := context.Background()
	ns := env.NewNamespace(t, "apply", restricted)
	r := env.NewRelease(t, ns, "app", "")
	base := framework.Merge(framework.BaseValues(), map[string]any{
		"migration":  map[string]any{"mode": "job"},
		"postgresql": map[string]any{"auth": map[string]any{"password": "apply-test-password"}},
	})
	steps := []map[string]any{
		{"image": map[string]any{"tag": "v1"}},
		{"image": map[string]any{"tag": "v2"}},
		{"image": map[string]any{"tag": "v2"}, "env": []any{framework.EnvVar("GREETING", "a")}},
		{"image": map[string]any{"tag": "v3"}},
		{"image": map[string]any{"tag": "v4"}},
		{"image": map[string]any{"tag": "v5"}},
		// the gate mounted as an image volume instead of copied by the install-gate init container: a new Job
		// spec of the same identity, so a new Job (never a patch) whose gate runs nothing again
		{"image": map[string]any{"tag": "v5"}, "gate": map[string]any{"delivery": "imageVolume"}},
	}
	var last []byte
	prevID, runs := "", 0
	for i, s := range steps {
		start := time.Now()
		last = r.Template(framework.Merge(base, s))
		r.Apply(last)
		r.RolledOut(4 * time.Minute)
		id := r.AppIdentity(ctx)
		// the gate lets pods go on the record, written just before the Job's pod exits: the Job's own
		// status may follow a moment later
		name := appMigrationJob(ctx, r)
		framework.WaitUntil(t, "Job "+name+" to succeed", time.Minute, func(ctx context.Context) (bool, error) {
			job, err := env.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Errorf("apply %d: the Job of identity %s: %w", i+1, id, err)
			}
			return job.Status.Succeeded == 1, nil
		})
		r.AssertWitness(ctx, id)
		if n := r.PsqlInt("select count(*) from demo_migrate_runs"); id == prevID && n != runs {
			t.Errorf("apply %d: the migration ran %d times, was %d: a new Job of the recorded identity %s ran it again", i+1, n, runs, id)
		} else {
			runs = n
		}
		prevID = id
		if job, err := env.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			_, mounted := s["gate"]
			if got := len(job.Spec.Template.Spec.InitContainers) == 0; got != mounted {
				t.Errorf("apply %d: Job %s has %d init containers; the gate should be an image volume: %v", i+1, name, len(job.Spec.Template.Spec.InitContainers), mounted)
			}
			if job.Status.Failed != 0 {
				t.Errorf("apply %d: Job %s had %d failed pods, want 0", i+1, name, job.Status.Failed)
			}
		}
		res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
		res.Upgrades++
		t.Logf("apply %d: identity %s rolled out in %s", i+1, id, time.Since(start).Round(time.Millisecond))
	}
	before := len(r.Jobs(ctx))
	if before != len(steps) {
		t.Errorf("%d migration Jobs after %d distinct applies, want one per apply", before, len(steps))
	}
	for i := 0; i < 2; i++ {
		out := r.Apply(last)
		if !strings.Contains(out, "job.batch/"+r.Fullname()+"-migrate-") || !strings.Contains(out, "unchanged") {
			t.Errorf("identical re-apply %d did not leave the Job unchanged:\n%s", i+1, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "job.batch/") && !strings.HasSuffix(line, "unchanged") {
				t.Errorf("identical re-apply %d changed a Job: %s", i+1, line)
			}
		}
		r.RolledOut(time.Minute)
	}
	if after := len(r.Jobs(ctx)); after != before {
		t.Errorf("identical re-applies changed the number of migration Jobs from %d to %d", before, after)
	}
}

func TestRollbackServesAndTheNextUpgradeWorks(t *testing.T) {
	share(t, weightAll(), 80*time.Second)
	res := scenario(t, rollbackScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "rollback", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	// the demo refuses a database newer than itself, like most migration tools: re-running revision 1's
	// migration on the v2 schema would fail
	base := framework.Merge(framework.BaseValues(), map[string]any{"env": []any{framework.EnvVar("DEMO_REFUSE_NEWER_SCHEMA", "true")}})
	r.MustDeploy(base)
	firstID, firstJob := r.AppIdentity(ctx), appMigrationJob(ctx, r)
	r.MustDeploy(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v2"}}))
	load := env.StartLoad(t, ns, r.Fullname())
	start := time.Now()
	out := env.Run.Must(t, env.Helm3, "rollback", r.Name, "1", "-n", ns, "--wait", "--timeout", "4m")
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if strings.Contains(out, "immutable") || strings.Contains(out, "already exists") {
		t.Errorf("rollback reported a conflict:\n%s", out)
	}
	r.RolledOut(2 * time.Minute)
	if got := r.AppIdentity(ctx); got != firstID {
		t.Errorf("after the rollback the Deployment has identity %s, want revision 1's %s", got, firstID)
	}
	// revision 1 (the install with the embedded database) has a plain Job: the rollback creates it again,
	// and it must skip the recorded migration instead of running v1's against the v2 schema
	installJob := firstJob
	assertSkipped(ctx, r, installJob, 2, 2)
	r.AssertWitness(ctx, firstID)
	// roll forward again: the v1 pods run on schema 2 (their own plus one), the hook finds nothing to apply
	_, d := r.MustDeploy(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v2"}, "env": []any{
		framework.EnvVar("DEMO_REFUSE_NEWER_SCHEMA", "true"), framework.EnvVar("GREETING", "again")}}))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 3
	r.AssertWitness(ctx, r.AppIdentity(ctx))
	rep := load.Stop()
	recordLoad(res, rep)
	rep.Check(t, "across the rollback")
}

// `helm upgrade --no-hooks` in hook mode runs no migration: the Deployment gets the new identity's pods
// and only the gate stands between them and the old schema. The next upgrade with hooks migrates and
// releases them.
func TestHelmUpgradeWithoutHooksHoldsThePodsUntilAnUpgradeRunsTheMigration(t *testing.T) {
	share(t, weightOne, 60*time.Second)
	res := scenario(t, noHooksUpgradeScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "nohooks", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	r.MustDeploy(framework.BaseValues())
	first := r.AppIdentity(ctx)

	v2 := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"}})
	start := time.Now()
	env.Run.Must(t, env.Helm3, "upgrade", r.Name, env.Chart, "-n", ns, "--no-hooks", "--values", r.ValuesFile(v2))
	second := r.AppIdentity(ctx)
	if second == first {
		t.Fatalf("the upgrade to v2 kept identity %s", first)
	}
	framework.WaitUntil(t, "a pod of "+second+" to wait in wait-for-migration", 2*time.Minute, func(context.Context) (bool, error) {
		for _, p := range r.AppPods(ctx, second) {
			if waitingInGate(p) {
				return true, nil
			}
		}
		return false, nil
	})
	// held: for 30 s no pod of the new identity gets past the gate, and the old pods keep serving
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range r.AppPods(ctx, second) {
			if _, started := framework.AppStart(p); started {
				t.Fatalf("pod %s of %s started its app container though no migration ran (--no-hooks)", p.Name, second)
			}
		}
		if n := r.PsqlInt(fmt.Sprintf("select count(*) from demo_pod_starts where identity = '%s'", second)); n != 0 {
			t.Fatalf("the witness has %d app processes of %s, whose migration never ran", n, second)
		}
		time.Sleep(3 * time.Second)
	}
	if len(r.AppPods(ctx, first)) == 0 {
		t.Fatalf("no pod of %s is left serving while the new ones wait", first)
	}

	// the same values with hooks: the pre-upgrade hook migrates, and the waiting pods start
	r.MustDeploy(v2)
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if id := r.AppIdentity(ctx); id != second {
		t.Fatalf("the upgrade with hooks changed the identity from %s to %s", second, id)
	}
	r.AssertWitness(ctx, second)
}

// waitingInGate is true when the pod's wait-for-migration init container is running.
// appMigrationJob is the migration Job the app's pod template waits for (the --job of its gate, or its
// annotation premigrate.io/migration-job when the scheduler holds it): a plain Job is named by the hash of its
// spec, not by the identity.
func appMigrationJob(ctx context.Context, r *framework.Release) string {
	r.T.Helper()
	d, err := env.Client.AppsV1().Deployments(r.Namespace).Get(ctx, r.Fullname(), metav1.GetOptions{})
	if err != nil {
		r.T.Fatalf("getting the app Deployment: %v", err)
	}
	if name := d.Spec.Template.Annotations["premigrate.io/migration-job"]; name != "" {
		return name
	}
	for _, c := range d.Spec.Template.Spec.InitContainers {
		if i := slices.Index(c.Args, "--job"); c.Name == "wait-for-migration" && i >= 0 && i+1 < len(c.Args) {
			return c.Args[i+1]
		}
	}
	r.T.Fatalf("the app Deployment %s names no migration Job (its wait-for-migration's --job, or the annotation premigrate.io/migration-job)", d.Name)
	return ""
}

func waitingInGate(p corev1.Pod) bool {
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name == "wait-for-migration" && s.State.Running != nil {
			return true
		}
	}
	return false
}
