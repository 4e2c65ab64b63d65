// Command demo is the premigrate demo app: it migrates its PostgreSQL schema (demo migrate), checks
// it (demo migrate status), serves a small records API (demo serve) and generates load against
// that API to measure downtime during upgrades (demo load).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	defer stop()
	os.Exit(run(ctx, started, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

const usage = `demo: the premigrate demo app

Usage:
  demo migrate          apply pending schema migrations up to DEMO_VERSION
  demo migrate status   exit 0 iff the schema version equals DEMO_VERSION
  demo serve            serve the records API with health and readiness endpoints
  demo load             send steady traffic to the API and report failures and gaps

Run "demo <command> --help" for the flags and environment variables of a command.
`

// env reads configuration from the environment.
type env func(string) string

// run executes the command line args and returns the process exit code. It takes the time the
// process started, its environment and output streams as parameters so it can be run in-process
// by tests.
func run(ctx context.Context, started time.Time, args []string, getenv env, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "migrate":
		if len(args) > 1 && args[1] == "status" {
			return migrateStatusCmd(ctx, args[2:], getenv, stdout, stderr)
		}
		return migrateCmd(ctx, args[1:], getenv, stdout, stderr)
	case "serve":
		return serveCmd(ctx, started, args[1:], getenv, stdout, stderr)
	case "load":
		return loadCmd(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "-help", "--help":
		_, _ = fmt.Fprint(stdout, usage)
		return exitOK
	default:
		_, _ = fmt.Fprintf(stderr, "demo: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// newLogger returns the human-readable, timestamped logger of every subcommand.
func newLogger(w io.Writer) *log.Logger {
	return log.New(w, "", log.Ldate|log.Ltime|log.Lmicroseconds|log.LUTC)
}

// parseFlags parses a subcommand's flags; help text goes to stdout (exit 0), mistakes to stderr
// (exit 2). It returns -1 when the command should go on.
func parseFlags(fs *flag.FlagSet, args []string, help string, stdout, stderr io.Writer) int {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = fmt.Fprint(stdout, help)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			_, _ = fmt.Fprintln(stdout, "\nFlags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return exitOK
	case err != nil:
		_, _ = fmt.Fprintf(stderr, "%s: %v\nRun \"demo %s --help\" for usage.\n", fs.Name(), err, strings.TrimPrefix(fs.Name(), "demo "))
		return exitUsage
	case fs.NArg() > 0:
		_, _ = fmt.Fprintf(stderr, "%s: unexpected arguments %q\nRun \"demo %s --help\" for usage.\n", fs.Name(), fs.Args(), strings.TrimPrefix(fs.Name(), "demo "))
		return exitUsage
	}
	return -1
}

// configError is a bad setting: exit code 2, never worth a retry.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func badSetting(name, value, want string) error {
	return &configError{msg: fmt.Sprintf("%s=%q: %s", name, value, want)}
}

func requiredString(getenv env, name string) (string, error) {
	v := getenv(name)
	if v == "" {
		return "", &configError{msg: name + " is required"}
	}
	return v, nil
}

func intSetting(getenv env, name string, def, min int) (int, error) {
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

func boolSetting(getenv env, name string) (bool, error) {
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

func durationSetting(getenv env, name string, def time.Duration) (time.Duration, error) {
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
