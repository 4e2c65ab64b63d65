package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/premigrate/premigrate/test/kindcluster"
)

// Env is what every scenario of a `go test` run shares: the kind cluster, clients of its API server, the
// repository's chart and the pinned CLIs, and the process runner. NewEnv fills in the paths; Start makes (or
// finds) the cluster and loads the images; Close tears down what Start made.
type Env struct {
	Suite      string // the test package's name (e2e, bench): its command logs are results/commands/<suite>
	RepoRoot   string
	Chart      string // charts/premigrate
	Example    string // examples/ledger/chart
	AppVersion string // the chart's appVersion: the tag of the gate and demo images
	Helm3      string // bin/helm
	Helm4      string // bin/helm4
	Kubectl    string // bin/kubectl
	Results    string // results/: reports and command logs

	Kubeconfig string
	Client     kubernetes.Interface
	RestConfig *rest.Config
	Dynamic    dynamic.Interface // for the custom resources of Flux and Argo CD
	// Run runs every program a scenario drives (Runner); its logs are in results/commands.
	Run *Runner
	// Cluster is the run's kind cluster once Start has it; Close deletes it only if the run made it.
	Cluster *kindcluster.Cluster
}

// NewEnv is the environment of the suite (a test package) in the repository at root (its chart, bin/ and
// results/), before any cluster.
func NewEnv(root, suite string) (*Env, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("finding the repository root: %w", err)
	}
	e := &Env{
		Suite:    suite,
		RepoRoot: root,
		Chart:    filepath.Join(root, "charts", "premigrate"),
		Example:  filepath.Join(root, "examples", "ledger", "chart"),
		Helm3:    filepath.Join(root, "bin", "helm"),
		Helm4:    filepath.Join(root, "bin", "helm4"),
		Kubectl:  filepath.Join(root, "bin", "kubectl"),
		Results:  filepath.Join(root, "results"),
	}
	if e.AppVersion, err = ChartAppVersion(e.Chart); err != nil {
		return nil, err
	}
	return e, nil
}

// Start checks the tools, packages the library chart into the charts that use it, makes (or finds) the kind
// cluster named clusterName, loads the image archives of $PREMIGRATE_CACHE/images and builds the clients. Each
// long step prints its time.
func (e *Env) Start(clusterName string) error {
	for _, b := range []string{e.Helm3, e.Helm4, e.Kubectl} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: run `make tools` (or `make test-e2e`)", b)
		}
	}
	cache := os.Getenv("PREMIGRATE_CACHE")
	if cache == "" {
		return fmt.Errorf("PREMIGRATE_CACHE is not set: run the cluster tests through make")
	}
	if err := os.MkdirAll(e.Results, 0o755); err != nil {
		return fmt.Errorf("creating the results folder: %w", err)
	}
	dir, err := os.MkdirTemp("", "premigrate-e2e-")
	if err != nil {
		return fmt.Errorf("creating a temp folder for the kubeconfig: %w", err)
	}
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	// each test's commands and their output go to results/commands/<suite>/<test>.log; the earlier run's go
	// first
	commands := filepath.Join(e.Results, "commands", e.Suite)
	if err := os.RemoveAll(commands); err != nil {
		return fmt.Errorf("removing the earlier run's command logs: %w", err)
	}
	e.Run = &Runner{Kubeconfig: e.Kubeconfig, Dir: commands}
	fmt.Printf("%s: every command a test runs, with its output, is logged in %s/<test>.log\n", e.Suite, commands)
	// the library chart is packaged into the charts that depend on it now, so no test runs a stale copy
	for _, c := range []string{e.Chart, e.Example} {
		if _, err := e.Run.RunCmd(nil, Cmd{Bin: e.Helm3, Args: []string{"dependency", "build", "--skip-refresh", c}}); err != nil {
			return err
		}
	}
	start := time.Now()
	c, err := kindcluster.Ensure(kindcluster.Options{
		Name:       clusterName,
		NodeImage:  os.Getenv("KIND_NODE_IMAGE"),
		Kubeconfig: e.Kubeconfig,
		// KIND_FEATURE_GATES (comma-separated Name=true) turns gates on in a cluster this run creates
		FeatureGates: strings.FieldsFunc(os.Getenv("KIND_FEATURE_GATES"), func(r rune) bool { return r == ',' }),
	})
	if err != nil {
		return err
	}
	e.Cluster = c
	fmt.Printf("%s: cluster %q ready in %s (created=%v, kubeconfig %s)\n", e.Suite, c.Name, time.Since(start).Round(time.Second), c.Created, e.Kubeconfig)
	archives, err := filepath.Glob(filepath.Join(cache, "images", "*.tar"))
	if err != nil || len(archives) == 0 {
		return fmt.Errorf("no image archives in %s/images: run `make images`", cache)
	}
	start = time.Now()
	n, err := c.LoadImageArchives(archives...)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d image archives loaded in %s\n", e.Suite, n, time.Since(start).Round(time.Second))
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", e.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	e.RestConfig = cfg
	if e.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	if e.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return fmt.Errorf("building a dynamic client: %w", err)
	}
	return nil
}

// Close closes the command logs and tears the cluster down, unless keep or the run found it made; it returns
// what it did.
func (e *Env) Close(keep bool) (string, error) {
	if e.Run != nil {
		if err := e.Run.Close(); err != nil {
			return "", fmt.Errorf("closing the command logs: %w", err)
		}
	}
	if e.Cluster == nil {
		return "no cluster to tear down", nil
	}
	return e.Cluster.Teardown(keep)
}

// ChartAppVersion reads appVersion from a chart's Chart.yaml.
func ChartAppVersion(chart string) (string, error) { return chartField(chart, "appVersion") }

// ChartVersion reads version from a chart's Chart.yaml.
func ChartVersion(chart string) (string, error) { return chartField(chart, "version") }

// chartField reads a top-level string field of a chart's Chart.yaml; it is an error when it is empty.
func chartField(chart, field string) (string, error) {
	b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		return "", fmt.Errorf("reading the chart's Chart.yaml: %w", err)
	}
	var c map[string]any
	if err := yaml.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("decoding %s/Chart.yaml: %w", chart, err)
	}
	v, _ := c[field].(string)
	if v == "" {
		return "", fmt.Errorf("no %s in %s/Chart.yaml", field, chart)
	}
	return v, nil
}
