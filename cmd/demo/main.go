// Command demo is the premigrate demo app: it migrates its PostgreSQL schema (demo migrate), checks
// it (demo migrate status), serves a small records API (demo serve), runs a batch task on it (demo
// report) and generates load against that API to measure downtime during upgrades (demo load).
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/premigrate/premigrate/internal/cli"
)

// Exit codes shared by the subcommands.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitRefused = 3
)

func main() {
	// First thing: demo serve records when its process started (the demo_pod_starts witness).
	started := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], &env{
		Streams: cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr},
		getenv:  os.Getenv,
		started: started,
	})
	stop()
	os.Exit(cli.ExitCode(err)) // the one place an error becomes the exit code
}

const usage = `demo: the premigrate demo app

Usage:
  demo migrate          apply pending schema migrations up to DEMO_VERSION
  demo migrate status   exit 0 iff the schema version equals DEMO_VERSION
  demo migrate check    exit 0 iff the schema has DEMO_VERSION's migrations (version >= DEMO_VERSION)
  demo serve            serve the records API with health and readiness endpoints
  demo report           a batch task: record this start, count the records, exit
  demo contract         the contract step: record when it started and which other versions were connected
  demo load             send steady traffic to the API and report failures and gaps

Run "demo <command> --help" for the flags and environment variables of a command.
`

// env is what the commands take from the process, replaceable in tests: the streams, the environment
// variables and the time the process started.
type env struct {
	cli.Streams
	getenv  func(string) string
	started time.Time
}

// logger is the commands' logger: one line per call on stderr (cli.NewLogger).
func (e *env) logger() *slog.Logger { return cli.NewLogger(e.Err) }

// run dispatches the command line args to a command. A command reports its own failures and returns
// nil or a *cli.ExitError with the exit code.
func run(ctx context.Context, args []string, e *env) error {
	if len(args) == 0 {
		_, _ = fmt.Fprint(e.Err, usage)
		return cli.Exit(exitUsage, errors.New("no command"))
	}
	switch args[0] {
	case "migrate":
		if len(args) > 1 && (args[1] == "status" || args[1] == "check") {
			return migrateStatusCmd(ctx, args[1], args[2:], e)
		}
		return migrateCmd(ctx, args[1:], e)
	case "serve":
		return serveCmd(ctx, args[1:], e)
	case "load":
		return loadCmd(ctx, args[1:], e)
	case "report":
		return reportCmd(ctx, args[1:], e)
	case "contract":
		return contractCmd(ctx, args[1:], e)
	case "help", "-h", "-help", "--help":
		_, _ = fmt.Fprint(e.Out, usage)
		return nil
	default:
		_, _ = fmt.Fprintf(e.Err, "demo: unknown command %q\n\n%s", args[0], usage)
		return cli.Exit(exitUsage, fmt.Errorf("unknown command %q", args[0]))
	}
}

// parseFlags parses a subcommand's flags; help text goes to stdout (done, nil error: exit 0), mistakes
// to stderr (exit 2).
func parseFlags(fs *flag.FlagSet, args []string, help string, e *env) (done bool, err error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err = fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = fmt.Fprint(e.Out, help)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			_, _ = fmt.Fprintln(e.Out, "\nFlags:")
			fs.SetOutput(e.Out)
			fs.PrintDefaults()
		}
		return true, nil
	case err != nil:
		_, _ = fmt.Fprintf(e.Err, "%s: %v\nRun \"demo %s --help\" for usage.\n", fs.Name(), err, strings.TrimPrefix(fs.Name(), "demo "))
		return true, cli.Exit(exitUsage, err)
	case fs.NArg() > 0:
		_, _ = fmt.Fprintf(e.Err, "%s: unexpected arguments %q\nRun \"demo %s --help\" for usage.\n", fs.Name(), fs.Args(), strings.TrimPrefix(fs.Name(), "demo "))
		return true, cli.Exit(exitUsage, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	return false, nil
}

// fail logs msg at level Error and returns the *cli.ExitError of code with the cause err.
func fail(log *slog.Logger, code int, err error, msg string) error {
	log.Error(msg)
	return cli.Exit(code, err)
}

// configError is a bad setting: exit code 2, never worth a retry.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func badSetting(name, value, want string) error {
	return &configError{msg: fmt.Sprintf("%s=%q: %s", name, value, want)}
}

func requiredString(getenv func(string) string, name string) (string, error) {
	v := getenv(name)
	if v == "" {
		return "", &configError{msg: name + " is required"}
	}
	return v, nil
}

func intSetting(getenv func(string) string, name string, def, min int) (int, error) {
	raw := getenv(name)
	if raw == "" {
		return def, nil
	}
	v, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil || v < min {
		return 0, badSetting(name, raw, fmt.Sprintf("want an integer >= %d", min))
	}
	return v, nil
}

func boolSetting(getenv func(string) string, name string) (bool, error) {
	raw := getenv(name)
	if raw == "" {
		return false, nil
	}
	v, err := strconv.ParseBool(strings.TrimSpace(raw))
	if err != nil {
		return false, badSetting(name, raw, "want true or false")
	}
	return v, nil
}

func durationSetting(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	raw := getenv(name)
	if raw == "" {
		return def, nil
	}
	v, err := time.ParseDuration(strings.TrimSpace(raw))
	if err != nil || v < 0 {
		return 0, badSetting(name, raw, "want a non-negative duration such as 30s or 2m")
	}
	return v, nil
}
