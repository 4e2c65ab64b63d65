//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenario this file proves (the report lists it; a full run must run it once). It taints the cluster's
// node, so it takes the whole cluster, and it stays in the matrix: the placement it proves is rendered by the
// chart (test/render pins it) and the mutant ungate-placed-anywhere is caught by its render test in make test.
var schedulingGateTaintedPoolScenario = scenarios.Declare(framework.Before, framework.Matrix, "gate-scheduling-gate-tainted-pool")

// poolTaint is the taint of the app's dedicated pool in this scenario, and the app's toleration of it.
var poolTaint = corev1.Taint{Key: "premigrate.io/pool", Value: "apps", Effect: corev1.TaintEffectNoSchedule}

// TestOnATaintedPoolTheGateRunsWhereTheAppRunsAndReleasesItsPods installs, with gate.waitIn schedulingGate and
// an external database, onto nodes that only the app's pods tolerate (a dedicated pool): <fullname>-gate takes
// the app's tolerations, runs, and releases the app's pods once their migration ran; an upgrade to two replicas
// of it releases the next version's pods and gets a budget that the API server says allows one eviction.
// Evidence the gate does not write: the witness, the scheduler's PodScheduled times, the budget's status. With
// the gate Deployment placed anywhere (the mutant ungate-placed-anywhere, the control) its pod never schedules,
// no app pod starts and the install times out.
func TestOnATaintedPoolTheGateRunsWhereTheAppRunsAndReleasesItsPods(t *testing.T) {
	share(t, weightAll(), 100*time.Second)
	res := scenario(t, schedulingGateTaintedPoolScenario, env.Helm4)
	ctx := context.Background()
	l := newLedger(t, env.Helm4) // its database runs before the taint
	taintEveryNode(ctx, t)
	r := env.NewRelease(t, l.ns, "app", env.Helm4)
	r.PsqlArgs = []string{"ledger-db", "psql", "-U", "ledger", "-d", "ledger"}
	removeUngateObjects(t, r)
	values := func(v string, replicas int) map[string]any {
		return framework.Merge(framework.BaseValues(), map[string]any{
			"image":       map[string]any{"tag": v},
			"postgresql":  map[string]any{"enabled": false},
			"database":    map[string]any{"existingSecret": "ledger-db", "existingSecretKey": "url"},
			"tolerations": []any{map[string]any{"key": poolTaint.Key, "operator": "Equal", "value": poolTaint.Value, "effect": string(poolTaint.Effect)}},
			"gate":        map[string]any{"waitIn": "schedulingGate", "deployment": map[string]any{"replicas": replicas}},
		})
	}
	for i, step := range []struct {
		version  string
		replicas int
	}{{"v2", 1}, {"v3", 2}} {
		out, d, err := r.Deploy(values(step.version, step.replicas), "--timeout", "150s")
		if err != nil {
			t.Fatalf("step %d (%s): helm upgrade --install on the tainted pool: %v\n%s", i+1, step.version, err, out)
		}
		res.DurationsSec = append(res.DurationsSec, d.Seconds())
		if i > 0 {
			res.Upgrades++
		}
		id := r.AppIdentity(ctx)
		r.AssertWitness(ctx, id)
		done, _ := r.MigrationFinished(id)
		pods := r.AppPods(ctx, id)
		if len(pods) == 0 {
			t.Fatalf("step %d: no app pod of identity %s", i+1, id)
		}
		for _, p := range pods {
			at, ok := scheduledAt(p)
			if !ok || at.Before(done.Truncate(time.Second)) {
				t.Errorf("step %d: the scheduler placed pod %s at %v (scheduled: %v), before the database finished migration %s at %v",
					i+1, p.Name, at, ok, id, done)
			}
		}
		gate, err := env.Client.CoreV1().Pods(l.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=gate,app.kubernetes.io/instance=" + r.Name})
		if err != nil {
			t.Fatalf("listing the gate's pods: %v", err)
		}
		running := 0
		for _, p := range gate.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		if running != step.replicas {
			t.Errorf("step %d: %d pods of %s-gate run on the tainted pool, want %d", i+1, running, r.Fullname(), step.replicas)
		}
	}
	framework.WaitUntil(t, "the gate's budget to allow one eviction", time.Minute, func(ctx context.Context) (bool, error) {
		pdb, err := env.Client.PolicyV1().PodDisruptionBudgets(l.ns).Get(ctx, r.Fullname()+"-gate", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pdb.Status.DisruptionsAllowed == 1 && pdb.Status.CurrentHealthy == 2, nil
	})
}

// taintEveryNode gives every node of the cluster poolTaint, and removes it when the test ends.
func taintEveryNode(ctx context.Context, t *testing.T) {
	t.Helper()
	nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing the nodes: %v", err)
	}
	spec := poolTaint.Key + "=" + poolTaint.Value + ":" + string(poolTaint.Effect)
	for _, n := range nodes.Items {
		if slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == poolTaint.Key }) {
			continue
		}
		t.Cleanup(func() { _, _ = env.Run.Run(t, env.Kubectl, "taint", "nodes", n.Name, spec+"-") })
		env.Run.Must(t, env.Kubectl, "taint", "nodes", n.Name, spec)
	}
}
