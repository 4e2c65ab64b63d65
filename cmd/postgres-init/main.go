// Command postgres-init is the entrypoint of the premigrate/postgres image: it initialises a
// PostgreSQL data directory on first start, following the official postgres image's environment
// interface, then replaces itself with the postgres server so signals reach the server directly.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/premigrate/premigrate/internal/cli"
)

// Defaults of the settings.
const (
	defaultBinDir    = "/usr/lib/postgresql/15/bin"
	defaultPGData    = "/var/lib/postgresql/data"
	defaultSocketDir = "/var/run/postgresql"
	defaultUser      = "postgres"
	defaultHostAuth  = "scram-sha-256"
)

const (
	exitFailure = 1
	exitUsage   = 2
)

const help = `Usage: postgres-init [--bindir DIR] [--pgdata DIR] [--socket-dir DIR] [postgres] [SERVER ARGS...]

Initialises a PostgreSQL data directory on first start (when PGDATA/PG_VERSION does not exist),
then replaces itself with "postgres -D PGDATA -c listen_addresses=* -c unix_socket_directories=DIR
SERVER ARGS...". A data directory that is already initialised is never touched again, whatever
the environment says now. When started as root it hands PGDATA and the socket directory to the
"postgres" user and drops to it, because PostgreSQL refuses to run as root.

First start: initdb (superuser POSTGRES_USER with POSTGRES_PASSWORD, UTF8, locale C, trust on the
local socket, POSTGRES_HOST_AUTH_METHOD over TCP), a pg_hba.conf line
"host all all all POSTGRES_HOST_AUTH_METHOD", and the database POSTGRES_DB unless it is "postgres".

Environment:
  POSTGRES_USER               superuser name (default postgres)
  POSTGRES_PASSWORD           superuser password; required on first start unless
                              POSTGRES_HOST_AUTH_METHOD=trust (never passed on to the server)
  POSTGRES_DB                 database created on first start (default: POSTGRES_USER)
  POSTGRES_HOST_AUTH_METHOD   authentication of TCP connections (default scram-sha-256)
  PGDATA                      data directory (default /var/lib/postgresql/data)
  PG_BINDIR                   directory of initdb and postgres (default /usr/lib/postgresql/15/bin)
  PG_SOCKET_DIR               directory of the Unix socket (default /var/run/postgresql)
  POSTGRES_START_DELAY        hold the server back this long first (a Go duration; fault injection:
                              a database that takes long to come up)

Flags (override the environment):
  --bindir DIR       like PG_BINDIR
  --pgdata DIR       like PGDATA
  --socket-dir DIR   like PG_SOCKET_DIR
  -h, --help         this help

Exit codes (only when postgres could not be started; afterwards the exit code is the server's):
  1  initialisation or start failed
  2  usage error
`

// config is everything postgres-init needs to know.
type config struct {
	user, password, db, hostAuth string
	pgdata, binDir, socketDir    string
	// startDelay holds the server back before anything starts (fault injection: a database that takes
	// long to come up).
	startDelay time.Duration
	// serverArgs are passed to postgres after the built-in options.
	serverArgs []string
}

var errHelp = errors.New("help requested")

// parseConfig reads the environment and the command line.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	cfg := config{
		user:      orDefault(getenv("POSTGRES_USER"), defaultUser),
		password:  getenv("POSTGRES_PASSWORD"),
		hostAuth:  orDefault(getenv("POSTGRES_HOST_AUTH_METHOD"), defaultHostAuth),
		pgdata:    orDefault(getenv("PGDATA"), defaultPGData),
		binDir:    orDefault(getenv("PG_BINDIR"), defaultBinDir),
		socketDir: orDefault(getenv("PG_SOCKET_DIR"), defaultSocketDir),
	}
	cfg.db = orDefault(getenv("POSTGRES_DB"), cfg.user)
	if v := getenv("POSTGRES_START_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return cfg, fmt.Errorf("POSTGRES_START_DELAY=%q: want a non-negative Go duration such as 60s", v)
		}
		cfg.startDelay = d
	}

	flags := map[string]*string{"--bindir": &cfg.binDir, "--pgdata": &cfg.pgdata, "--socket-dir": &cfg.socketDir}
	for len(args) > 0 {
		arg := args[0]
		if arg == "-h" || arg == "--help" || arg == "-help" {
			return cfg, errHelp
		}
		name, value, hasValue := strings.Cut(arg, "=")
		target, ok := flags[name]
		if !ok {
			break
		}
		if !hasValue {
			if len(args) < 2 {
				return cfg, fmt.Errorf("flag %s needs a value", name)
			}
			value, args = args[1], args[1:]
		}
		if value == "" {
			return cfg, fmt.Errorf("flag %s needs a non-empty value", name)
		}
		*target = value
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "postgres" {
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return cfg, fmt.Errorf("unexpected argument %q: only postgres server options may follow", args[0])
	}
	cfg.serverArgs = args
	return cfg, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func main() {
	// No signal handling: until postgres replaces this process, SIGTERM and SIGINT keep their default
	// action (end it), as the official image's entrypoint script does.
	err := run(context.Background(), os.Args[1:], &env{
		Streams: cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr},
		getenv:  os.Getenv,
	})
	os.Exit(cli.ExitCode(err)) // the one place an error becomes the exit code
}

// env is what postgres-init takes from the process, replaceable in tests.
type env struct {
	cli.Streams
	getenv func(string) string
}

// run parses the command line and the environment into a config and runs runInit with it.
func run(ctx context.Context, args []string, e *env) error {
	cfg, err := parseConfig(args, e.getenv)
	switch {
	case errors.Is(err, errHelp):
		_, _ = fmt.Fprint(e.Out, help)
		return nil
	case err != nil:
		cli.NewLogger(e.Err).Error("error: " + err.Error())
		return cli.Exit(exitUsage, err)
	}
	return runInit(ctx, cfg, e)
}

// runInit prepares the data directory and execs postgres; it returns only on failure.
func runInit(ctx context.Context, cfg config, e *env) error {
	log := cli.NewLogger(e.Err)
	fail := func(err error) error {
		log.Error("error: " + err.Error())
		return cli.Exit(exitFailure, err)
	}
	if cfg.startDelay > 0 {
		log.Info(fmt.Sprintf("POSTGRES_START_DELAY: holding the server back for %s", cfg.startDelay))
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(cfg.startDelay):
		}
	}
	if err := dropRoot(cfg, log); err != nil {
		return fail(err)
	}
	if err := initialise(cfg, log, e.Err); err != nil {
		return fail(err)
	}
	return fail(execPostgres(cfg, log))
}
