package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/demo/migrate"
	"github.com/premigrate/premigrate/internal/demo/server"
	"github.com/premigrate/premigrate/internal/demo/witness"
)

const serveHelp = `Usage: demo serve

Serves the records API:
  POST /records        JSON {"body":"...","author":"..."} -> 201 {"id":N}
  GET  /records/{id}   -> 200 {"id":N,"body":"...","createdAt":"...",...}, 404 if absent
  GET  /healthz        200 while the process runs
  GET  /readyz         200 iff the schema version S satisfies DEMO_VERSION <= S <= DEMO_VERSION+1
                       (read at most once a second), 503 otherwise and from the moment of SIGTERM
Every response, errors included, carries the header X-Demo-Version: DEMO_VERSION.

The records API uses what each migration up to DEMO_VERSION added, so on an older schema it fails
(500) as a real app would:
  from version 2   POST stores "author" (default "demo-v<DEMO_VERSION>"), GET returns "author"
  from version 4   POST adds a row to tags (named "v<DEMO_VERSION>"), GET returns "tags"
  version 5 only   POST stores source "demo", GET returns "source" (on schema 6, which dropped
                   the column, neither does)
  from version 7   POST adds a row to notes, GET returns "noteCount"
Versions 3 (an index) and 6 (a dropped column) add nothing a request could miss.

On SIGTERM (or SIGINT) /readyz fails at once, requests are still served for SHUTDOWN_DELAY, then
the listener closes and in-flight requests are drained (at most 30s) before the process exits 0.

At its first successful database connection the process records its start, once, in the table
demo_pod_starts (created by the app if missing, migrated or not): pod, identity, app_version,
schema_seen (the schema version it saw, 0 on an unmigrated database), process_started_at (by the
app's clock, to the millisecond) and connected_at (by the database's clock). This happens in the
background, retried with a backoff until it works or SIGTERM: it never delays or fails serving.

Environment:
  DATABASE_URL          PostgreSQL connection URL (required)
  DEMO_VERSION          the schema version this binary is built for (default 1)
  LISTEN_ADDR           address to listen on (default :8080)
  SHUTDOWN_DELAY        how long to keep serving after SIGTERM, not ready (default 15s: longer than
                        a busy node takes to drop the pod from its Service's endpoints)
  POD_NAME              pod name recorded in demo_pod_starts (default: HOSTNAME, else the host
                        name of the system)
  PREMIGRATE_IDENTITY   migration identity recorded in demo_pod_starts (default: NULL)

Exit codes:
  0  shut down cleanly
  1  failure (cannot listen, drain failed, ...)
  2  usage or configuration error
`

// serveSettings are the options of `demo serve`, from the environment.
type serveSettings struct {
	databaseURL string
	appVersion  int
	delay       time.Duration
	addr        string
	pod         string
	identity    string
}

// defaultShutdownDelay is how long serve keeps answering after SIGTERM. 5 s was too short once: in a
// fresh-clone run on two saturated cores (2026-12-02) a request of the upgrades under load was refused 5 s after
// SIGTERM, the Service's endpoint still pointing at the closed listener. 10 s was the edge on the same machine
// a day later: kube-proxy's own histogram (kubeproxy_network_programming_duration_seconds) had endpoint
// changes that took 9 to 10 s to reach the node's rules. 15 s is the margin, inside the chart's 30 s grace.
const defaultShutdownDelay = 15 * time.Second

func readServeSettings(getenv func(string) string) (serveSettings, error) {
	s := serveSettings{addr: getenv("LISTEN_ADDR"), pod: podName(getenv), identity: getenv("PREMIGRATE_IDENTITY")}
	var errs []error
	var err error
	s.databaseURL, err = requiredString(getenv, "DATABASE_URL")
	errs = append(errs, err)
	s.appVersion, err = intSetting(getenv, "DEMO_VERSION", 1, 1)
	errs = append(errs, err)
	s.delay, err = durationSetting(getenv, "SHUTDOWN_DELAY", defaultShutdownDelay)
	errs = append(errs, err)
	if s.addr == "" {
		s.addr = ":8080"
	}
	return s, errors.Join(errs...)
}

func serveCmd(ctx context.Context, args []string, e *env) error {
	fs := flag.NewFlagSet("demo serve", flag.ContinueOnError)
	if done, err := parseFlags(fs, args, serveHelp, e); done {
		return err
	}
	s, err := readServeSettings(e.getenv)
	if err != nil {
		return fail(e.logger(), exitUsage, err, fmt.Sprintf("serve: configuration error: %v", err))
	}
	return runServe(ctx, s, e)
}

// runServe is `demo serve`: it serves the records API until ctx ends, then shuts down cleanly.
func runServe(ctx context.Context, s serveSettings, e *env) error {
	log := e.logger()
	stdLog := cli.StdLogger(log)
	poolCfg, err := pgxpool.ParseConfig(s.databaseURL)
	if err != nil {
		return fail(log, exitUsage, err, fmt.Sprintf("serve: configuration error: parse DATABASE_URL: %v", err))
	}
	// Its sessions name the app version and the pod: the database's own list of sessions says which
	// versions are connected (demo contract records it).
	poolCfg.ConnConfig.RuntimeParams["application_name"] = witness.ServeApplicationName(s.appVersion, s.pod)
	// The pool connects lazily: the server starts (and answers /healthz) while the database is
	// still unreachable; /readyz tells the difference.
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fail(log, exitFailure, err, fmt.Sprintf("serve: create connection pool: %v", err))
	}
	defer pool.Close()

	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fail(log, exitFailure, err, fmt.Sprintf("serve: listen on %s: %v", s.addr, err))
	}

	// Records the start in the background, once the listener is up. Deferred after pool.Close, so
	// it runs first: the witness ends before the pool closes.
	witnessCtx, stopWitness := context.WithCancel(ctx)
	witnessDone := make(chan struct{})
	go func() {
		defer close(witnessDone)
		start := witness.Start{
			Pod:              s.pod,
			Identity:         s.identity,
			AppVersion:       s.appVersion,
			ProcessStartedAt: e.started,
		}
		if _, err := witness.Run(witnessCtx, pool, start, stdLog); err != nil {
			log.Warn(fmt.Sprintf("witness: not recorded: %s", migrate.OneLine(err)))
		}
	}()
	defer func() {
		stopWitness()
		<-witnessDone
	}()

	srv := server.New(server.Config{
		Pool:          pool,
		AppVersion:    s.appVersion,
		ShutdownDelay: s.delay,
		Logger:        stdLog,
	})
	if err := srv.Serve(ctx, l); err != nil {
		return fail(log, exitFailure, err, fmt.Sprintf("serve: %v", err))
	}
	return nil
}

// podName is the name recorded in demo_pod_starts: POD_NAME, else HOSTNAME (which a container
// runtime sets to the pod name), else the system's host name.
func podName(getenv func(string) string) string {
	for _, name := range []string{"POD_NAME", "HOSTNAME"} {
		if v := getenv(name); v != "" {
			return v
		}
	}
	host, _ := os.Hostname()
	return host
}
