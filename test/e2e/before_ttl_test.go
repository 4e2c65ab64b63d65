//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	ttlSucceededScenarios      = waitModeScenarios(scenarios.Declare(framework.Before, framework.CI, "ttl-succeeded"), scenarios.Declare(framework.Before, framework.Matrix, "ttl-succeeded-scheduling-gate"))
	ttlFailedScenarios         = waitModeScenarios(scenarios.Declare(framework.Before, framework.CI, "ttl-failed"), scenarios.Declare(framework.Before, framework.Matrix, "ttl-failed-scheduling-gate"))
	ttlZeroWaitForJobsScenario = scenarios.Declare(framework.Before, framework.Matrix, "ttl-zero-wait-for-jobs")
)

// With the defaults and with the pods held by the scheduling gate: both decide from the records once the Job is
// gone.
func TestWithTTLPodsRestartAfterASucceededJobIsGoneAndHelm4DoesNotHang(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, m := range waitModes() {
		t.Run(m.name, sharing(weightOne, 40*time.Second, func(t *testing.T) { podsRestartAfterTheTTL(t, m) }))
	}
}

func podsRestartAfterTheTTL(t *testing.T, m waitMode) {
	res := scenario(t, ttlSucceededScenarios[m.name], env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "ttl", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	m.start(t, r)
	values := framework.Merge(framework.BaseValues(), m.values, map[string]any{"migration": map[string]any{"ttlSecondsAfterFinished": 5}})
	_, d := r.MustDeploy(values)
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	_, d = r.MustDeploy(framework.Merge(values, map[string]any{"image": map[string]any{"tag": "v2"}}))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 1
	for _, s := range res.DurationsSec {
		if s > 180 {
			t.Errorf("a helm4 install/upgrade with a 5 s TTL took %.0f s: the hook wait hung on the deleted Job", s)
		}
	}
	framework.WaitUntil(t, "the TTL controller to delete the migration Job", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.Client.BatchV1().Jobs(ns).Get(ctx, r.Fullname()+"-migrate", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	id := r.AppIdentity(ctx)
	m.assertPodsWaitAsTheModeSays(ctx, t, r)
	for _, p := range r.AppPods(ctx, id) {
		if err := env.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting pod %s: %v", p.Name, err)
		}
	}
	start := time.Now()
	framework.WaitUntil(t, "the replacement pods to be Ready with the Job gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		ready := 0
		for _, p := range r.AppPods(ctx, id) {
			if p.DeletionTimestamp == nil && podReady(p) {
				ready++
			}
		}
		return ready == 2, nil
	})
	res.Numbers["podsReadyAfterJobGoneSec"] = time.Since(start).Seconds()
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// With the defaults and with the pods held by the scheduling gate.
func TestWithTTLNoPodStartsAfterAFailedJobIsGone(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, m := range waitModes() {
		t.Run(m.name, sharing(weightOne, 65*time.Second, func(t *testing.T) { noPodStartsAfterTheFailedJobIsGone(t, m) }))
	}
}

func noPodStartsAfterTheFailedJobIsGone(t *testing.T, m waitMode) {
	res := scenario(t, ttlFailedScenarios[m.name], env.Kubectl)
	ctx := context.Background()
	ns := env.NewNamespace(t, "ttlfail", restricted)
	r := env.NewRelease(t, ns, "app", "")
	m.start(t, r)
	base := framework.Merge(framework.BaseValues(), m.values, map[string]any{
		"postgresql": map[string]any{"auth": map[string]any{"password": "ttl-test-password"}},
		"migration":  map[string]any{"mode": "job", "ttlSecondsAfterFinished": 5, "backoffLimit": 0},
	})
	r.Apply(r.Template(base))
	r.RolledOut(4 * time.Minute)
	oldID, oldJob := r.AppIdentity(ctx), appMigrationJob(ctx, r)

	broken := framework.Merge(base, map[string]any{
		"image":     map[string]any{"tag": "v2"},
		"migration": map[string]any{"mode": "job", "ttlSecondsAfterFinished": 5, "backoffLimit": 0, "env": []any{framework.EnvVar("DEMO_FAIL_MIGRATION", "2")}},
	})
	r.Apply(r.Template(broken))
	newID := r.AppIdentity(ctx)
	if newID == oldID {
		t.Fatalf("the broken rendering kept identity %s", oldID)
	}
	job := appMigrationJob(ctx, r)
	framework.WaitUntil(t, "the failed Job to be deleted by its TTL", 3*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.Client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	gone := time.Now()
	// for the next 30 s no pod of the new identity may start its app container; the old pods keep serving
	for time.Since(gone) < 30*time.Second {
		for _, p := range r.AppPods(ctx, newID) {
			if _, started := framework.AppStart(p); started {
				t.Fatalf("pod %s started its app container after its migration failed and the Job was deleted", p.Name)
			}
		}
		time.Sleep(2 * time.Second)
	}
	if n := len(r.AppPods(ctx, newID)); n == 0 {
		t.Errorf("no pod of the new identity exists: the test proved nothing about the gate")
	}
	m.assertPodsWaitAsTheModeSays(ctx, t, r)
	if m.held() {
		for _, p := range r.AppPods(ctx, newID) {
			if len(p.Spec.SchedulingGates) == 0 || p.Spec.NodeName != "" {
				t.Errorf("pod %s was released (scheduling gates %v, node %q) although its migration failed", p.Name, p.Spec.SchedulingGates, p.Spec.NodeName)
			}
		}
	}
	ready := 0
	for _, p := range r.AppPods(ctx, oldID) {
		if podReady(p) {
			ready++
		}
	}
	if ready != 2 {
		t.Errorf("%d old pods Ready while the new ones wait, want 2", ready)
	}
	res.Numbers["heldSec"] = time.Since(gone).Seconds()

	// the run history keeps what each Job's run said after the Jobs are gone, read as docs/troubleshooting.md
	// says: the install's run with the demo's own "applied" line, the failed run with the demo's own error
	if jobs := r.Jobs(ctx); len(jobs) != 0 {
		framework.WaitUntil(t, "the TTL to delete the install's Job too", time.Minute, func(ctx context.Context) (bool, error) {
			return len(r.Jobs(ctx)) == 0, nil
		})
	}
	runs := runHistory(t, ns, r.Fullname())
	for id, want := range map[string][]string{
		oldID: {"  job " + oldJob + "  pod " + oldJob + "-", "  succeeded, recorded after ", "applied version 1 ("},
		newID: {"  job " + job + "  pod " + job + "-", "  failed: exit 1, nothing recorded after ", "injected failure in migration 2 (DEMO_FAIL_MIGRATION)"},
	} {
		block := runOf(runs, id)
		for _, w := range want {
			if !strings.Contains(block, w) {
				t.Errorf("the run history of identity %s lacks %q; the history:\n%s", id, w, runs)
			}
		}
	}
}

// runHistory runs docs/troubleshooting.md's one-liner that prints the run history of the release whose
// objects are named fullname in namespace ns, and returns what it printed.
func runHistory(t *testing.T, ns, fullname string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.RepoRoot, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "<!-- run history -->\n```sh\n")
	if !ok {
		t.Fatal("docs/troubleshooting.md has no run history one-liner (<!-- run history --> and a sh block)")
	}
	line, _, _ := strings.Cut(after, "```")
	line = replaceAll(t, replaceAll(t, line, "<fullname>", fullname), "<namespace>", ns)
	out, err := env.Run.RunCmd(t, framework.Cmd{Bin: "bash", Args: []string{"-euo", "pipefail", "-c", line}, Stdout: true,
		Env: map[string]string{"PATH": filepath.Join(env.RepoRoot, "bin") + ":" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatalf("the run history one-liner %q failed: %v\n%s", line, err, out)
	}
	return out
}

// runOf is the block of the history of identity id's runs (each run's line and its output lines).
func runOf(history, id string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.SplitAfter(history, "\n") {
		if !strings.HasPrefix(l, " ") {
			in = strings.Contains(l, "  identity "+id+"  ")
		}
		if in {
			b.WriteString(l)
		}
	}
	return b.String()
}

// Issue: the first install with a TTL of 0 under Helm 3's --wait --wait-for-jobs failed with "jobs.batch not
// found" (Helm 3 waits for a release Job that the TTL already deleted). The install's plain Job carries no TTL:
// the next upgrade removes it; the hook Jobs of upgrades keep the TTL.
func TestAFirstInstallWithATTLOfZeroPassesHelm3WaitForJobs(t *testing.T) {
	share(t, weightOne, 35*time.Second)
	res := scenario(t, ttlZeroWaitForJobsScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "ttl0", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	values := framework.Merge(framework.BaseValues(), map[string]any{"migration": map[string]any{"ttlSecondsAfterFinished": 0}})
	_, d := r.MustDeploy(values, "--wait-for-jobs")
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	_, d = r.MustDeploy(framework.Merge(values, map[string]any{"image": map[string]any{"tag": "v2"}}), "--wait-for-jobs")
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 1
	r.AssertWitness(ctx, r.AppIdentity(ctx))
}
