//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	ctInstallScenario = scenarios.Declare(framework.EveryPath, framework.Matrix, "ct-install")
)

// chart-testing's own install flow: every ci/*-values.yaml installed with --wait in a namespace of its own and
// `helm test`. Its upgrade step (from a git branch) is not used: the upgrade from the previous release is the
// scenario upgrade-from-previous-*, which fails when that release cannot be found.
func TestChartTestingInstallsAndUpgradesEveryCIValuesFile(t *testing.T) {
	share(t, weightOne, 180*time.Second)
	res := scenario(t, ctInstallScenario, filepath.Join(env.RepoRoot, "bin", "ct"))
	args := []string{"install", "--config", filepath.Join(env.RepoRoot, "ct.yaml"), "--charts", env.Chart, "--upgrade=false"}
	start := time.Now()
	out, err := env.Run.RunCmd(t, framework.Cmd{Bin: filepath.Join(env.RepoRoot, "bin", "ct"), Args: args, Dir: env.RepoRoot,
		Env: map[string]string{"PATH": filepath.Join(env.RepoRoot, "bin") + ":" + os.Getenv("PATH")}})
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if err != nil {
		t.Fatalf("ct install: %v", err)
	}
	if !strings.Contains(out, "All charts installed successfully") {
		t.Errorf("ct install did not report success:\n%s", out)
	}
	t.Logf("ct install took %s", time.Since(start).Round(time.Second))
}
