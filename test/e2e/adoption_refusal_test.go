//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenario this file proves (the report lists it; a full run must run it once).
var adopterRefusalScenario = scenarios.Declare(framework.Adoption, framework.CI, "adopter-refusal-fails-at-once")

// TestTheGatesRefusalFailsAnAdoptersJobAtOnceAndTheAppsOwnExitThreeIsRetried deploys the example chart with the
// library's default failFastExitCodes (none: the example's [3] taken out) and one record kept (Helm 4). A
// deploy of schema 1 after schema 2 (its record pruned) is refused by the gate (exit 3), and the Job fails at
// once: one pod, failed for its PodFailurePolicy, whatever the adopter's codes. Then a new identity of schema 1
// is refused by the app itself (the ledger exits 3: schema 1 is older than the database's 2), a code the adopter
// did not list: it is the app's failure, not the gate's refusal, so the Job retries it (three pods,
// backoffLimit 2). The API server counts the pods; the database shows that neither changed the schema.
func TestTheGatesRefusalFailsAnAdoptersJobAtOnceAndTheAppsOwnExitThreeIsRetried(t *testing.T) {
	share(t, weightOne, 100*time.Second)
	res := scenario(t, adopterRefusalScenario, env.Helm4)
	l := newLedger(t, env.Helm4)
	values := func(v int, extraEnv ...map[string]any) map[string]any {
		return map[string]any{"schemaVersion": v, "migrations": map[string]any{
			"failFastExitCodes": []any{}, "keepRecords": 1, "env": append([]map[string]any{}, extraEnv...)}}
	}
	liveJob := func() *batchv1.Job {
		t.Helper()
		j, err := env.Client.BatchV1().Jobs(l.ns).Get(context.Background(), l.name+"-ledger-migrate", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading the hook Job: %v", err)
		}
		return j
	}
	for v := 1; v <= 2; v++ {
		if out, err := l.deploy(values(v), true); err != nil {
			t.Fatalf("deploying schema %d: %v\n%s", v, err, out)
		}
	}
	l.assertSchema(2, 2)

	// schema 1 again: its identity ran on this database and its record was pruned (keepRecords 1)
	start := time.Now()
	if out, err := l.deploy(values(1), true); err == nil {
		t.Fatalf("the deploy of schema 1 after schema 2, its record pruned, succeeded:\n%s", out)
	}
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if j := liveJob(); j.Status.Failed != 1 || !failedFor(j, "PodFailurePolicy") {
		t.Errorf("the Job the gate refused has %d failed pods and conditions %+v: want 1 pod, failed for its PodFailurePolicy "+
			"(the gate's refusal, exit 3, with no failFastExitCodes of the adopter)", j.Status.Failed, j.Status.Conditions)
	}

	// a new identity of schema 1: the app refuses it (its own exit 3, not listed), so the Job retries it
	start = time.Now()
	if out, err := l.deploy(values(1, map[string]any{"name": "LEDGER_NOTE", "value": "a downgrade"}), true); err == nil {
		t.Fatalf("the deploy of an older schema succeeded:\n%s", out)
	}
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	res.Upgrades = 3
	if j := liveJob(); j.Status.Failed != 3 || !failedFor(j, "BackoffLimitExceeded") {
		t.Errorf("the Job whose app exited 3 (a code the adopter did not list) has %d failed pods and conditions %+v: "+
			"want 3 pods (backoffLimit 2), its 3 not taken for the gate's refusal", j.Status.Failed, j.Status.Conditions)
	}
	if got := l.psql(`SELECT max(version) FROM ledger_schema`); got != "2" {
		t.Errorf("schema = %s after the refused deploys, want 2", got)
	}
}
