package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/demo/migrate"
	"github.com/premigrate/premigrate/internal/demo/witness"
)

const reportHelp = `Usage: demo report

A batch task (a CronJob's): records its start in demo_pod_starts as serve does, then counts the
records and prints one line, "report: N records on schema S", and exits. It needs the schema of
its version: on an older one (an unmigrated database) it records its start and fails, as a real
task that reads new columns would.

Environment:
  DATABASE_URL          PostgreSQL connection URL (required)
  DEMO_VERSION          the schema version this binary is built for (default 1)
  POD_NAME              pod name recorded in demo_pod_starts (default: HOSTNAME, else the host
                        name of the system)
  PREMIGRATE_IDENTITY   migration identity recorded in demo_pod_starts (default: NULL)
  REPORT_TIMEOUT        how long to try the database before giving up (default 1m)

Exit codes:
  0  reported
  1  failure (the database did not answer in time, the schema is older than DEMO_VERSION)
  2  usage or configuration error
`

func reportCmd(ctx context.Context, args []string, e *env) error {
	fs := flag.NewFlagSet("demo report", flag.ContinueOnError)
	if done, err := parseFlags(fs, args, reportHelp, e); done {
		return err
	}
	log := e.logger()
	s, err := readServeSettings(e.getenv)
	var timeout time.Duration
	if err == nil {
		timeout, err = durationSetting(e.getenv, "REPORT_TIMEOUT", time.Minute)
	}
	if err != nil {
		return fail(log, exitUsage, err, fmt.Sprintf("report: configuration error: %v", err))
	}
	pool, err := pgxpool.New(ctx, s.databaseURL)
	if err != nil {
		return fail(log, exitUsage, err, fmt.Sprintf("report: configuration error: parse DATABASE_URL: %v", err))
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := witness.Start{Pod: s.pod, Identity: s.identity, AppVersion: s.appVersion, ProcessStartedAt: e.started}
	rec, err := witness.Run(ctx, pool, start, cli.StdLogger(log))
	if err != nil {
		return fail(log, exitFailure, err, fmt.Sprintf("report: the database did not answer within %s: %s", timeout, migrate.OneLine(err)))
	}
	if rec.SchemaSeen < s.appVersion {
		err := fmt.Errorf("schema %d is older than DEMO_VERSION %d", rec.SchemaSeen, s.appVersion)
		return fail(log, exitFailure, err, fmt.Sprintf("report: %v: its migration has not run", err))
	}
	var n int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM records").Scan(&n); err != nil {
		return fail(log, exitFailure, err, fmt.Sprintf("report: count the records: %s", migrate.OneLine(err)))
	}
	_, _ = fmt.Fprintf(e.Out, "report: %d records on schema %d\n", n, rec.SchemaSeen)
	return nil
}
