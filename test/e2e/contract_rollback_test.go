//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/premigrate/premigrate/test/framework"
)

var contractRollbackScenario = scenarios.Declare(framework.Contract, framework.CI, "contract-rollback-while-it-runs")

// TestARollbackWhileTheContractRunsStartsNoOlderPod upgrades v1 -> v2 with Helm 3 (hook mode: the contract a
// post-upgrade hook) whose contract takes 45 s inside its transaction, and, while it runs, moves the Deployment
// back to v1 with `kubectl rollout undo` (what `--atomic` does when Helm's --timeout hits the hook, or an
// operator in a hurry). The contract may change the schema from its start, not from its end, so no v1 pod may
// start from then on: the evidence is the database's, each app process's own row (demo_pod_starts, its
// connection time by the database's clock) against the contract's start (demo_contracts, the same clock). Then
// rolled forward again (`kubectl rollout undo` once more), v2 serves and the witness is clean.
func TestARollbackWhileTheContractRunsStartsNoOlderPod(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, contractRollbackScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "contract-rollback", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	values := func(tag string, contract bool) map[string]any {
		v := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": tag}})
		if contract {
			v = framework.Merge(v, map[string]any{"migration": map[string]any{
				"contract": map[string]any{"command": []any{"/demo", "contract"}},
				"env":      []any{framework.EnvVar("DEMO_CONTRACT_DELAY", "45s")},
			}})
		}
		return v
	}
	_, d := r.MustDeploy(values("v1", false))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	v1 := r.AppIdentity(ctx)

	upgrade := deployAsync(r, values("v2", true))
	var v2 string
	// the contract's command runs: the demo says so itself, from inside its transaction
	framework.WaitUntil(t, "v2's contract command to run", 4*time.Minute, func(ctx context.Context) (bool, error) {
		if v2 = r.AppIdentity(ctx); v2 == v1 {
			return false, nil
		}
		out, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", ns, "job/"+r.Fullname()+"-contract", "-c", "contract")
		return err == nil && strings.Contains(out, "DEMO_CONTRACT_DELAY: sleeping"), nil
	})
	undone := time.Now()
	env.Run.Must(t, env.Kubectl, "rollout", "undo", "deployment/"+r.Fullname(), "-n", ns)
	up := <-upgrade
	if up.err != nil {
		t.Fatalf("helm upgrade to v2, undone by kubectl rollout undo while its contract ran: %v\n%s", up.err, up.out)
	}
	res.DurationsSec = append(res.DurationsSec, up.d.Seconds())
	rows := contractRowsOfQuiet(t, r, 2)
	if len(rows) != 1 {
		t.Fatalf("v2's contract rows %+v, want one: the contract ran to its end", rows)
	}
	// the demo's contract sleeps 45 s in its transaction after its start: the undo came while it ran (the gate
	// records the start right before the command, which then connects and takes its start by the database's clock)
	if ends := rows[0].startedAt.Add(45 * time.Second); !undone.Before(ends) {
		t.Fatalf("the undo at %s came after v2's contract could have ended (started %s, 45 s): this proves nothing", undone, rows[0].startedAt)
	}
	res.Numbers["undoIntoContractSec"] = undone.Sub(rows[0].startedAt).Seconds()
	// the v1 pods the undo created: they exist, and they were held the whole time
	var held []corev1.Pod
	framework.WaitUntil(t, "the undo's v1 pods to be created", time.Minute, func(ctx context.Context) (bool, error) {
		held = r.AppPods(ctx, v1)
		return len(held) > 0, nil
	})
	time.Sleep(10 * time.Second) // the gate's retries of the held pods, after the contract completed
	started := r.PsqlInt("select count(*) from demo_pod_starts p, demo_contracts c where c.app_version = 2 and p.app_version = 1 and p.connected_at >= c.started_at")
	res.Numbers["olderStartsDuringContract"] = float64(started)
	if started != 0 {
		t.Errorf("%d v1 app processes connected to the database after v2's contract started: a rollback during the contract started older code on a schema being contracted", started)
	}
	for _, p := range held {
		out, err := env.Run.Run(t, env.Kubectl, "logs", "-n", ns, p.Name, "-c", "wait-for-migration", "--tail=5")
		if err != nil || !strings.Contains(out, "SchemaContracted") && !strings.Contains(out, "contract") {
			t.Logf("the held v1 pod %s's gate does not name the contract (%v):\n%s", p.Name, err, out)
		}
	}

	// forward again: v2 serves, and its pods started after its contract
	env.Run.Must(t, env.Kubectl, "rollout", "undo", "deployment/"+r.Fullname(), "-n", ns)
	r.RolledOut(4 * time.Minute)
	if id := r.AppIdentity(ctx); id != v2 {
		t.Fatalf("after rolling forward the Deployment runs identity %s, want v2's %s", id, v2)
	}
	r.AssertWitness(ctx, v2)
	res.Upgrades = 1
}
