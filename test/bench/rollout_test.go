//go:build e2e

package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/premigrate/premigrate/test/framework"
)

// TestBenchmarkRolloutWithMoreReplicas measures, for 2, 10 and 30 replicas with the chart's default strategy
// (maxSurge 1, maxUnavailable 0: one new pod at a time), the time from the migration Job's Complete condition
// to the last new app pod Ready, with the gate on the app pods (gate.mode watch), with the app container as
// the gate (app: gate.waitIn app, the gate as an image volume) and without (gate.mode none: Helm's hook order
// alone), each on the harness's watch. What the gate costs a rollout is the difference.
// BENCH_ROLLOUT_REPLICAS and BENCH_ROLLOUT_GATES (comma-separated) pick a subset: the node holds about 110 pods.
func TestBenchmarkRolloutWithMoreReplicas(t *testing.T) {
	runs := envInt("BENCH_ROLLOUTS", 9)
	var variants []*rolloutVariant
	for _, n := range envList(t, "BENCH_ROLLOUT_REPLICAS", "2,10,30") {
		for _, g := range strings.Split(envOr("BENCH_ROLLOUT_GATES", "watch,none,app"), ",") {
			v := &rolloutVariant{replicas: n, gate: g}
			v.rel = env.NewRelease(t, env.NewNamespace(t, fmt.Sprintf("bench-ro%d-%s", n, g), framework.Restricted()), "app", env.Helm4)
			v.rel.MustDeploy(v.values(""))
			variants = append(variants, v)
		}
	}
	res := map[string]any{"runs": runs}
	for i := 0; i < runs; i++ {
		for k := range variants {
			v := variants[(i+k)%len(variants)]
			stop := make(chan struct{})
			tl, wait := watchUpgrade(t, v.rel.Namespace, stop)
			v.rel.MustDeploy(v.values(fmt.Sprint(i)))
			close(stop)
			wait()
			tl.mu.Lock()
			var last time.Time
			for _, at := range tl.appReady {
				if at.After(last) {
					last = at
				}
			}
			complete := tl.jobComplete
			tl.mu.Unlock()
			if complete.IsZero() || last.IsZero() || len(tl.appReady) < v.replicas {
				t.Fatalf("%d replicas, gate %s: the watch saw Complete %v and %d of %d new pods Ready", v.replicas, v.gate, complete, len(tl.appReady), v.replicas)
			}
			v.sec = append(v.sec, last.Sub(complete).Seconds())
		}
	}
	for _, v := range variants {
		name := fmt.Sprintf("%d replicas, gate %s", v.replicas, v.gate)
		res[name] = map[string]any{"completeToLastReadySec": v.sec, "medianSec": percentile(v.sec, 0.5)}
		t.Logf("%s: Complete -> last new pod Ready, median %.2fs (%.1f-%.1f)", name, percentile(v.sec, 0.5), percentile(v.sec, 0), percentile(v.sec, 1))
	}
	benchRecord("rolloutReplicas", res)
}

// rolloutVariant is one release of the rollout benchmark.
type rolloutVariant struct {
	replicas int
	gate     string
	rel      *framework.Release
	sec      []float64
}

// values are the variant's chart values; change sets an env var, so each upgrade runs a new migration
// identity and replaces every pod.
func (v *rolloutVariant) values(change string) map[string]any {
	gate := map[string]any{"mode": v.gate}
	if v.gate == "app" {
		gate = map[string]any{"mode": "watch", "waitIn": "app", "delivery": "imageVolume"}
	}
	return map[string]any{
		"replicaCount": v.replicas,
		"gate":         gate,
		"env":          []any{framework.EnvVar("ROUND", change)},
	}
}

// envList is a comma-separated list of positive integers from the environment, or def.
func envList(t *testing.T, name, def string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Split(envOr(name, def), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("%s: %q is not a positive integer", name, f)
		}
		out = append(out, n)
	}
	return out
}

// envOr is the environment variable name, or def when it is empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
