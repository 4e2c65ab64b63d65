//go:build e2e

// Package bench holds the benchmarks of `make bench`: on the same kind cluster and with the same framework as
// the cluster tests, they measure what the project claims about speed and size (the gate's latency beside
// kubectl polling, the upgrade's overhead above the floor, waiters and rollouts at scale, image sizes). They
// measure, they do not assert targets: the numbers go to results/bench-<time>.json, and BENCHMARKS.md keeps the
// latest with the commands that reproduce them. Each benchmark runs alone on the cluster.
package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/premigrate/premigrate/test/framework"
	"github.com/premigrate/premigrate/test/kindcluster"
)

// env is the run's environment (framework.Env), set up by TestMain.
var env *framework.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	// the test binary runs in this package's folder, two below the repository's root
	if env, err = framework.NewEnv(filepath.Join("..", ".."), "bench"); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if err := env.Start(kindcluster.Name()); err != nil {
		fmt.Fprintln(os.Stderr, "bench: setup failed:", err)
		if _, err := env.Close(os.Getenv("KEEP_CLUSTER") == "1"); err != nil {
			fmt.Fprintln(os.Stderr, "bench teardown:", err)
		}
		return 1
	}
	code := m.Run()
	if err := writeBenchReport(); err != nil {
		fmt.Fprintln(os.Stderr, "bench report:", err)
		code = 1
	}
	said, err := env.Close(os.Getenv("KEEP_CLUSTER") == "1")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench teardown:", err)
	} else {
		fmt.Println(said)
	}
	return code
}
