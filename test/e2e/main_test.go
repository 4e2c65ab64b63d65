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
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/premigrate/premigrate/test/e2e/verdict"
	"github.com/premigrate/premigrate/test/framework"
	"github.com/premigrate/premigrate/test/kindcluster"
)

// env is what every scenario shares: the cluster, a client and the tools.
var env struct {
	kubeconfig string
	client     kubernetes.Interface
	restConfig *rest.Config
	dynamic    dynamic.Interface // for the custom resources of Flux and Argo CD
	repoRoot   string
	chart      string
	example    string
	appVersion string // the chart's appVersion: the tag of the gate and demo images
	helm3      string
	helm4      string
	kubectl    string
	results    string
	// run runs every program the scenarios drive (framework.Runner)
	run *framework.Runner
	// cluster is the kind cluster of the run, once setup has it (its teardown deletes it only if the run made it)
	cluster *kindcluster.Cluster
}

// Every scenario runs in parallel, as much at once as the scheduler of share_test.go lets it: heavy and whole-
// cluster scenarios first, then the light ones, four at a time.

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
	results, err := filepath.Abs(filepath.Join("..", "..", "results"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: finding the results folder:", err)
		return 1
	}
	env.results = results
	if err := removeReport(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	expected = scenarios.Seal()
	// the test binary runs in this package's folder: its test files are here
	if err := verdict.CheckTests(".", helperTests); err != nil {
		return stopped(fmt.Sprintf("checking the tests: %v", err))
	}
	flag.Parse() // TestMain reads go test's flags before m.Run parses them
	if err := checkParallel(); err != nil {
		return stopped(err.Error())
	}
	if err := setup(); err != nil {
		return stopped(fmt.Sprintf("setup failed: %v", err))
	}
	code := m.Run()
	v, err := writeReport(code)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e report:", err)
	}
	if err := writeBenchReport(); err != nil {
		fmt.Fprintln(os.Stderr, "bench report:", err)
	}
	// a full run must have the verdict pass; a filtered one keeps go test's own code
	code, line := verdict.Exit(testFlags(), code, v)
	if env.run != nil {
		if err := env.run.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e command logs:", err)
		}
	}
	if env.cluster != nil {
		said, err := env.cluster.Teardown(os.Getenv("KEEP_CLUSTER") == "1")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e teardown:", err)
		} else {
			fmt.Println(said)
		}
	}
	fmt.Println(line)
	return code
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
	if need := 2 * len(expected); n < need {
		return fmt.Errorf("go test -parallel %d is below %d, twice the %d scenarios: scenarios waiting for the cluster would hold every "+
			"slot while a test holding the cluster waits for one for its subtests, and the run would hang; raise -parallel (Makefile, hack/mutants)",
			n, need, len(expected))
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

func setup() error {
	root, err := filepath.Abs("../..")
	if err != nil {
		return fmt.Errorf("finding the repository root: %w", err)
	}
	env.repoRoot = root
	env.chart = filepath.Join(root, "charts", "premigrate")
	env.example = filepath.Join(root, "examples", "ledger", "chart")
	if env.appVersion, err = chartAppVersion(env.chart); err != nil {
		return err
	}
	env.helm3 = filepath.Join(root, "bin", "helm")
	env.helm4 = filepath.Join(root, "bin", "helm4")
	env.kubectl = filepath.Join(root, "bin", "kubectl")
	for _, b := range []string{env.helm3, env.helm4, env.kubectl} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: run `make tools` (or `make test-e2e`)", b)
		}
	}
	dir, err := os.MkdirTemp("", "premigrate-e2e-")
	if err != nil {
		return fmt.Errorf("creating a temp folder for the kubeconfig: %w", err)
	}
	env.kubeconfig = filepath.Join(dir, "kubeconfig")
	// each test's commands and their output go to results/commands/<test>.log; the earlier run's go first
	commands := filepath.Join(env.results, "commands")
	if err := os.RemoveAll(commands); err != nil {
		return fmt.Errorf("removing the earlier run's command logs: %w", err)
	}
	env.run = &framework.Runner{Kubeconfig: env.kubeconfig, Dir: commands}
	fmt.Printf("e2e: every command a test runs, with its output, is logged in %s/<test>.log\n", commands)
	// the library chart is packaged into the charts that depend on it now, so no test runs a stale copy
	for _, c := range []string{env.chart, env.example} {
		if _, err := env.run.RunCmd(nil, framework.Cmd{Bin: env.helm3, Args: []string{"dependency", "build", "--skip-refresh", c}}); err != nil {
			return err
		}
	}
	cache := os.Getenv("PREMIGRATE_CACHE")
	if cache == "" {
		return fmt.Errorf("PREMIGRATE_CACHE is not set: run the cluster tests through `make test-e2e`")
	}
	if err := os.MkdirAll(env.results, 0o755); err != nil {
		return fmt.Errorf("creating the results folder: %w", err)
	}
	if err := startReport(); err != nil {
		return err
	}
	start := time.Now()
	c, err := kindcluster.Ensure(kindcluster.Options{
		Name:       clusterName(),
		NodeImage:  os.Getenv("KIND_NODE_IMAGE"),
		Kubeconfig: env.kubeconfig,
	})
	if err != nil {
		return err
	}
	env.cluster = c
	fmt.Printf("e2e: cluster %q ready in %s (created=%v, kubeconfig %s)\n", c.Name, time.Since(start).Round(time.Second), c.Created, env.kubeconfig)
	archives, err := filepath.Glob(filepath.Join(cache, "images", "*.tar"))
	if err != nil || len(archives) == 0 {
		return fmt.Errorf("no image archives in %s/images: run `make images`", cache)
	}
	start = time.Now()
	n, err := c.LoadImageArchives(archives...)
	if err != nil {
		return err
	}
	fmt.Printf("e2e: %d image archives loaded in %s\n", n, time.Since(start).Round(time.Second))
	cfg, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", env.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	env.restConfig = cfg
	env.client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	if env.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return fmt.Errorf("building a dynamic client: %w", err)
	}
	return nil
}

// chartAppVersion reads appVersion from the chart's Chart.yaml.
func chartAppVersion(chart string) (string, error) {
	b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		return "", fmt.Errorf("reading the chart's Chart.yaml: %w", err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("decoding %s/Chart.yaml: %w", chart, err)
	}
	if c.AppVersion == "" {
		return "", fmt.Errorf("no appVersion in %s/Chart.yaml", chart)
	}
	return c.AppVersion, nil
}
