// Command gate is premigrate's wait-for init container and migration helper:
// `gate wait` holds app pods until the migration of their identity succeeded,
// `gate record` records a successful migration, `gate probe` polls a URL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/premigrate/premigrate/internal/gate"
	"github.com/premigrate/premigrate/internal/kubeclient"
	"github.com/premigrate/premigrate/internal/record"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes (docs/design.md, "The gate").
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitTimeout     = 3
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], &env{
		stdout:        os.Stdout,
		stderr:        os.Stderr,
		getenv:        os.Getenv,
		namespaceFile: kubeclient.ServiceAccountNamespaceFile,
		newClients:    newAPIClients,
		now:           time.Now,
	})
	stop()
	os.Exit(code)
}

// env is what the commands take from the process, replaceable in tests.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	namespaceFile  string
	newClients     func(kubeconfig string, getenv func(string) string) (*apiClients, error)
	now            func() time.Time
}

// configMapClient is what wait and record need of a ConfigMap client.
type configMapClient interface {
	gate.ConfigMapClient
	record.ConfigMapClient
}

// jobClient is what wait and run need of a Job client.
type jobClient interface {
	gate.JobClient
	record.JobPatcher
}

// apiClients hands out namespaced typed clients.
type apiClients struct {
	jobs       func(namespace string) jobClient
	configMaps func(namespace string) configMapClient
}

func newAPIClients(kubeconfig string, getenv func(string) string) (*apiClients, error) {
	cfg, err := kubeclient.Config(kubeconfig, getenv)
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
	}, nil
}

// logger writes one timestamped line per call (RFC 3339, milliseconds, UTC).
func (e *env) logger() func(format string, args ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintf(e.stderr, "%s %s\n", e.now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), msg)
	}
}

type command struct {
	name    string
	summary string
	// flags registers the command's flags on fs and returns the action to
	// run once they are parsed.
	flags func(fs *flag.FlagSet, e *env) func(ctx context.Context) int
	// args is true for commands that take positional arguments (after --).
	args bool
}

func commands() []command {
	return []command{
		{name: "wait", summary: "wait until the migration of an identity succeeded (init container)", flags: waitFlags},
		{name: "record", summary: "record that the migration of an identity succeeded (migration Job)", flags: recordFlags},
		{name: "run", summary: "run the migration command (after --) and record its success (migration Job)", flags: runFlags, args: true},
		{name: "copy", summary: "copy this executable to --to (hands the gate to the migration container)", flags: copyFlags},
		{name: "probe", summary: "GET a URL until it answers 2xx (helm test)", flags: probeFlags},
	}
}

func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "version", "--version", "-version":
		_, _ = fmt.Fprintf(e.stdout, "gate %s\n", version)
		return exitOK
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			usage(e.stdout)
			return exitOK
		}
		name, rest = rest[0], []string{"--help"}
	}
	for _, c := range commands() {
		if c.name == name {
			return runCommand(ctx, c, rest, e)
		}
	}
	_, _ = fmt.Fprintf(e.stderr, "gate: unknown command %q\n\n", name)
	usage(e.stderr)
	return exitUsage
}

func newFlagSet(c command, e *env) (*flag.FlagSet, func(ctx context.Context) int) {
	fs := flag.NewFlagSet("gate "+c.name, flag.ContinueOnError)
	action := c.flags(fs, e)
	fs.Usage = func() {
		extra := ""
		if c.args {
			extra = " -- COMMAND [ARGS...]"
		}
		_, _ = fmt.Fprintf(fs.Output(), "Usage: gate %s [flags]%s\n\n%s.\n\nFlags:\n", c.name, extra, upperFirst(c.summary))
		fs.PrintDefaults()
	}
	return fs, action
}

func runCommand(ctx context.Context, c command, args []string, e *env) int {
	fs, action := newFlagSet(c, e)
	fs.SetOutput(e.stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return exitOK
		}
		return exitUsage // the flag package printed the error and usage
	}
	if fs.NArg() > 0 && !c.args {
		return usageError(e, fs, "unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return action(ctx)
}

func usageError(e *env, fs *flag.FlagSet, format string, args ...any) int {
	_, _ = fmt.Fprintf(e.stderr, "%s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.SetOutput(e.stderr)
	fs.Usage()
	return exitUsage
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
2 usage; 3 timeout; 130 interrupted.
Logs go to stderr, one line each, prefixed with an RFC 3339 timestamp.
`)
	for _, c := range commands() {
		fs, _ := newFlagSet(c, &env{getenv: func(string) string { return "" }})
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
}

func (k *k8sFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.namespace, "namespace", "",
		"namespace of the Jobs and the records ConfigMap (default $POD_NAMESPACE, then the service account's namespace file "+kubeclient.ServiceAccountNamespaceFile+")")
	fs.StringVar(&k.kubeconfig, "kubeconfig", "",
		"kubeconfig file for runs outside a cluster (default $KUBECONFIG; without either the in-cluster service account is used)")
}

// setup resolves the namespace and builds the clients.
func (k *k8sFlags) setup(e *env, fs *flag.FlagSet) (string, *apiClients, int) {
	ns, err := kubeclient.Namespace(k.namespace, e.getenv, e.namespaceFile)
	if err != nil {
		return "", nil, usageError(e, fs, "%v", err)
	}
	clients, err := e.newClients(k.kubeconfig, e.getenv)
	if err != nil {
		_, _ = fmt.Fprintf(e.stderr, "%s: Kubernetes client: %v\n", fs.Name(), err)
		return "", nil, exitUsage
	}
	return ns, clients, exitOK
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
