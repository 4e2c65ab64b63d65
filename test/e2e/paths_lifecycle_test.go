//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	reinstallScenarios = scenarios.DeclareEach(framework.EveryPath, "reinstall",
		framework.In(framework.Matrix, "helm3"), framework.In(framework.Matrix, "helm4"), framework.In(framework.CI, "helm4-scheduling-gate"))
	enableLaterScenarios = scenarios.DeclareEach(framework.EveryPath, "enable-later",
		framework.In(framework.Matrix, "helm3"), framework.In(framework.Matrix, "helm4"), framework.In(framework.Matrix, "helm4-scheduling-gate"))
	jobModeRollbackScenarios = scenarios.DeclareEach(framework.EveryPath, "job-mode-rollback",
		framework.In(framework.CI, "helm3"), framework.In(framework.Matrix, "helm4"), framework.In(framework.Matrix, "helm4-scheduling-gate"))
	gitopsRevertTTLScenarios = scenarios.DeclareEach(framework.EveryPath, "gitops-revert-ttl", framework.In(framework.Matrix, "kubectl"), framework.In(framework.Matrix, "kubectl-scheduling-gate"))
)

// helmCLIs are the Helm CLIs every lifecycle scenario runs under.
func helmCLIs() []struct{ name, bin string } {
	return []struct{ name, bin string }{{"helm3", env.Helm3}, {"helm4", env.Helm4}}
}

// lifecycleVariant is one entry of the lifecycle scenarios' matrix: a Helm CLI, and what every step of the
// scenario adds to framework.BaseValues() (where the app pods wait).
type lifecycleVariant struct {
	name, bin string
	values    map[string]any
}

// base is framework.BaseValues() with the variant's values.
func (v lifecycleVariant) base() map[string]any {
	return framework.Merge(framework.BaseValues(), v.values)
}

// start is what every scenario of the matrix does first: with the scheduling gate, remove the release's
// cluster-scoped policy when the test ends (deleting its namespace does not).
func (v lifecycleVariant) start(t *testing.T, r *framework.Release) {
	t.Helper()
	if v.values != nil {
		removeUngateObjects(t, r)
	}
}

// lifecycleVariants are Helm 3 and Helm 4 with the defaults (the wait-for-migration init container) and
// Helm 4 with the pods held by the scheduling gate (gate.waitIn schedulingGate).
func lifecycleVariants() []lifecycleVariant {
	return []lifecycleVariant{
		{name: "helm3", bin: env.Helm3},
		{name: "helm4", bin: env.Helm4},
		{name: "helm4-scheduling-gate", bin: env.Helm4, values: map[string]any{"gate": map[string]any{"waitIn": "schedulingGate"}}},
	}
}

// uninstall runs `helm uninstall --wait`.
func uninstall(r *framework.Release) {
	r.T.Helper()
	env.Run.Must(r.T, r.Helm, "uninstall", r.Name, "-n", r.Namespace, "--wait", "--timeout", "2m")
}

// leftovers lists what is left in the namespace besides what Kubernetes puts there itself and the names in
// keep (kind/name). An error of any list is returned: an unreadable namespace is never an empty one.
func leftovers(ctx context.Context, ns string, keep map[string]bool) ([]string, error) {
	var out []string
	add := func(kind, name string) {
		if !keep[kind+"/"+name] {
			out = append(out, kind+"/"+name)
		}
	}
	c := env.Client
	opts := metav1.ListOptions{}
	jobs, err := c.BatchV1().Jobs(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing Jobs: %w", err)
	}
	for _, o := range jobs.Items {
		add("Job", o.Name)
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing Pods: %w", err)
	}
	for _, o := range pods.Items {
		add("Pod", o.Name)
	}
	cms, err := c.CoreV1().ConfigMaps(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing ConfigMaps: %w", err)
	}
	for _, o := range cms.Items {
		if o.Name != "kube-root-ca.crt" {
			add("ConfigMap", o.Name)
		}
	}
	secrets, err := c.CoreV1().Secrets(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing Secrets: %w", err)
	}
	for _, o := range secrets.Items {
		if !strings.HasPrefix(o.Name, "sh.helm.release.") {
			add("Secret", o.Name)
		}
	}
	sas, err := c.CoreV1().ServiceAccounts(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing ServiceAccounts: %w", err)
	}
	for _, o := range sas.Items {
		if o.Name != "default" {
			add("ServiceAccount", o.Name)
		}
	}
	roles, err := c.RbacV1().Roles(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing Roles: %w", err)
	}
	for _, o := range roles.Items {
		add("Role", o.Name)
	}
	bindings, err := c.RbacV1().RoleBindings(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing RoleBindings: %w", err)
	}
	for _, o := range bindings.Items {
		add("RoleBinding", o.Name)
	}
	claims, err := c.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing PersistentVolumeClaims: %w", err)
	}
	for _, o := range claims.Items {
		add("PersistentVolumeClaim", o.Name)
	}
	sort.Strings(out)
	return out, nil
}

// leftoversWait lists the leftovers once a second until none is left or within passed, each list with its own
// deadline, so the last look is as real as the first. It returns the last list and the last list's error.
func leftoversWait(ns string, keep map[string]bool, within time.Duration) ([]string, error) {
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		left, err := leftovers(ctx, ns, keep)
		cancel()
		if (err == nil && len(left) == 0) || time.Now().After(deadline) {
			return left, err
		}
		time.Sleep(time.Second)
	}
}

// assertNothingLeftAfterUninstall waits for the garbage collector, then fails on anything of the release
// left in the namespace besides keep, and on a namespace it cannot read.
func assertNothingLeftAfterUninstall(t *testing.T, ns string, keep map[string]bool) {
	t.Helper()
	left, err := leftoversWait(ns, keep, 90*time.Second)
	switch {
	case err != nil:
		t.Errorf("after helm uninstall the namespace %s could not be read: %v", ns, err)
	case len(left) > 0:
		t.Errorf("helm uninstall left %s behind (only %v may stay)", strings.Join(left, ", "), keep)
	}
}

// staleJob creates a Complete Job named name that carries the release's migration labels and identity id:
// what an uninstall with --no-hooks, or an earlier chart, leaves behind.
func staleJob(ctx context.Context, t *testing.T, r *framework.Release, name, id string) {
	t.Helper()
	labels := map[string]string{
		"app.kubernetes.io/instance":  r.Name,
		"app.kubernetes.io/component": "migration",
		"premigrate.io/identity":      id,
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: framework.RestrictedPod(corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "stale", Image: "ghcr.io/premigrate/gate:" + env.AppVersion, Args: []string{"version"}}},
				}),
			},
		},
	}
	job.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](65532)
	if _, err := env.Client.BatchV1().Jobs(r.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the stale Job %s: %v", name, err)
	}
	framework.WaitUntil(t, "the stale Job "+name+" to complete", 2*time.Minute, func(ctx context.Context) (bool, error) {
		j, err := env.Client.BatchV1().Jobs(r.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && j.Status.Succeeded == 1, err
	})
}

// jobLog is the migrate container's log of the Job called name.
func jobLog(r *framework.Release, name string) string {
	r.T.Helper()
	out, err := env.Run.Stdout(r.T, env.Kubectl, "logs", "-n", r.Namespace, "job/"+name, "-c", "migrate")
	if err != nil {
		r.T.Fatalf("reading the log of Job %s: %v", name, err)
	}
	return out
}

// assertSkipped waits for the re-created Job called name to finish and checks, from the Job's status, its log
// and the database, that it skipped its recorded migration: 1 succeeded and 0 failed pods, "already recorded"
// and no output of the migration command, the runs and the schema version left as they were.
func assertSkipped(ctx context.Context, r *framework.Release, name string, runs, schema int) {
	r.T.Helper()
	framework.WaitUntil(r.T, "the re-created Job "+name+" to finish", 2*time.Minute, func(ctx context.Context) (bool, error) {
		j, err := env.Client.BatchV1().Jobs(r.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && (j.Status.Succeeded == 1 || jobFailed(j)), nil
	})
	if j := releaseJob(ctx, r, name); j.Status.Succeeded != 1 || j.Status.Failed != 0 {
		r.T.Errorf("re-created Job %s: %d succeeded, %d failed pods, want 1 and 0", name, j.Status.Succeeded, j.Status.Failed)
	}
	if log := jobLog(r, name); !strings.Contains(log, "already recorded") || strings.Contains(log, "migrate:") {
		r.T.Errorf("the re-created Job %s ran the migration instead of skipping it:\n%s", name, log)
	}
	if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
		r.T.Errorf("%d migration runs after Job %s, want %d", got, name, runs)
	}
	if v := r.PsqlInt("select max(version) from schema_migrations"); v != schema {
		r.T.Errorf("schema at version %d after Job %s, want %d (migrations are not undone)", v, name, schema)
	}
}

// job reads the Job called name.
func releaseJob(ctx context.Context, r *framework.Release, name string) *batchv1.Job {
	r.T.Helper()
	j, err := env.Client.BatchV1().Jobs(r.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		r.T.Fatalf("getting Job %s: %v", name, err)
	}
	return j
}

// Issue: a reinstall after an uninstall (same values, so the same identity) must wait for its own migration on
// its new database, never for what the earlier install left behind.
func TestAReinstallLeavesNothingOfTheOldReleaseAndWaitsForItsOwnMigration(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range lifecycleVariants() {
		t.Run(h.name, func(t *testing.T) {
			share(t, weightOne, 120*time.Second)
			res := scenario(t, reinstallScenarios[h.name], h.bin)
			ctx := context.Background()
			ns := env.NewNamespace(t, "reinst-"+h.name, restricted)
			r := env.NewRelease(t, ns, "app", h.bin)
			h.start(t, r)
			values := framework.Merge(h.base(), map[string]any{
				"image":      map[string]any{"tag": "v2"},
				"postgresql": map[string]any{"persistence": map[string]any{"enabled": false}},
				// slow migrations: a gate that trusted old evidence would let the pods start long before them
				"migration": map[string]any{"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "4s")}},
			})
			r.MustDeploy(values)
			upgraded := framework.Merge(values, map[string]any{"env": []any{framework.EnvVar("GREETING", "again")}})
			_, d := r.MustDeploy(upgraded)
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			id := r.AppIdentity(ctx)
			if j := releaseJob(ctx, r, r.Fullname()+"-migrate"); j.Labels["premigrate.io/identity"] != id || j.Status.Succeeded != 1 {
				t.Fatalf("the upgrade's hook Job has identity %q and %d succeeded pods, want %s and 1", j.Labels["premigrate.io/identity"], j.Status.Succeeded, id)
			}

			uninstall(r)
			assertNothingLeftAfterUninstall(t, ns, nil)

			// A Complete Job of this identity under the hook Job's name, as `helm uninstall --no-hooks` or an
			// earlier chart leaves it: the reinstall's pods must not take it for their migration.
			staleJob(ctx, t, r, r.Fullname()+"-migrate", id)
			_, d = r.MustDeploy(upgraded)
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades = 1
			if got := r.AppIdentity(ctx); got != id {
				t.Fatalf("the reinstall has identity %s, want the upgrade's %s (same values)", got, id)
			}
			r.AssertWitness(ctx, id)
			if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != 1 {
				t.Errorf("the new database saw %d migration runs, want 1", got)
			}
		})
	}
}

// Issue: migrations enabled on a release installed without them, and a records ConfigMap deleted by hand,
// both end in a working upgrade; the ConfigMap the gate creates is adopted by Helm and goes with the release.
func TestEnablingMigrationsLaterAndDeletingTheRecordsByHandBothEndInAWorkingUpgrade(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range lifecycleVariants() {
		t.Run(h.name, func(t *testing.T) {
			share(t, weightOne, 90*time.Second)
			res := scenario(t, enableLaterScenarios[h.name], h.bin)
			ctx := context.Background()
			ns := env.NewNamespace(t, "later-"+h.name, restricted)
			r := env.NewRelease(t, ns, "app", h.bin)
			h.start(t, r)
			// without migrations the demo never becomes ready on its empty database: no readiness probe ({}: null is the default)
			r.MustDeploy(framework.Merge(h.base(), map[string]any{"migration": map[string]any{"enabled": false}, "readinessProbe": map[string]any{}}))
			records := r.AnchorName()
			if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, records, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("ConfigMap %s exists without migrations (err %v)", records, err)
			}

			_, d := r.MustDeploy(h.base())
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			id := r.AppIdentity(ctx)
			r.AssertWitness(ctx, id)
			cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, records, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the records ConfigMap was not created: %v", err)
			}
			if cm.Annotations["meta.helm.sh/release-name"] != r.Name {
				t.Errorf("records ConfigMap annotations %v: want Helm's ownership", cm.Annotations)
			}
			if _, ok := r.Records(ctx)[id]; !ok {
				t.Errorf("the store %s lacks the record of %s: %v", r.StoreName(), id, r.Records(ctx))
			}
			if manifest := env.Run.Must(t, h.bin, "get", "manifest", r.Name, "-n", ns); !strings.Contains(manifest, "name: "+records) {
				t.Errorf("the release's manifest does not hold ConfigMap %s: Helm did not adopt it", records)
			}

			// both records ConfigMaps deleted by hand: the release's and the store
			for _, name := range []string{records, r.StoreName()} {
				if err := env.Client.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			_, d = r.MustDeploy(framework.Merge(h.base(), map[string]any{"image": map[string]any{"tag": "v2"}}))
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades = 2
			id = r.AppIdentity(ctx)
			r.AssertWitness(ctx, id)
			if _, err = env.Client.CoreV1().ConfigMaps(ns).Get(ctx, records, metav1.GetOptions{}); err != nil {
				t.Fatalf("the records ConfigMap deleted by hand was not created again: %v", err)
			}
			if _, ok := r.Records(ctx)[id]; !ok {
				t.Errorf("records %v lack identity %s", r.Records(ctx), id)
			}
			if v := r.PsqlInt("select max(version) from schema_migrations"); v != 2 {
				t.Errorf("schema at version %d, want 2", v)
			}
			uninstall(r)
			pvc := "PersistentVolumeClaim/data-" + r.Fullname() + "-postgresql-0"
			// the store goes with the claim it is owned by, which the StatefulSet keeps: the records live as long as the data
			assertNothingLeftAfterUninstall(t, ns, map[string]bool{pvc: true, "Secret/" + r.Fullname() + "-postgresql": true,
				"ConfigMap/" + r.StoreName(): true})
		})
	}
}

// Issue: a rollback in job mode (Helm) re-creates the old identity's Job; the old migration must not run
// against the newer schema. The demo refuses a database newer than itself (as Alembic or golang-migrate do),
// so only the skip keeps the rollback healthy; the negative control shows the refusal is real.
func TestAJobModeRollbackNeverRunsTheOlderMigrationAgain(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range lifecycleVariants() {
		t.Run(h.name, func(t *testing.T) {
			share(t, weightOne, 100*time.Second)
			res := scenario(t, jobModeRollbackScenarios[h.name], h.bin)
			ctx := context.Background()
			ns := env.NewNamespace(t, "jrb-"+h.name, restricted)
			r := env.NewRelease(t, ns, "app", h.bin)
			h.start(t, r)
			base := framework.Merge(h.base(), map[string]any{
				"migration":  map[string]any{"mode": "job", "backoffLimit": 1},
				"postgresql": map[string]any{"auth": map[string]any{"password": "rollback-test-password"}},
				"env":        []any{framework.EnvVar("DEMO_REFUSE_NEWER_SCHEMA", "true")},
			})
			r.MustDeploy(base)
			oldID, oldJob := r.AppIdentity(ctx), appMigrationJob(ctx, r)
			_, d := r.MustDeploy(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v2"}}))
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			if _, err := env.Client.BatchV1().Jobs(ns).Get(ctx, oldJob, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("the upgrade kept the old identity's Job %s (err %v): the rollback would not re-create it", oldJob, err)
			}

			start := time.Now()
			env.Run.Must(t, h.bin, "rollback", r.Name, "1", "-n", ns, "--wait", "--timeout", "4m")
			res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
			res.Upgrades = 2
			r.RolledOut(2 * time.Minute)
			if got := r.AppIdentity(ctx); got != oldID {
				t.Fatalf("after the rollback the Deployment has identity %s, want the first revision's %s", got, oldID)
			}
			assertSkipped(ctx, r, oldJob, 2, 2)
			r.AssertWitness(ctx, oldID)

			// Negative control: without the record, the same re-created Job runs the v1 migration, which the
			// demo refuses on the v2 schema.
			env.Run.Must(t, env.Kubectl, "patch", "configmap", r.StoreName(), "-n", ns, "--type", "json",
				"-p", fmt.Sprintf(`[{"op":"remove","path":"/data/%s"}]`, oldID))
			if err := env.Client.BatchV1().Jobs(ns).Delete(ctx, oldJob, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
				t.Fatal(err)
			}
			framework.WaitUntil(t, "Job "+oldJob+" to be gone", time.Minute, func(ctx context.Context) (bool, error) {
				_, err := env.Client.BatchV1().Jobs(ns).Get(ctx, oldJob, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			env.Run.Must(t, h.bin, "rollback", r.Name, "1", "-n", ns, "--timeout", "2m")
			framework.WaitUntil(t, "the unrecorded Job "+oldJob+" to fail", 3*time.Minute, func(ctx context.Context) (bool, error) {
				j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, oldJob, metav1.GetOptions{})
				return err == nil && jobFailed(j), nil
			})
			if log := jobLog(r, oldJob); !strings.Contains(log, "is newer than this migration's target") {
				t.Errorf("the control's Job failed without the demo's refusal:\n%s", log)
			}
		})
	}
}

func jobFailed(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Issue: a GitOps revert after the old Job's TTL removed it re-creates that Job; it must not run again. With
// the defaults and with the pods held by the scheduling gate (whose policy kubectl applies like any object).
func TestAGitOpsRevertAfterTheTTLNeverRunsTheOlderMigrationAgain(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, v := range []struct {
		name   string
		values map[string]any
	}{
		{"kubectl", nil},
		{"kubectl-scheduling-gate", map[string]any{"gate": map[string]any{"waitIn": "schedulingGate"}}},
	} {
		t.Run(v.name, sharing(weightOne, 50*time.Second, func(t *testing.T) {
			revertAfterTTL(t, gitopsRevertTTLScenarios[v.name], v.values)
		}))
	}
}

func revertAfterTTL(t *testing.T, sc framework.Scenario, values map[string]any) {
	res := scenario(t, sc, env.Kubectl)
	ctx := context.Background()
	ns := env.NewNamespace(t, "revert", restricted)
	r := env.NewRelease(t, ns, "app", "")
	if values != nil {
		removeUngateObjects(t, r)
	}
	base := framework.Merge(framework.BaseValues(), values, map[string]any{
		"migration":  map[string]any{"mode": "job", "ttlSecondsAfterFinished": 3},
		"postgresql": map[string]any{"auth": map[string]any{"password": "revert-test-password"}},
		"env":        []any{framework.EnvVar("DEMO_REFUSE_NEWER_SCHEMA", "true")},
	})
	v1 := r.Template(base)
	r.Apply(v1)
	r.RolledOut(4 * time.Minute)
	oldID, oldJob := r.AppIdentity(ctx), appMigrationJob(ctx, r)
	r.Apply(r.Template(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v2"}})))
	r.RolledOut(4 * time.Minute)
	framework.WaitUntil(t, "the TTL controller to delete "+oldJob, 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.Client.BatchV1().Jobs(ns).Get(ctx, oldJob, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	start := time.Now()
	r.Apply(v1) // the revert: the first rendering again
	r.RolledOut(4 * time.Minute)
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	res.Upgrades = 2
	if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != 2 {
		t.Errorf("%d migration runs after the revert, want 2", got)
	}
	if v := r.PsqlInt("select max(version) from schema_migrations"); v != 2 {
		t.Errorf("schema at version %d after the revert, want 2", v)
	}
	r.AssertWitness(ctx, oldID)
}
