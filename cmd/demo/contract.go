package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/demo/migrate"
	"github.com/premigrate/premigrate/internal/demo/witness"
)

const contractHelp = `Usage: demo contract

The demo's contract step (migration.contract): what an app runs once no older version of it is left,
to drop what only older versions used. From DEMO_VERSION 8 it drops records.body and the trigger
that kept it in step with records.content (migration 8 is the expand half of that pair: versions 7
and older write body, 8 and newer content), under the migrations' advisory lock, once: a schema
already contracted has nothing left to drop. In the same transaction it records that it ran, in
demo_contracts: the identity, the app version, when it started by the database's clock, the
sessions of demo serve processes of another version connected at that moment (pg_stat_activity, by
their application_name "demo serve v<DEMO_VERSION> <pod>") and what it dropped. It prints one line:
a test reads the database to tell whether the contract ran while older versions were still
connected.

Environment:
  DATABASE_URL          PostgreSQL connection URL (required)
  DEMO_VERSION          the schema version this binary is built for (default 1)
  PREMIGRATE_IDENTITY   migration identity recorded with the row (default: NULL)
  CONTRACT_TIMEOUT      how long to try the database before giving up (default 1m)
  DEMO_CONTRACT_DELAY   sleep this long inside the contract's transaction, after its start is taken and
                        before anything is dropped (fault injection: a long contract; default 0)

Exit codes:
  0  contracted (or nothing left to drop) and recorded
  1  failure (the database did not answer in time, the schema lacks migration 8 for a version 8
     contract, ...): nothing dropped, nothing recorded
  2  usage or configuration error
`

func contractCmd(ctx context.Context, args []string, e *env) error {
	fs := flag.NewFlagSet("demo contract", flag.ContinueOnError)
	if done, err := parseFlags(fs, args, contractHelp, e); done {
		return err
	}
	log := e.logger()
	s, err := readServeSettings(e.getenv)
	var timeout, delay time.Duration
	if err == nil {
		timeout, err = durationSetting(e.getenv, "CONTRACT_TIMEOUT", time.Minute)
	}
	if err == nil {
		delay, err = durationSetting(e.getenv, "DEMO_CONTRACT_DELAY", 0)
	}
	if err != nil {
		return fail(log, exitUsage, err, fmt.Sprintf("contract: configuration error: %v", err))
	}
	conn, err := migrate.Connect(ctx, s.databaseURL, timeout, cli.StdLogger(log))
	if err != nil {
		return fail(log, exitFailure, err, fmt.Sprintf("contract: connect: %s", migrate.OneLine(err)))
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if delay > 0 {
		log.Info(fmt.Sprintf("contract: DEMO_CONTRACT_DELAY: sleeping %s inside the contract's transaction", delay))
	}
	c, err := contract(ctx, conn, s.identity, s.appVersion, delay)
	if err != nil {
		return fail(log, exitFailure, err, fmt.Sprintf("contract: %s", migrate.OneLine(err)))
	}
	_, _ = fmt.Fprintf(e.Out, "contract: version %d, identity %q, started %s; dropped: %s; sessions of other versions connected: %s\n",
		s.appVersion, s.identity, c.StartedAt.UTC().Format(time.RFC3339Nano), listOrNone(c.Dropped), listOrNone(c.OtherSessions))
	return nil
}

// contract runs the contract steps of appVersion, after delay, and records them (demo contract; demo migrate
// with DEMO_CONTRACT_IN_MIGRATION).
func contract(ctx context.Context, conn witness.Conn, identity string, appVersion int, delay time.Duration) (witness.Contract, error) {
	return witness.RecordContract(ctx, conn, identity, appVersion, func(ctx context.Context, tx pgx.Tx) ([]string, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		return migrate.Contract(ctx, tx, appVersion)
	})
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}
