package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/premigrate/premigrate/internal/demo/server"
)

const serveHelp = `Usage: demo serve

Serves the records API:
  POST /records        JSON {"body":"..."} -> 201 {"id":N}
  GET  /records/{id}   -> 200 {"id":N,"body":"...","createdAt":"..."}, 404 if absent
  GET  /healthz        200 while the process runs
  GET  /readyz         200 iff the schema version S satisfies DEMO_VERSION <= S <= DEMO_VERSION+1
                       (read at most once a second), 503 otherwise and from the moment of SIGTERM

On SIGTERM (or SIGINT) /readyz fails at once, requests are still served for SHUTDOWN_DELAY, then
the listener closes and in-flight requests are drained (at most 30s) before the process exits 0.

Environment:
  DATABASE_URL     PostgreSQL connection URL (required)
  DEMO_VERSION     the schema version this binary is built for (default 1)
  LISTEN_ADDR      address to listen on (default :8080)
  SHUTDOWN_DELAY   how long to keep serving after SIGTERM, not ready (default 5s)

Exit codes:
  0  shut down cleanly
  1  failure (cannot listen, drain failed, ...)
  2  usage or configuration error
`

func serveCmd(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo serve", flag.ContinueOnError)
	if code := parseFlags(fs, args, serveHelp, stdout, stderr); code >= 0 {
		return code
	}
	logger := newLogger(stderr)
	var errs []error
	databaseURL, err := requiredString(getenv, "DATABASE_URL")
	errs = append(errs, err)
	appVersion, err := intSetting(getenv, "DEMO_VERSION", 1, 1)
	errs = append(errs, err)
	delay, err := durationSetting(getenv, "SHUTDOWN_DELAY", 5*time.Second)
	errs = append(errs, err)
	addr := getenv("LISTEN_ADDR")
	if addr == "" {
		addr = ":8080"
	}
	if err := errors.Join(errs...); err != nil {
		logger.Printf("serve: configuration error: %v", err)
		return exitUsage
	}
	poolCfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		logger.Printf("serve: configuration error: parse DATABASE_URL: %v", err)
		return exitUsage
	}
	// The pool connects lazily: the server starts (and answers /healthz) while the database is
	// still unreachable; /readyz tells the difference.
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		logger.Printf("serve: create connection pool: %v", err)
		return exitFailure
	}
	defer pool.Close()

	l, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Printf("serve: listen on %s: %v", addr, err)
		return exitFailure
	}
	srv := server.New(server.Config{
		Pool:          pool,
		AppVersion:    appVersion,
		ShutdownDelay: delay,
		Logger:        logger,
	})
	if err := srv.Serve(ctx, l); err != nil {
		logger.Printf("serve: %v", err)
		return exitFailure
	}
	return exitOK
}
