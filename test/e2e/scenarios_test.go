//go:build e2e

package e2e

import (
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).

var restricted = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}

// scenario records one scenario's result (pass, fail or skipped) in the report when the test ends. A scenario
// this run did not choose (E2E_TIER, E2E_SCENARIOS: main_test.go) skips the test here, before it records
// anything: call it first, before the test does any work (share may come before it: a skipped test only
// passes through the queue).
func scenario(t *testing.T, s framework.Scenario, helmBin string) *scenarioResult {
	if s.ID() == "" {
		t.Fatalf("%s records a scenario that was never declared (a variant missing from its DeclareEach?)", t.Name())
	}
	if !scenarios.Selected(s.ID()) {
		t.Skipf("scenario %s (tier %s) is not part of this run, %s", s.ID(), s.Tier(), asked)
	}
	start := time.Now()
	res := &scenarioResult{Scenario: s.ID(), Promise: string(s.Promise()), Tier: string(s.Tier()), Numbers: map[string]float64{}}
	res.Helm = toolName(helmBin)
	cpuShares.Start(s.ID())
	t.Cleanup(func() {
		res.CPUSec = cpuShares.Stop(s.ID())
		if t.Failed() {
			t.Logf("the commands this scenario ran, with their output: %s", env.Run.LogPath(t.Name()))
		}
		res.Result = resultOf(t.Failed(), t.Skipped())
		res.WallSec = time.Since(start).Seconds()
		addResult(*res)
	})
	return res
}

// toolName names a CLI in the report: helm3, helm4, kubectl, ct.
func toolName(bin string) string {
	switch bin {
	case "":
		return ""
	case env.Helm3:
		return "helm3"
	}
	return filepath.Base(bin)
}

// failedFor is true when the Job has condition Failed with the given reason.
func failedFor(j *batchv1.Job, reason string) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}
