// Command gate is premigrate's wait-for init container and migration helper:
// `gate wait` holds app pods until the migration of their identity succeeded,
// `gate run` runs a migration once and records it, `gate contract` its contract step, `gate probe` polls a URL.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/child"
	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/dbsecret"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/gate"
	"github.com/premigrate/premigrate/internal/kubeclient"
	"github.com/premigrate/premigrate/internal/migration"
	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/internal/rollout"
	"github.com/premigrate/premigrate/internal/ungate"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	ctx, cancel := context.WithCancelCause(context.Background())
	kill := make(chan struct{})
	child.StopHardOn(kill)
	go cli.OnSignals(sigs, cancel, kill, hardStopGrace, cli.NewLogger(os.Stderr), func() { os.Exit(exitcode.Interrupted) })
	err := run(ctx, os.Args[1:], &env{
		Streams:       cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr},
		getenv:        os.Getenv,
		namespaceFile: kubeclient.ServiceAccountNamespaceFile,
		newClients:    newAPIClients,
		now:           time.Now,
		exec:          child.Exec,
	})
	signal.Stop(sigs)
	os.Exit(cli.ExitCode(err)) // the one place an error becomes the exit code
}

// hardStopGrace is how long the gate may still take after a second signal before it exits regardless.
var hardStopGrace = 5 * time.Second

// env is what the commands take from the process, replaceable in tests.
type env struct {
	cli.Streams
	getenv        func(string) string
	namespaceFile string
	newClients    func(k8s k8sFlags, getenv func(string) string) (*apiClients, error)
	now           func() time.Time
	// exec replaces the process with argv (gate wait -- COMMAND); it returns only on failure.
	exec func(argv []string) error
}

// logger is the commands' logger: one line per call on stderr (cli.NewLogger).
func (e *env) logger() *slog.Logger { return cli.NewLogger(e.Err) }

// configMapClient is what wait and record need of a ConfigMap client.
type configMapClient interface {
	gate.ConfigMapClient
	record.ConfigMapClient
}

// jobClient is what wait and run need of a Job client.
type jobClient interface {
	gate.JobClient
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*batchv1.Job, error)
}

// apiClients hands out namespaced typed clients.
type apiClients struct {
	jobs       func(namespace string) jobClient
	configMaps func(namespace string) configMapClient
	pods       func(namespace string) dbid.PodGetter
	claims     func(namespace string) dbid.ClaimGetter
	workloads  func(namespace string) migration.WorkloadAnnotator
	heldPods   func(namespace string) ungate.Pods
	events     func(namespace string) ungate.Events
	secrets    func(namespace string) dbsecret.Client
	// rollout observes the rollout of the Deployment called name
	rollout func(namespace, name string) rollout.Source
}

// migration are the clients of namespace ns that package migration uses.
func (c *apiClients) migration(ns string) migration.Clients {
	m := migration.Clients{Jobs: c.jobs(ns), ConfigMaps: c.configMaps(ns), Pods: c.pods(ns), Claims: c.claims(ns), Workloads: c.workloads(ns),
		Rollout: func(name string) rollout.Source { return c.rollout(ns, name) }}
	if c.events != nil {
		m.Events = c.events(ns)
	}
	return m
}

// objects reads the database's pod or claim in namespace ns.
func (c *apiClients) objects(ns string) dbid.Getter { return dbid.FromAPI(c.pods(ns), c.claims(ns)) }

func newAPIClients(k8s k8sFlags, getenv func(string) string) (*apiClients, error) {
	cfg, err := kubeclient.Config(k8s.kubeconfig, k8s.tokenDir, getenv)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "premigrate-gate/" + version
	c, err := kubeclient.New(cfg)
	if err != nil {
		return nil, err
	}
	return &apiClients{
		jobs:       func(ns string) jobClient { return c.Jobs(ns) },
		configMaps: func(ns string) configMapClient { return c.ConfigMaps(ns) },
		pods:       func(ns string) dbid.PodGetter { return c.Pods(ns) },
		claims:     func(ns string) dbid.ClaimGetter { return c.PersistentVolumeClaims(ns) },
		workloads:  func(ns string) migration.WorkloadAnnotator { return c.Workloads(ns) },
		heldPods:   func(ns string) ungate.Pods { return c.Pods(ns) },
		events:     func(ns string) ungate.Events { return c.Events(ns) },
		secrets:    func(ns string) dbsecret.Client { return c.Secrets(ns) },
		rollout: func(ns, name string) rollout.Source {
			return rollout.Deployment{Name: name, Deployments: c.Deployments(ns), ReplicaSets: c.ReplicaSets(ns), Pods: c.Pods(ns)}
		},
	}, nil
}

func commands() []cli.Command[*env] {
	return []cli.Command[*env]{
		{Name: "wait", Summary: "wait until the migration of an identity succeeded (init container), then run the command after -- if any (app container)", Args: true, Bind: func(fs *flag.FlagSet) cli.Action[*env] {
			o := &waitOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, args []string) error {
				o.then = args
				return runWait(ctx, o, e)
			}
		}},
		{Name: "run", Summary: "run the migration command (after --) and record its success (migration Job)", Args: true, Bind: func(fs *flag.FlagSet) cli.Action[*env] {
			o := &runOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, args []string) error {
				o.run.Argv = args
				return runRun(ctx, o, e)
			}
		}},
		{Name: "contract", Summary: "run the contract step (after --) of an identity once the rollout to it ended with nothing older left, and record it (contract Job)", Args: true, Bind: func(fs *flag.FlagSet) cli.Action[*env] {
			o := &contractOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, args []string) error {
				o.contract.Argv = args
				return runContract(ctx, o, e)
			}
		}},
		{Name: "require-contract", Summary: "refuse the migration of an identity while the identity deployed before it has not run its contract step (the expand-check Job of migration.requirePreviousContract)", Bind: func(fs *flag.FlagSet) cli.Action[*env] {
			o := &requireOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, _ []string) error { return runRequireContract(ctx, o, e) }
		}},
		{Name: "ungate", Summary: "release the app pods held by premigrate's scheduling gate once their migration succeeded (gate.waitIn schedulingGate)", Bind: func(fs *flag.FlagSet) cli.Action[*env] {
			o := &ungateOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, _ []string) error { return runUngate(ctx, o, e) }
		}},
		{Name: "status", Summary: "say, for a release, what is recorded on which database, what ran, and what each waiting pod waits for and what to do (exit 0 nothing waits, 2 pods wait for a running migration, 3 pods are held until you act)", Bind: func(fs *flag.FlagSet) cli.Action[*env] {
			o := &statusOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, _ []string) error { return runStatus(ctx, o, e) }
		}},
		{Name: "secret", Summary: "give the embedded database's Secret a password and the URL made from it, unless it has one (a chart rendered without a cluster)", Bind: func(fs *flag.FlagSet) cli.Action[*env] {
			o := &secretOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, _ []string) error { return runSecret(ctx, o, e) }
		}},
		{Name: "copy", Summary: "copy this executable to --to (hands the gate to the migration container)", Bind: func(fs *flag.FlagSet) cli.Action[*env] {
			o := &copyOptions{}
			o.register(fs)
			return func(_ context.Context, e *env, _ []string) error { return runCopy(o, e) }
		}},
		{Name: "probe", Summary: "GET a URL until it answers 2xx (helm test)", Bind: func(fs *flag.FlagSet) cli.Action[*env] {
			o := &probeOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, _ []string) error { return runProbe(ctx, o, e) }
		}},
	}
}

// run dispatches the command line args to a command.
func run(ctx context.Context, args []string, e *env) error {
	return cli.Program[*env]{Name: "gate", Version: version, About: "premigrate's migration gate", Commands: commands(), Epilogue: `Exit codes: 0 success; 1 the migration failed (wait) or the command failed;
2 usage; 3 refused (the Job fails at once: no retry changes the answer);
4 timeout; 130 interrupted. gate run and gate contract exit with their command's
own code when it fails, except 3 unless --fail-fast-exit-codes lists it (1).
Logs go to stderr, one line each of key=value pairs: time (RFC 3339, UTC), level, msg.
`}.Run(ctx, args, e, e.Streams, e.logger())
}

// k8sFlags are the flags of the commands that talk to the API server.
type k8sFlags struct {
	namespace  string
	kubeconfig string
	tokenDir   string
}

func (k *k8sFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.namespace, "namespace", "",
		"namespace of the Jobs and the records ConfigMap (default $POD_NAMESPACE, then the service account's namespace file "+kubeclient.ServiceAccountNamespaceFile+")")
	fs.StringVar(&k.kubeconfig, "kubeconfig", "",
		"kubeconfig file for runs outside a cluster (default $KUBECONFIG; without either the in-cluster service account is used)")
	fs.StringVar(&k.tokenDir, "token-dir", "",
		"directory holding the API token, ca.crt and namespace files in a pod, in place of "+kubeclient.ServiceAccountDir+" (e.g. a projected volume mounted into an app container)")
}

// setup resolves the namespace and builds the clients.
func (k *k8sFlags) setup(e *env) (string, *apiClients, error) {
	nsFile := e.namespaceFile
	if k.tokenDir != "" {
		nsFile = filepath.Join(k.tokenDir, "namespace")
	}
	ns, err := kubeclient.Namespace(k.namespace, e.getenv, nsFile)
	if err != nil {
		return "", nil, &cli.UsageError{Err: err}
	}
	clients, err := e.newClients(*k, e.getenv)
	if err != nil {
		e.logger().Error(fmt.Sprintf("Kubernetes client: %v", err))
		return "", nil, cli.Exit(exitcode.Usage, err)
	}
	return ns, clients, nil
}
