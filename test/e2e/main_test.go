//go:build e2e

// Package e2e holds the cluster tests: they run against one real kind cluster per `go test` run, a namespace
// per scenario, with the real Helm 3 and Helm 4 CLIs, kubectl and premigrate's own images.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/premigrate/premigrate/test/e2e/verdict"
	"github.com/premigrate/premigrate/test/framework"
	"github.com/premigrate/premigrate/test/kindcluster"
)

// env is what every scenario shares: the cluster, its clients, the chart, the CLIs and the process runner
// (framework.Env). TestMain sets it up before any test runs.
var env *framework.Env

// The files are grouped by the clause of the promise their scenarios prove (framework.Promises), which is
// also how the report groups its rows: before_ (no app pod starts before its migration ran), database_ (the
// records describe this database), once_ (no migration runs twice or at once), forward_ (never backwards, no
// data dropped unasked), failures_ (a migration that cannot run stops the deploy), paths_ (install, upgrade,
// rollback, reinstall, TTL), gitops_, adoption_, privilege_ and contract_ (nothing dropped while older code runs). The harness is main_test.go (set-up, the
// verdict), report_test.go, scenarios_test.go (scenario()) and share_test.go (the scheduler: every scenario runs
// in parallel, as much at once as it lets it, heavy and whole-cluster scenarios first).

// helperTests are the tests that record no scenario: the report does not list them, and go test's own exit
// code, which the verdict takes in, covers them. Every other test must call scenario() (verdict.CheckTests).
var helperTests = []string{
	"TestOurImagesRunAsAJobToCompletionAndADeploymentToReady", // smoke_test.go: our images run at all
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// the earlier run's report goes first, before anything can fail: a run that stops early never leaves
	// it behind as its own
	// the test binary runs in this package's folder, two below the repository's root
	var err error
	if env, err = framework.NewEnv(filepath.Join("..", ".."), "e2e"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	measureMachine() // first, while the machine is quiet: no cluster, no test
	if err := removeReport(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if expected, asked, err = selectScenarios(); err != nil {
		return stopped(err.Error())
	}
	fmt.Printf("e2e: this run is %s\n", asked)
	// the test binary runs in this package's folder: its test files are here
	if err := verdict.CheckTests(".", helperTests); err != nil {
		return stopped(fmt.Sprintf("checking the tests: %v", err))
	}
	if err := verdict.CheckPromises(".", verdict.PromiseFiles); err != nil {
		return stopped(fmt.Sprintf("checking the tests: %v", err))
	}
	flag.Parse() // TestMain reads go test's flags before m.Run parses them
	if err := checkParallel(); err != nil {
		return stopped(err.Error())
	}
	if err := setup(); err != nil {
		// a cluster this run made before set-up failed goes too (one it found stays, as after any run)
		if said, cerr := env.Close(os.Getenv("KEEP_CLUSTER") == "1"); cerr != nil {
			fmt.Fprintln(os.Stderr, "e2e teardown:", cerr)
		} else {
			fmt.Println(said)
		}
		return stopped(fmt.Sprintf("setup failed: %v", err))
	}
	code := m.Run()
	v, err := writeReport(code)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e report:", err)
	}
	// a full run must have the verdict pass; a filtered one keeps go test's own code
	flags := testFlags()
	if asked != wholeSuite {
		flags.Asked = asked
	}
	code, line := verdict.Exit(flags, code, v)
	said, err := env.Close(os.Getenv("KEEP_CLUSTER") == "1")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e teardown:", err)
	} else {
		fmt.Println(said)
	}
	fmt.Println(line)
	return code
}

// wholeSuite is what a run of every declared scenario asked for.
const wholeSuite = "the whole suite (tier matrix)"

// asked is what this run was asked for (selectScenarios), for its verdict line and its report.
var asked string

// selectScenarios chooses the scenarios this run runs and must report, each once: those E2E_SCENARIOS names
// (comma-separated IDs: a mutant's cluster run), else those of the tier E2E_TIER asks for (ci: make test;
// matrix or unset: every scenario, make test-matrix). A test whose scenario is not chosen skips before it
// takes any of the cluster (scenario()). It returns the IDs and what the run asked for.
func selectScenarios() ([]string, string, error) {
	tier, err := framework.ParseTier(os.Getenv("E2E_TIER"))
	if err != nil {
		return nil, "", fmt.Errorf("E2E_TIER: %w", err)
	}
	var ids []string
	for _, id := range strings.Split(os.Getenv("E2E_SCENARIOS"), ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	chosen, err := scenarios.Select(tier, ids)
	if err != nil {
		return nil, "", fmt.Errorf("E2E_SCENARIOS: %w", err)
	}
	switch {
	case len(ids) > 0:
		return chosen, fmt.Sprintf("the scenarios %s", strings.Join(chosen, ", ")), nil
	case tier == framework.Matrix:
		return chosen, wholeSuite, nil
	}
	return chosen, fmt.Sprintf("tier %s (%d of %d scenarios)", tier, len(chosen), len(scenarios.IDs())), nil
}

// checkParallel refuses a go test -parallel below twice the number of scenarios, before any cluster is made.
// Each scenario holds one of go test's parallel slots while it waits in the scheduler's queue (share_test.go),
// and a test that holds cluster weight may wait for slots for its own subtests (the upgrades under load hold the
// whole cluster until their two subtests end): with fewer slots than waiting scenarios nothing ever runs again.
// A full run hung that way, idle, when the scenarios grew to 67 at -parallel 64.
func checkParallel() error {
	f := flag.Lookup("test.parallel")
	if f == nil {
		return nil
	}
	n, err := strconv.Atoi(f.Value.String())
	if err != nil {
		return fmt.Errorf("reading go test's -parallel %q: %w", f.Value.String(), err)
	}
	// every declared scenario's test starts and waits in the queue, the ones this run did not choose too (they skip
	// once they reach scenario())
	declared := len(scenarios.IDs())
	if need := 2 * declared; n < need {
		return fmt.Errorf("go test -parallel %d is below %d, twice the %d scenarios: scenarios waiting for the cluster would hold every "+
			"slot while a test holding the cluster waits for one for its subtests, and the run would hang; raise -parallel (Makefile, hack/mutants)",
			n, need, declared)
	}
	return nil
}

// stopped ends a run that stopped before its tests: it says why and writes a report with the verdict fail.
func stopped(why string) int {
	fmt.Fprintln(os.Stderr, "e2e:", why)
	if err := stoppedReport(why); err != nil {
		fmt.Fprintln(os.Stderr, "e2e report:", err)
	}
	return 1
}

func clusterName() string { return kindcluster.Name() }

// setup writes the report of a run not yet started, then starts the environment (framework.Env.Start).
func setup() error {
	if err := os.MkdirAll(env.Results, 0o755); err != nil {
		return fmt.Errorf("creating the results folder: %w", err)
	}
	if err := startReport(); err != nil {
		return err
	}
	return env.Start(clusterName())
}
