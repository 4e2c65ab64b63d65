//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	controlJobModeWithoutGateScenario = scenarios.Declare(framework.Before, "control-1")
	controlGateAlwaysLetsGoScenario   = scenarios.Declare(framework.Before, "control-2")
)

// Negative controls: the protection removed, the same oracle. The witness (the app's own record of its start
// and the schema it saw, the migration's own record in the database) must report the violation; if it did
// not, the scenarios that pass on it would prove nothing.
func TestTheWitnessCatchesPodsThatStartBeforeTheirMigration(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	slow := []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "8s")}
	cases := []struct {
		name     string
		scenario framework.Scenario
		helm     bool // helm install; else helm template | kubectl apply
		values   map[string]any
	}{
		{
			name:     "job mode without the gate: the pods race the Job",
			scenario: controlJobModeWithoutGateScenario,
			values: map[string]any{
				"migration":  map[string]any{"mode": "job", "env": slow},
				"gate":       map[string]any{"mode": "none"},
				"postgresql": map[string]any{"auth": map[string]any{"password": "control-password"}},
			},
		},
		{
			name:     "a gate that always lets go",
			scenario: controlGateAlwaysLetsGoScenario,
			helm:     true,
			values: map[string]any{
				"migration": map[string]any{"env": slow},
				// the command-mode gate running `demo help`, which exits 0 at once whatever the schema
				"gate": map[string]any{"mode": "command", "args": []any{"help"}},
			},
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			share(t, weightOne, 50*time.Second)
			res := scenario(t, c.scenario, env.Kubectl)
			ctx := context.Background()
			ns := env.NewNamespace(t, fmt.Sprintf("control%d", i+1), restricted)
			values := framework.Merge(framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"}}), c.values)
			r := env.NewRelease(t, ns, "app", "")
			start := time.Now()
			if c.helm {
				r.Helm = env.Helm3
				res.Helm = "helm3"
				r.MustDeploy(values)
			} else {
				r.Apply(r.Template(values))
				r.RolledOut(4 * time.Minute)
			}
			id := r.AppIdentity(ctx)
			framework.WaitUntil(t, "the migration of "+id+" to finish", 3*time.Minute, func(context.Context) (bool, error) {
				_, ok := r.MigrationFinished(id)
				return ok, nil
			})
			res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
			violations := r.WitnessViolations()
			res.Numbers["violationsCaught"] = float64(len(violations))
			if len(violations) == 0 {
				t.Fatalf("the protection was removed, yet the witness saw no pod start before its migration: the oracle is blind")
			}
			t.Logf("caught, as it must be:\n  %s", strings.Join(violations, "\n  "))
		})
	}
}
