//go:build e2e

package e2e

import (
	"context"
	"slices"
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
	externalDatabaseFirstInstallFailsFastScenarios      = scenarios.DeclareEach(framework.NeverSkipped, "external-database-first-install-fails-fast", framework.In(framework.CI, "helm3"), framework.In(framework.Matrix, "helm4"))
	externalDatabaseFirstInstallPlainJobControlScenario = scenarios.Declare(framework.NeverSkipped, framework.Matrix, "external-database-first-install-plain-job-control")
)

// The migration as a pre-install hook where the database exists before the release (issue 23 item 12): with
// an external database the chart's hook mode makes the install's migration the same pre-install,pre-upgrade
// hook as every upgrade's. A first install whose migration fails then ends as soon as the Job failed, naming
// it, with the migration's log, and without any app object; the same install with a plain Job
// (preInstallHook false, the control) ends only at Helm's --timeout. How long Helm took after the Job failed
// is measured between the API server's time of the Job's Failed condition and the CLI's exit: evidence
// neither the chart nor the gate writes.

// externalValues are the chart's values on the external database of ledgerDBManifest.
func externalValues(tag string, extra map[string]any) map[string]any {
	return framework.Merge(framework.Merge(framework.BaseValues(), map[string]any{
		"image":      map[string]any{"tag": tag},
		"postgresql": map[string]any{"enabled": false},
		"database":   map[string]any{"existingSecret": "ledger-db", "existingSecretKey": "url"},
	}), extra)
}

// failingMigration is a migration the demo refuses at once (an unknown command), without retries.
var failingMigration = map[string]any{"migration": map[string]any{"args": []any{"bogus"}, "backoffLimit": 0}}

// failedInstall runs a first `helm upgrade --install --wait --wait-for-jobs` whose migration fails, and returns
// Helm's output, the migration Job's name and how long after its failure (the API server's time) the CLI exited.
func failedInstall(r *framework.Release, values map[string]any, timeout time.Duration) (string, string, time.Duration) {
	r.T.Helper()
	out, _, err := r.Deploy(values, "--wait-for-jobs", "--timeout", timeout.String())
	ended := time.Now()
	if err == nil {
		r.T.Fatalf("the first install succeeded with a failing migration:\n%s", out)
	}
	jobs, err := env.Client.BatchV1().Jobs(r.Namespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + r.Name + ",app.kubernetes.io/component=migration"})
	if err != nil || len(jobs.Items) != 1 {
		r.T.Fatalf("the failed install left %v migration Jobs (err %v), want 1:\n%s", jobNames(jobs), err, out)
	}
	j := jobs.Items[0]
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return out, j.Name, ended.Sub(c.LastTransitionTime.Time)
		}
	}
	r.T.Fatalf("the migration Job %s is not Failed after the failed install: %+v\n%s", j.Name, j.Status, out)
	return "", "", 0
}

// jobNames names the Jobs of a list (nil: none).
func jobNames(l *batchv1.JobList) []string {
	var names []string
	if l != nil {
		for _, j := range l.Items {
			names = append(names, j.Name)
		}
	}
	return names
}

func TestAFirstInstallOnAnExternalDatabaseFailsAsSoonAsItsMigrationFails(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range helmCLIs() {
		t.Run(h.name, func(t *testing.T) {
			share(t, weightOne, 110*time.Second)
			res := scenario(t, externalDatabaseFirstInstallFailsFastScenarios[h.name], h.bin)
			ctx := context.Background()
			l := newLedger(t, h.bin) // its namespace, and a PostgreSQL with the Secret ledger-db
			r := env.NewRelease(t, l.ns, "app", h.bin)
			r.PsqlArgs = []string{"ledger-db", "psql", "-U", "ledger", "-d", "ledger"}
			out, job, lag := failedInstall(r, externalValues("v1", failingMigration), 3*time.Minute)
			if job != r.Fullname()+"-migrate" {
				t.Errorf("the install's migration Job is %s, want the hook %s-migrate", job, r.Fullname())
			}
			res.Numbers = map[string]float64{"helmExitAfterJobFailedSec": lag.Seconds()}
			if lag > 30*time.Second {
				t.Errorf("helm ended %s after the migration Job failed, want at once (a pre-install hook)", lag.Round(time.Second))
			}
			// Helm 4 prints the log inside its own log line, quotes escaped
			for _, want := range []string{"pre-install", job, "unknown command", "bogus"} {
				if !strings.Contains(out, want) {
					t.Errorf("the failed install's output does not name %q (the hook, its Job, the migration's log):\n%s", want, out)
				}
			}
			j, err := env.Client.BatchV1().Jobs(r.Namespace).Get(ctx, job, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := j.Annotations["helm.sh/hook"]; got != "pre-install,pre-upgrade" {
				t.Errorf("the install's Job has helm.sh/hook %q, want pre-install,pre-upgrade", got)
			}
			if _, err := env.Client.AppsV1().Deployments(r.Namespace).Get(ctx, r.Fullname(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the failed pre-install hook left an app Deployment (err %v): nothing of the app may exist before its migration", err)
			}
			if log := jobLog(r, job); !strings.Contains(log, `unknown command "bogus"`) {
				t.Errorf("kubectl logs job/%s -c migrate does not show why it failed:\n%s", job, log)
			}

			// helm uninstall of the failed release keeps the failed hook Job, and its log: nothing of the
			// release owned it. A fresh install replaces it (before-hook-creation), and its pre-install hook
			// must not make the release's ConfigMap that Helm creates after the hooks.
			uninstall(r)
			if log := jobLog(r, job); !strings.Contains(log, `unknown command "bogus"`) {
				t.Errorf("after helm uninstall the failed Job's log is gone:\n%s", log)
			}
			// what docs/design.md ("What helm uninstall leaves") says a release that never got past its
			// pre-install hook leaves: the hooks (Helm never deletes them, and no object of the release existed to
			// own them), the run history and the store; nothing else
			hooks := r.Fullname() + "-migrate"
			preInstallLeft := []string{"ConfigMap/" + r.StoreName(), "ConfigMap/" + r.Fullname() + "-migration-runs",
				"Job/" + hooks, "Pod/ledger-db", "Role/" + hooks, "RoleBinding/" + hooks, "Secret/ledger-db", "ServiceAccount/" + hooks}
			left, err := leftoversWait(r.Namespace, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			left = slices.DeleteFunc(left, func(s string) bool { return strings.HasPrefix(s, "Pod/"+hooks+"-") })
			slices.Sort(preInstallLeft)
			if !slices.Equal(left, preInstallLeft) {
				t.Errorf("helm uninstall of the release that failed its pre-install hook left %v, want %v (docs/design.md)", left, preInstallLeft)
			}
			start := time.Now()
			r.MustDeploy(externalValues("v1", nil))
			res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
			id := r.AppIdentity(ctx)
			r.AssertWitness(ctx, id)
			if v := r.PsqlInt("select max(version) from schema_migrations"); v != 1 {
				t.Errorf("schema at version %d after the install, want 1", v)
			}
			// the next upgrade's hook is owned by the release's ConfigMap, so helm uninstall takes it with it
			start = time.Now()
			r.MustDeploy(externalValues("v2", nil))
			res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
			res.Upgrades = 2
			r.AssertWitness(ctx, r.AppIdentity(ctx))
			j, err = env.Client.BatchV1().Jobs(r.Namespace).Get(ctx, job, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(j.OwnerReferences) != 1 || j.OwnerReferences[0].Name != r.AnchorName() {
				t.Errorf("the upgrade's hook Job is owned by %v, want the release's ConfigMap %s", j.OwnerReferences, r.AnchorName())
			}
			if n := r.PsqlInt("select count(*) from demo_migrate_runs"); n != 2 {
				t.Errorf("%d successful migration runs, want 2 (v1 and v2, each once)", n)
			}
			uninstall(r)
			keep := map[string]bool{"ConfigMap/" + r.StoreName(): true, "Pod/ledger-db": true, "Secret/ledger-db": true}
			assertNothingLeftAfterUninstall(t, r.Namespace, keep)
			t.Logf("the failed first install ended %s after its Job failed; installed, upgraded and uninstalled after", lag.Round(time.Second))
		})
	}
}

// The control: the same failing first install with a plain Job (preInstallHook false) is held only by the gate:
// Helm's waiter never sees the Job's failure and ends at its --timeout.
func TestAFirstInstallWithAPlainJobEndsOnlyAtHelmsTimeout(t *testing.T) {
	share(t, weightOne, 100*time.Second)
	res := scenario(t, externalDatabaseFirstInstallPlainJobControlScenario, env.Helm3)
	l := newLedger(t, env.Helm3)
	r := env.NewRelease(t, l.ns, "app", env.Helm3)
	values := externalValues("v1", framework.Merge(failingMigration, map[string]any{"migration": map[string]any{"preInstallHook": false}}))
	const timeout = 75 * time.Second
	out, job, lag := failedInstall(r, values, timeout)
	if job == r.Fullname()+"-migrate" {
		t.Errorf("control: the install's migration Job is the hook %s, want the plain Job of its identity", job)
	}
	res.Numbers = map[string]float64{"helmExitAfterJobFailedSec": lag.Seconds()}
	if lag < 30*time.Second {
		t.Errorf("control: helm ended %s after the plain Job failed: the scenario cannot tell a hook from a plain Job\n%s", lag.Round(time.Second), out)
	}
	t.Logf("control: with a plain Job helm ended %s after the migration Job failed (--timeout %s)", lag.Round(time.Second), timeout)
}
