// Command gate is premigrate's wait-for init container and migration helper:
// `gate wait` holds app pods until the migration of their identity succeeded,
// `gate run` runs a migration once and records it, `gate contract` its contract step, `gate probe` polls a URL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/premigrate/premigrate/internal/child"
	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbsecret"
	"github.com/premigrate/premigrate/internal/gate"
	"github.com/premigrate/premigrate/internal/kubeclient"
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
	go onSignals(sigs, cancel, kill, cli.NewLogger(os.Stderr), func() { os.Exit(exitInterrupted) })
	err := run(ctx, os.Args[1:], &env{
		Streams:       cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr},
		getenv:        os.Getenv,
		namespaceFile: kubeclient.ServiceAccountNamespaceFile,
		newClients:    newAPIClients,
		now:           time.Now,
		exec:          execCommand,
	})
	signal.Stop(sigs)
	os.Exit(cli.ExitCode(err)) // the one place an error becomes the exit code
}

// hardStopGrace is how long the gate may still take after a second signal before it exits regardless.
var hardStopGrace = 5 * time.Second

// onSignals handles the gate's SIGTERM and SIGINT. The first cancels ctx (cancel): every command stops what it
// waits for, and gate run sends SIGTERM to the migration's process group and waits for it. The second closes
// kill: gate run sends SIGKILL to that group (a command that ignores SIGTERM, or Ctrl-C pressed twice outside a
// pod, where no kubelet follows up with SIGKILL); hardStopGrace later exit ends the gate, whatever it waits for.
func onSignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, kill chan<- struct{}, log *slog.Logger, exit func()) {
	first := <-sigs
	cancel(fmt.Errorf("received %s", first))
	second := <-sigs
	log.Warn(fmt.Sprintf("received %s again: stopping the migration's process group with SIGKILL, and the gate within %s", second, hardStopGrace))
	close(kill)
	time.Sleep(hardStopGrace)
	exit()
}

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
	pods       func(namespace string) podGetter
	claims     func(namespace string) claimGetter
	workloads  func(namespace string) workloadAnnotator
	heldPods   func(namespace string) ungate.Pods
	events     func(namespace string) ungate.Events
	secrets    func(namespace string) dbsecret.Client
	// rollout observes the rollout of the Deployment called name
	rollout func(namespace, name string) rollout.Source
}

// podGetter and claimGetter read the object that holds the database's data.
type podGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
}

type claimGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.PersistentVolumeClaim, error)
}

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
		pods:       func(ns string) podGetter { return c.Pods(ns) },
		claims:     func(ns string) claimGetter { return c.PersistentVolumeClaims(ns) },
		workloads:  func(ns string) workloadAnnotator { return c.Workloads(ns) },
		heldPods:   func(ns string) ungate.Pods { return c.Pods(ns) },
		events:     func(ns string) ungate.Events { return c.Events(ns) },
		secrets:    func(ns string) dbsecret.Client { return c.Secrets(ns) },
		rollout: func(ns, name string) rollout.Source {
			return rollout.Deployment{Name: name, Deployments: c.Deployments(ns), ReplicaSets: c.ReplicaSets(ns), Pods: c.Pods(ns)}
		},
	}, nil
}

// action runs a command once its flags are parsed; args are its positional arguments (after --).
// It reports its own failures and returns nil, a *usageError, or a *cli.ExitError with the exit code.
type action func(ctx context.Context, e *env, args []string) error

type command struct {
	name    string
	summary string
	// bind registers the command's options on fs and returns the action that runs the command with them.
	bind func(fs *flag.FlagSet) action
	// args is true for commands that take positional arguments (after --).
	args bool
}

func commands() []command {
	return []command{
		{name: "wait", summary: "wait until the migration of an identity succeeded (init container), then run the command after -- if any (app container)", args: true, bind: func(fs *flag.FlagSet) action {
			o := &waitOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, args []string) error {
				o.then = args
				return runWait(ctx, o, e)
			}
		}},
		{name: "run", summary: "run the migration command (after --) and record its success (migration Job)", args: true, bind: func(fs *flag.FlagSet) action {
			o, g := &runOptions{}, &guardOptions{}
			o.register(fs)
			g.register(fs)
			return func(ctx context.Context, e *env, args []string) error {
				o.argv = args
				if err := runRun(ctx, o, e); err != nil {
					return err
				}
				return runGuard(ctx, o, g, e)
			}
		}},
		{name: "contract", summary: "run the contract step (after --) of an identity once the rollout to it ended with nothing older left, and record it (contract Job)", args: true, bind: func(fs *flag.FlagSet) action {
			o := &contractOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, args []string) error {
				o.argv = args
				return runContract(ctx, o, e)
			}
		}},
		{name: "require-contract", summary: "refuse the migration of an identity while the identity deployed before it has not run its contract step (the expand-check Job of migration.requirePreviousContract)", bind: func(fs *flag.FlagSet) action {
			o := &requireOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, _ []string) error { return runRequireContract(ctx, o, e) }
		}},
		{name: "ungate", summary: "release the app pods held by premigrate's scheduling gate once their migration succeeded (gate.waitIn schedulingGate)", bind: func(fs *flag.FlagSet) action {
			o := &ungateOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, _ []string) error { return runUngate(ctx, o, e) }
		}},
		{name: "status", summary: "say, for a release, what is recorded on which database, what ran, and what each waiting pod waits for and what to do (exit 0 nothing waits, 2 pods wait for a running migration, 3 pods are held until you act)", bind: func(fs *flag.FlagSet) action {
			o := &statusOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, _ []string) error { return runStatus(ctx, o, e) }
		}},
		{name: "secret", summary: "give the embedded database's Secret a password and the URL made from it, unless it has one (a chart rendered without a cluster)", bind: func(fs *flag.FlagSet) action {
			o := &secretOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, _ []string) error { return runSecret(ctx, o, e) }
		}},
		{name: "copy", summary: "copy this executable to --to (hands the gate to the migration container)", bind: func(fs *flag.FlagSet) action {
			o := &copyOptions{}
			o.register(fs)
			return func(_ context.Context, e *env, _ []string) error { return runCopy(o, e) }
		}},
		{name: "probe", summary: "GET a URL until it answers 2xx (helm test)", bind: func(fs *flag.FlagSet) action {
			o := &probeOptions{}
			o.register(fs)
			return func(ctx context.Context, e *env, _ []string) error { return runProbe(ctx, o, e) }
		}},
	}
}

// run dispatches the command line args to a command.
func run(ctx context.Context, args []string, e *env) error {
	if len(args) == 0 {
		usage(e.Err)
		return cli.Exit(exitUsage, errors.New("no command"))
	}
	name, rest := args[0], args[1:]
	switch name {
	case "version", "--version", "-version":
		_, _ = fmt.Fprintf(e.Out, "gate %s\n", version)
		return nil
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			usage(e.Out)
			return nil
		}
		name, rest = rest[0], []string{"--help"}
	}
	for _, c := range commands() {
		if c.name == name {
			return runCommand(ctx, c, rest, e)
		}
	}
	_, _ = fmt.Fprintf(e.Err, "gate: unknown command %q\n\n", name)
	usage(e.Err)
	return cli.Exit(exitUsage, fmt.Errorf("unknown command %q", name))
}

func newFlagSet(c command) (*flag.FlagSet, action) {
	fs := flag.NewFlagSet("gate "+c.name, flag.ContinueOnError)
	act := c.bind(fs)
	fs.Usage = func() {
		extra := ""
		if c.args {
			extra = " -- COMMAND [ARGS...]"
		}
		_, _ = fmt.Fprintf(fs.Output(), "Usage: gate %s [flags]%s\n\n%s.\n\nFlags:\n", c.name, extra, upperFirst(c.summary))
		fs.PrintDefaults()
	}
	return fs, act
}

// runCommand parses the command's flags and runs it; it prints usage errors with the command's usage.
func runCommand(ctx context.Context, c command, args []string, e *env) error {
	fs, act := newFlagSet(c)
	fs.SetOutput(e.Err)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(e.Out)
			fs.Usage()
			return nil
		}
		return cli.Exit(exitUsage, err) // the flag package printed the error and usage
	}
	var err error
	if fs.NArg() > 0 && !c.args {
		err = usageErrorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	} else {
		err = act(ctx, e, fs.Args())
	}
	var usageErr *usageError
	var exitErr *cli.ExitError
	switch {
	case err == nil || errors.As(err, &exitErr):
		return err
	case errors.As(err, &usageErr):
		_, _ = fmt.Fprintf(e.Err, "%s: %v\n", fs.Name(), usageErr)
		fs.SetOutput(e.Err)
		fs.Usage()
		return cli.Exit(exitUsage, err)
	default: // not reported yet
		e.logger().Error(fmt.Sprintf("%s: %v", fs.Name(), err))
		return cli.Exit(exitFailed, err)
	}
}

// usageError is a mistake on the command line: runCommand prints it with the command's usage (exit 2).
type usageError struct{ err error }

func (u *usageError) Error() string { return u.err.Error() }
func (u *usageError) Unwrap() error { return u.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

func usage(w io.Writer) {
	_, _ = fmt.Fprintf(w, `gate %s: premigrate's migration gate.

Usage: gate <command> [flags]

Commands:
`, version)
	for _, c := range commands() {
		_, _ = fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	_, _ = fmt.Fprintf(w, "  %-8s %s\n", "version", "print the version")
	_, _ = fmt.Fprintf(w, "  %-8s %s\n", "help", "show this help, or a command's: gate help <command>")
	_, _ = fmt.Fprint(w, `
Exit codes: 0 success; 1 the migration failed (wait) or the command failed;
2 usage; 3 refused (the Job fails at once: no retry changes the answer);
4 timeout; 130 interrupted. gate run and gate contract exit with their command's
own code when it fails, except 3 unless --fail-fast-exit-codes lists it (1).
Logs go to stderr, one line each of key=value pairs: time (RFC 3339, UTC), level, msg.
`)
	for _, c := range commands() {
		fs, _ := newFlagSet(c)
		fs.SetOutput(w)
		_, _ = fmt.Fprintln(w)
		fs.Usage()
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
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
		return "", nil, &usageError{err: err}
	}
	clients, err := e.newClients(*k, e.getenv)
	if err != nil {
		e.logger().Error(fmt.Sprintf("Kubernetes client: %v", err))
		return "", nil, cli.Exit(exitUsage, err)
	}
	return ns, clients, nil
}

// checkIdentity rejects identities that cannot be ConfigMap keys.
func checkIdentity(identity string) error {
	if identity == "" {
		return errors.New("--identity is required")
	}
	if errs := validation.IsConfigMapKey(identity); len(errs) > 0 {
		return fmt.Errorf("--identity %q is not a valid ConfigMap key: %s", identity, strings.Join(errs, "; "))
	}
	return nil
}
