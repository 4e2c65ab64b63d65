//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chart-testing's own install flow: every ci/*-values.yaml installed with --wait in a namespace of its own and
// `helm test`. Its upgrade step (from a git branch) is not used: the upgrade from the previous release is the
// scenario upgrade-from-previous-*, which fails when that release cannot be found.
func TestChartTestingInstallsAndUpgradesEveryCIValuesFile(t *testing.T) {
	share(t, weightOne, 180*time.Second)
	res := scenario(t, "ct-install", filepath.Join(env.repoRoot, "bin", "ct"))
	args := []string{"install", "--config", filepath.Join(env.repoRoot, "ct.yaml"), "--charts", env.chart, "--upgrade=false"}
	cmd := exec.Command(filepath.Join(env.repoRoot, "bin", "ct"), args...)
	cmd.Dir = env.repoRoot
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.kubeconfig, "PATH="+filepath.Join(env.repoRoot, "bin")+":"+os.Getenv("PATH"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if err != nil {
		t.Fatalf("ct install: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "All charts installed successfully") {
		t.Errorf("ct install did not report success:\n%s", out)
	}
	t.Logf("ct install took %s", time.Since(start).Round(time.Second))
}
