//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	gateWaitInAppScenario        = scenarios.Declare(framework.Before, framework.Matrix, "gate-wait-in-app")
	gateWaitInAppControlScenario = scenarios.Declare(framework.Before, framework.Matrix, "gate-wait-in-app-control")
)

// TestTheAppContainerItselfWaitsForItsMigrationWithGateWaitInApp installs and upgrades with gate.waitIn app:
// the app container starts as `gate wait ... -- /demo serve` and the gate replaces itself with the app once
// the migration succeeded. The gate binary comes once as an image volume and then copied by install-gate;
// the install's migration takes 45 s while its pods wait, longer than the liveness probe allows a silent
// container (3 x 10 s), so the derived startup probe must keep the kubelet from restarting the waiting container. The witness (the app's
// own start, the database's migration runs) proves no app process started before its migration.
func TestTheAppContainerItselfWaitsForItsMigrationWithGateWaitInApp(t *testing.T) {
	share(t, weightOne, 155*time.Second)
	res := scenario(t, gateWaitInAppScenario, env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "waitin", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	steps := []map[string]any{
		// the install's pods are created with the migration Job and wait for it (45 s)
		{"image": map[string]any{"tag": "v2"}, "gate": map[string]any{"waitIn": "app", "delivery": "imageVolume"},
			"migration": map[string]any{"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "45s")}}},
		{"image": map[string]any{"tag": "v3"}, "gate": map[string]any{"waitIn": "app"}},
		{"image": map[string]any{"tag": "v4"}, "gate": map[string]any{"waitIn": "app"}},
	}
	for i, s := range steps {
		_, d := r.MustDeploy(framework.Merge(framework.BaseValues(), s))
		res.DurationsSec = append(res.DurationsSec, d.Seconds())
		if i > 0 {
			res.Upgrades++
		}
		id := r.AppIdentity(ctx)
		r.AssertWitness(ctx, id)
		if i == 0 {
			// the waiting was done by the app containers: the API server says they ran before the migration ended
			done, _ := r.MigrationFinished(id)
			for _, p := range r.AppPods(ctx, id) {
				if started, ok := framework.AppStart(p); !ok || !started.Before(done.Add(-5*time.Second)) {
					t.Errorf("pod %s's app container started at %v, not while the 45 s migration ran (finished %v)", p.Name, started, done)
				}
			}
		}
		for _, p := range r.AppPods(ctx, id) {
			if !framework.AppContainerWaits(p) {
				t.Errorf("step %d: pod %s's app container does not start through the gate: %v", i+1, p.Name, p.Spec.Containers[0].Command)
			}
			for _, c := range p.Spec.InitContainers {
				if c.Name == "wait-for-migration" {
					t.Errorf("step %d: pod %s still has the wait-for-migration init container", i+1, p.Name)
				}
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount != 0 {
					t.Errorf("step %d: the kubelet restarted container %s of pod %s %d time(s) while it waited", i+1, cs.Name, p.Name, cs.RestartCount)
				}
			}
			logs := env.Run.Must(t, env.Kubectl, "logs", "-n", ns, p.Name, "-c", "app")
			if !strings.Contains(logs, "starting /demo") {
				t.Errorf("step %d: pod %s's log does not show the gate starting the app:\n%s", i+1, p.Name, logs)
			}
		}
	}
}

// TestWithoutAStartupProbeCoveringTheWaitTheLivenessProbeRestartsTheWaitingAppContainer is the negative control
// of the derived startup probe: the same 45 s migration with a startup probe that succeeds at once (the gate
// binary's `version`) lets the liveness probe run while the gate waits, and the kubelet restarts the container.
func TestWithoutAStartupProbeCoveringTheWaitTheLivenessProbeRestartsTheWaitingAppContainer(t *testing.T) {
	share(t, weightOne, 130*time.Second)
	res := scenario(t, gateWaitInAppControlScenario, env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "waitinctl", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	_, d := r.MustDeploy(framework.Merge(framework.BaseValues(), map[string]any{
		"image":        map[string]any{"tag": "v2"},
		"gate":         map[string]any{"waitIn": "app"},
		"migration":    map[string]any{"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "45s")}},
		"startupProbe": map[string]any{"exec": map[string]any{"command": []any{"/premigrate/gate", "version"}}, "periodSeconds": 1},
	}))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	id := r.AppIdentity(ctx)
	restarts := int32(0)
	for _, p := range r.AppPods(ctx, id) {
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
	}
	if restarts == 0 {
		t.Errorf("no app container was restarted while it waited 45 s with the liveness probe on: the control does not show what the startup probe protects")
	}
	t.Logf("the kubelet restarted the waiting app containers %d time(s)", restarts)
	r.AssertWitness(ctx, id)
}
