//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/test/framework"
)

var contractSkippedScenario = scenarios.Declare(framework.Contract, framework.Matrix, "contract-skipped-version")

// TestAVersionLeftBeforeItsRolloutEndedNeverRunsItsContract applies v1, then v2 and, while v2's rollout is
// still under way (its contract Job waiting for it), v3, with `helm template | kubectl apply` (job mode: every
// contract Job starts with its apply). v2's contract never runs: its Job ends with exit 0 once the Deployment
// left v2, and the records hold no contract of v2. v3's contract runs once, after every v1 and v2 pod is gone:
// in the database, after v3's migration, with no session of another version. The contract of the newest
// version is the one that runs, so it must drop what every version it skipped would have (docs/zero-downtime.md).
func TestAVersionLeftBeforeItsRolloutEndedNeverRunsItsContract(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, contractSkippedScenario, env.Kubectl)
	ctx := context.Background()
	ns := env.NewNamespace(t, "contract-skip", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	apply := func(tag string) {
		r.Apply(r.Template(framework.Merge(contractValues(tag, true), map[string]any{
			"migration":  map[string]any{"mode": "job"},
			"postgresql": map[string]any{"auth": map[string]any{"password": "contract-pw"}},
		})))
	}
	contractJob := func(id string) string {
		return "job -l app.kubernetes.io/component=contract,premigrate.io/identity=" + id
	}
	waitComplete := func(id string) {
		t.Helper()
		args := append([]string{"wait", "-n", ns, "--for=condition=Complete", "--timeout=4m"}, strings.Fields(contractJob(id))...)
		env.Run.Must(t, env.Kubectl, args...)
	}

	start := time.Now()
	apply("v1")
	r.RolledOut(4 * time.Minute)
	v1 := r.AppIdentity(ctx)
	waitComplete(v1)
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())

	// v2, and v3 once v2's contract Job runs (waiting for v2's rollout, which v3 ends)
	start = time.Now()
	apply("v2")
	var v2 string
	framework.WaitUntil(t, "v2's contract Job to run", 3*time.Minute, func(ctx context.Context) (bool, error) {
		v2 = r.AppIdentity(ctx)
		if v2 == v1 {
			return false, nil
		}
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=contract,premigrate.io/identity=" + v2})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == "Running" {
				return true, nil
			}
		}
		return false, nil
	})
	apply("v3")
	r.RolledOut(5 * time.Minute)
	v3 := r.AppIdentity(ctx)
	waitComplete(v3)
	waitComplete(v2)
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	res.Upgrades = 2

	// v2's contract Job ended without running its command
	out, err := env.Run.Run(t, env.Kubectl, "logs", "-n", ns, "-l", "app.kubernetes.io/component=contract,premigrate.io/identity="+v2, "--tail=50")
	if err != nil || !strings.Contains(out, "never while another identity serves") {
		t.Errorf("v2's contract Job does not say it left the contract to the identity that serves (%v):\n%s", err, out)
	}
	records := r.Records(ctx)
	if _, ok := record.ContractOf(records[v2]); ok {
		t.Errorf("the records hold a contract of v2, whose rollout never ended: %q", records[v2])
	}
	if _, ok := record.ContractOf(records[v3]); !ok {
		t.Errorf("the records hold no contract of v3: %q", records[v3])
	}
	// the database's order: v3's migration, then v3's contract, alone
	byVersion := map[int][]contractRow{}
	for _, row := range contractRows(t, r) {
		byVersion[row.appVersion] = append(byVersion[row.appVersion], row)
	}
	if len(byVersion[1]) != 1 || len(byVersion[2]) != 0 || len(byVersion[3]) != 1 {
		t.Fatalf("demo_contracts: want one row of v1, none of v2, one of v3; got %+v", byVersion)
	}
	c3 := byVersion[3][0]
	migrated, ok := r.MigrationFinished(v3)
	if !ok || c3.startedAt.Before(migrated) {
		t.Errorf("v3's contract started at %s, before v3's migration finished (%s, recorded %t)", c3.startedAt, migrated, ok)
	}
	if c3.otherSessions != "" {
		t.Errorf("v3's contract started while the database had sessions of other versions: %s", c3.otherSessions)
	}
	t.Logf("the database's order: v3's migration finished %s, v3's contract started %s with no other version connected; v2's contract never ran",
		migrated.UTC().Format("15:04:05.000"), c3.startedAt.UTC().Format("15:04:05.000"))
	r.AssertWitness(ctx, v3)
	assertNoContractPodFailed(t, ns)
}
