package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chart-testing's own install flow: every ci/*-values.yaml installed with --wait in a namespace of its own,
// `helm test`, and (where the repository has its target branch) an upgrade from the target branch's chart.
func TestChartTestingInstallsAndUpgradesEveryCIValuesFile(t *testing.T) {
	res := scenario(t, "ct-install", filepath.Join(env.repoRoot, "bin", "ct"))
	args := []string{"install", "--config", filepath.Join(env.repoRoot, "ct.yaml"), "--charts", env.chart}
	if err := exec.Command("git", "-C", env.repoRoot, "rev-parse", "--verify", "--quiet", "origin/main").Run(); err != nil {
		// no origin/main to take the previous chart from (a local clone without a remote): install only
		args = append(args, "--upgrade=false")
		t.Log("no origin/main: ct installs and tests the chart, without its upgrade step")
	}
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
