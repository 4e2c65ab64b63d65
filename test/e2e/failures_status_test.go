//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenario this file proves (the report lists it; a full run must run it once).
var statusScenario = scenarios.Declare(framework.NeverSkipped, framework.Matrix, "status-says-what-waits")

// `gate status` is what an operator runs when pods wait: for a release, the records and their database, the
// last runs, the Jobs, every gated pod with what it waits for, the next step, and an exit code a script can use.
// Asserted here on what the cluster really holds (Helm 4): a release where everything started (exit 0), a pod
// held by a failed migration (exit 3, naming the Job and the command that shows its log), and a contract step
// waiting for its soak (pending, with its Job).
func TestStatusSaysWhatEachPodWaitsForAndWhatToDo(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, statusScenario, env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "status", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	r.MustDeploy(framework.BaseValues())

	out, code := gateStatus(t, ns, "app")
	if code != 0 || !strings.Contains(out, "verdict: no pod waits (exit 0)") || !strings.Contains(out, "records of app-premigrate") {
		t.Errorf("status of a release whose pods all started: exit %d, want 0 and its records:\n%s", code, out)
	}

	// a failed migration, and its identity's pods brought by an upgrade without hooks: held
	broken := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"},
		"migration": map[string]any{"backoffLimit": 0, "env": []any{framework.EnvVar("DEMO_FAIL_MIGRATION", "2")}}})
	if out, _, err := r.Deploy(broken); err == nil {
		t.Fatalf("the upgrade with a failing migration succeeded:\n%s", out)
	}
	if out, _, err := r.Deploy(broken, "--no-hooks", "--wait=false"); err != nil {
		t.Fatalf("helm upgrade --no-hooks: %v\n%s", err, out)
	}
	brokenID := r.AppIdentity(ctx)
	framework.WaitUntil(t, "status to say the failed migration holds a pod", 2*time.Minute, func(context.Context) (bool, error) {
		out, code = gateStatus(t, ns, "app")
		return code == 3 && strings.Contains(out, "hold (JobFailed)"), nil
	})
	for _, want := range []string{brokenID, "next: read `kubectl logs -n " + ns + " job/" + r.Fullname() + "-migrate -c migrate`",
		"Failed", "verdict: pods are held until you act"} {
		if !strings.Contains(out, want) {
			t.Errorf("status with a held pod does not say %q:\n%s", want, out)
		}
	}

	// a contract step waiting for its soak: pending, with its Job (the upgrade waits for it: run it aside)
	withContract := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"},
		"migration": map[string]any{"contract": map[string]any{"command": []any{"/demo", "contract"}, "soakSeconds": 3600}}})
	args := r.DeployArgs(withContract, "--timeout", "100s")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = r.RunDeploy(args) // ends when its --timeout stops the wait for the contract hook
	}()
	framework.WaitUntil(t, "status to show the contract step pending", 90*time.Second, func(context.Context) (bool, error) {
		out, code = gateStatus(t, ns, "app")
		return strings.Contains(out, "pending: Job "+r.Fullname()+"-contract"), nil
	})
	res.Upgrades = 3
	<-done
	t.Logf("gate status with a contract pending (exit %d):\n%s", code, out)
}

var (
	gateBinOnce sync.Once
	gateBin     string
	gateBinErr  error
)

// gateStatus runs `gate status` for a release from this machine, as an operator would, and returns its output
// and exit code.
func gateStatus(t *testing.T, ns, release string) (string, int) {
	t.Helper()
	gateBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "premigrate-gate-")
		if err != nil {
			gateBinErr = err
			return
		}
		gateBin = filepath.Join(dir, "gate")
		cmd := exec.Command("go", "build", "-o", gateBin, "./cmd/gate")
		cmd.Dir = env.RepoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			gateBinErr = errors.New(string(out))
		}
	})
	if gateBinErr != nil {
		t.Fatalf("building the gate: %v", gateBinErr)
	}
	out, err := env.Run.Stdout(t, gateBin, "status", "--namespace", ns, "--release", release)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &exit):
		return out, exit.ExitCode()
	}
	t.Fatalf("gate status: %v\n%s", err, out)
	return "", -1
}
