//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/test/framework"
)

var contractUndoScenario = scenarios.Declare(framework.Contract, framework.CI, "contract-rollout-undo-first")

// TestARolloutUndoWhileTheContractHookWaitsKeepsItFromRunning upgrades v1 -> v2 with Helm 3 (hook mode: the
// contract a post-upgrade hook, which helm upgrade waits for) and, while v2's contract hook waits for the v1 pods
// to leave, moves the Deployment back with `kubectl rollout undo`. The hook's gate sees the Deployment left v2
// and ends without running the command: helm upgrade succeeds, the records hold no contract of v2, the database
// no row of it, and v1 serves again. Unlike `helm rollback` in job mode (expand-contract-under-load), nothing
// deletes the contract Job here: the gate's own reading of the rollout is what keeps the contract from running.
// The same upgrade again runs it, once, after the v1 pods left.
func TestARolloutUndoWhileTheContractHookWaitsKeepsItFromRunning(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, contractUndoScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "contract-undo", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	_, d := r.MustDeploy(contractValues("v1", true))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	v1 := r.AppIdentity(ctx)

	upgrade := deployAsync(r, contractValues("v2", true))
	var v2 string
	framework.WaitUntil(t, "v2's contract hook to run, waiting for the v1 pods", 3*time.Minute, func(ctx context.Context) (bool, error) {
		if v2 = r.AppIdentity(ctx); v2 == v1 {
			return false, nil
		}
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=contract,premigrate.io/identity=" + v2})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				return true, nil
			}
		}
		return false, nil
	})
	if n := len(contractRowsOfQuiet(t, r, 2)); n != 0 {
		t.Fatalf("v2's contract ran before the undo could come (%d rows): the v1 pods keep their process %s", n, contractShutdownDelay)
	}
	env.Run.Must(t, env.Kubectl, "rollout", "undo", "deployment/"+r.Fullname(), "-n", ns)
	up := <-upgrade
	if up.err != nil {
		t.Fatalf("helm upgrade to v2, undone by kubectl rollout undo while its contract hook waited: %v\n%s", up.err, up.out)
	}
	res.DurationsSec = append(res.DurationsSec, up.d.Seconds())
	r.RolledOut(4 * time.Minute)
	if id := r.AppIdentity(ctx); id != v1 {
		t.Fatalf("after kubectl rollout undo the Deployment runs identity %s, want v1's %s", id, v1)
	}
	out, err := env.Run.Run(t, env.Kubectl, "logs", "-n", ns, "-l", "app.kubernetes.io/component=contract,premigrate.io/identity="+v2, "--tail=50")
	if err != nil || !strings.Contains(out, "never while another identity serves") {
		t.Errorf("v2's contract hook does not say it left the contract to the identity that serves (%v):\n%s", err, out)
	}
	if n := len(contractRowsOfQuiet(t, r, 2)); n != 0 {
		t.Errorf("v2's contract ran %d times after kubectl rollout undo moved the Deployment back to v1", n)
	}
	if _, ok := record.ContractOf(r.Records(ctx)[v2]); ok {
		t.Errorf("the records hold a contract of v2, undone before it")
	}

	// the same upgrade again: a new hook Job, and the contract once the v1 pods left
	_, d = r.MustDeploy(contractValues("v2", true))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 2
	rows := contractRowsOfQuiet(t, r, 2)
	if len(rows) != 1 || rows[0].otherSessions != "" {
		t.Fatalf("after the same upgrade again: v2's contract rows %+v, want one, with no session of another version", rows)
	}
	if _, ok := record.ContractOf(r.Records(ctx)[v2]); !ok {
		t.Errorf("the records hold no contract of v2 after the upgrade again")
	}
	r.AssertWitness(ctx, v2)
}
