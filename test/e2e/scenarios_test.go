//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	jobModeKubectlApplyScenario  = scenarios.Declare(framework.EveryPath, "job-mode-kubectl-apply")
	failedMigrationScenario      = scenarios.Declare(framework.NeverSkipped, "failed-migration")
	destructiveMigrationScenario = scenarios.Declare(framework.Forward, "destructive-migration")
	gateRBACScenario             = scenarios.Declare(framework.LeastPrivilege, "gate-rbac")
	rollbackScenario             = scenarios.Declare(framework.EveryPath, "rollback")
)

var restricted = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}

// scenario records one scenario's result (pass, fail or skipped) in the report when the test ends.
func scenario(t *testing.T, s framework.Scenario, helmBin string) *scenarioResult {
	if s.ID() == "" {
		t.Fatalf("%s records a scenario that was never declared (a variant missing from its DeclareEach?)", t.Name())
	}
	start := time.Now()
	res := &scenarioResult{Scenario: s.ID(), Promise: string(s.Promise()), Numbers: map[string]float64{}}
	res.Helm = toolName(helmBin)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the commands this scenario ran, with their output: %s", env.Run.LogPath(t.Name()))
		}
		res.Result = resultOf(t.Failed(), t.Skipped())
		res.WallSec = time.Since(start).Seconds()
		addResult(*res)
	})
	return res
}

// toolName names a CLI in the report: helm3, helm4, kubectl, ct.
func toolName(bin string) string {
	switch bin {
	case "":
		return ""
	case env.Helm3:
		return "helm3"
	}
	return filepath.Base(bin)
}

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
		// spec, so a new identity and a new Job, never a patch
		{"image": map[string]any{"tag": "v5"}, "gate": map[string]any{"delivery": "imageVolume"}},
	}
	var last []byte
	for i, s := range steps {
		start := time.Now()
		last = r.Template(framework.Merge(base, s))
		r.Apply(last)
		r.RolledOut(4 * time.Minute)
		id := r.AppIdentity(ctx)
		// the gate lets pods go on the record, written just before the Job's pod exits: the Job's own
		// status may follow a moment later
		name := r.Fullname() + "-migrate-" + id
		framework.WaitUntil(t, "Job "+name+" to succeed", time.Minute, func(ctx context.Context) (bool, error) {
			job, err := env.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Errorf("apply %d: the Job named by identity %s: %w", i+1, id, err)
			}
			return job.Status.Succeeded == 1, nil
		})
		r.AssertWitness(ctx, id)
		if job := r.MigrationJob(ctx, id); job != nil {
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

func TestTheGateServiceAccountMayReadExactlyWhatItNeeds(t *testing.T) {
	share(t, weightOne, 55*time.Second)
	scenario(t, gateRBACScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "rbac", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	r.MustDeploy(framework.BaseValues())
	r.MustDeploy(framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"}}))
	job := "jobs.batch/" + r.Fullname() + "-migrate"
	records := "configmaps/" + r.AnchorName()
	store := "configmaps/" + r.StoreName()
	type check struct {
		verb, resource, subresource string
		want                        string
	}
	canI := func(as string, cases []check) {
		t.Helper()
		for _, c := range cases {
			args := []string{"auth", "can-i", c.verb, c.resource, "-n", ns, "--as", as}
			if c.subresource != "" {
				args = append(args, "--subresource", c.subresource)
			}
			out, _ := env.Run.Stdout(t, env.Kubectl, args...)
			if got := strings.TrimSpace(out); got != c.want {
				t.Errorf("%s may %s %s %s: kubectl auth can-i answered %q, want %q", as, c.verb, c.resource, c.subresource, got, c.want)
			}
		}
	}
	// the app pods' gate: its migration Job and the records ConfigMap, read-only, by name
	claim := "persistentvolumeclaims/data-" + r.Fullname() + "-postgresql-0"
	canI("system:serviceaccount:"+ns+":"+r.Fullname(), []check{
		{"get", job, "", "yes"}, {"list", job, "", "yes"}, {"watch", job, "", "yes"},
		{"get", records, "", "yes"}, {"list", records, "", "yes"}, {"watch", records, "", "yes"},
		{"get", "jobs.batch/other", "", "no"}, {"list", "jobs.batch", "", "no"}, {"watch", "jobs.batch", "", "no"},
		{"create", "jobs.batch", "", "no"}, {"delete", job, "", "no"}, {"update", job, "", "no"}, {"patch", job, "", "no"},
		{"update", records, "", "no"}, {"delete", records, "", "no"}, {"get", "configmaps/other", "", "no"},
		{"list", "configmaps", "", "no"}, {"get", "secrets", "", "no"}, {"list", "pods", "", "no"},
		{"get", "pods", "log", "no"}, {"create", "pods", "", "no"},
		// the embedded database's claim, by name: its UID names the database the records are bound to
		{"get", claim, "", "yes"}, {"list", "persistentvolumeclaims", "", "no"}, {"get", "persistentvolumeclaims/other", "", "no"},
		{"delete", claim, "", "no"}, {"update", claim, "", "no"},
		// the store that keeps the records, read-only, by name
		{"get", store, "", "yes"}, {"watch", store, "", "yes"}, {"update", store, "", "no"}, {"delete", store, "", "no"},
	})
	// the migration's ServiceAccount outlives the hooks only as a hook the records ConfigMap owns (uninstall
	// takes it); the first upgrade after the install deletes it with the install's release object of its name
	if sa, err := env.Client.CoreV1().ServiceAccounts(ns).Get(ctx, r.Fullname()+"-migrate", metav1.GetOptions{}); err == nil {
		if o := sa.OwnerReferences; len(o) != 1 || o[0].Name != r.AnchorName() {
			t.Errorf("the migration's ServiceAccount outlived the hooks owned by %v, want the records ConfigMap %s", o, r.AnchorName())
		}
	} else if !apierrors.IsNotFound(err) {
		t.Errorf("reading the migration's ServiceAccount: %v", err)
	}
	// its Role, as the job-mode release renders it: the records ConfigMap by name, create (which RBAC cannot
	// limit to a name), nothing else
	jr := env.NewRelease(t, ns, "jobs", env.Helm3)
	jr.MustDeploy(framework.Merge(framework.BaseValues(), map[string]any{"migration": map[string]any{"mode": "job"},
		"postgresql": map[string]any{"auth": map[string]any{"password": "rbac-test-password"}}}))
	jrecords := "configmaps/" + jr.AnchorName()
	jstore := "configmaps/" + jr.StoreName()
	canI("system:serviceaccount:"+ns+":"+jr.Fullname()+"-migrate", []check{
		{"get", jrecords, "", "yes"}, {"update", jrecords, "", "yes"}, {"create", "configmaps", "", "yes"},
		{"get", jstore, "", "yes"}, {"update", jstore, "", "yes"}, {"delete", jstore, "", "no"},
		{"update", "configmaps/other", "", "no"}, {"get", "configmaps/other", "", "no"}, {"delete", jrecords, "", "no"},
		{"get", "secrets", "", "no"}, {"get", "jobs.batch", "", "no"}, {"patch", "jobs.batch", "", "no"},
		{"get", "pods", "log", "no"},
	})
	// never the namespace's default ServiceAccount
	canI("system:serviceaccount:"+ns+":default", []check{{"get", job, "", "no"}, {"get", records, "", "no"}})
	// the token is in the gate's container only: the admitted pods, as the API server stores them
	for _, p := range r.AppPods(ctx, r.AppIdentity(ctx)) {
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			var tokenAt []string
			for _, m := range c.VolumeMounts {
				if strings.HasPrefix(m.MountPath, "/var/run/secrets") {
					tokenAt = append(tokenAt, m.Name+" at "+m.MountPath)
				}
			}
			if want := c.Name == "wait-for-migration"; (len(tokenAt) > 0) != want {
				t.Errorf("pod %s container %s mounts %v under /var/run/secrets; want a token only in wait-for-migration", p.Name, c.Name, tokenAt)
			}
		}
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
	firstID := r.AppIdentity(ctx)
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
	installJob := r.Fullname() + "-migrate-" + firstID
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

// failedFor is true when the Job has condition Failed with the given reason.
func failedFor(j *batchv1.Job, reason string) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}
