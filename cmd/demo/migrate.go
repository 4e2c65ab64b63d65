package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/demo/migrate"
)

const defaultConnectTimeout = 60 * time.Second

const migrateHelp = `Usage: demo migrate

Applies the pending schema migrations embedded in this binary, up to DEMO_VERSION, one
transaction per version, while holding a PostgreSQL advisory lock (a concurrent run waits, then
finds nothing to do). A schema already at DEMO_VERSION is left alone; one beyond it too, unless
DEMO_REFUSE_NEWER_SCHEMA=true. Every successful run adds a row to
demo_migrate_runs(identity, applied, started_at, finished_at), both times from the database's
clock (started_at once the lock is held, finished_at at the insert); every applied version a row
to schema_migrations(version, applied_at, duration_ms).

Environment:
  DATABASE_URL              PostgreSQL connection URL (required)
  DEMO_VERSION              target schema version, 1..8 (default 1)
  SCHEMA_ACCEPT_DATA_LOSS   "true" allows destructive migrations (version 6 drops records.source);
                            without it a pending destructive migration is refused before anything
                            is applied (default false)
  DEMO_FAIL_MIGRATION       fault injection: the migration of this version fails inside its
                            transaction after running its DDL, which is rolled back (default: none)
  DEMO_MIGRATION_DELAY      fault injection: every applied version sleeps this long inside its
                            transaction, so a run can be killed halfway (default: none)
  DEMO_REFUSE_NEWER_SCHEMA  "true" refuses a schema newer than DEMO_VERSION (checked under the
                            lock): nothing is applied or recorded, exit code 1 (default false:
                            such a schema is left alone, exit code 0)
  DEMO_EXIT_0_ON_SIGTERM    fault injection: "true" makes a run stopped by SIGTERM exit 0 with
                            whatever it did not apply left undone, as a tool that traps SIGTERM
                            and exits cleanly does (default false)
  DEMO_CONTRACT_IN_MIGRATION  fault injection: "true" runs the contract step of DEMO_VERSION (what
                            demo contract drops: records.body from version 8) right after the
                            migrations, in the migration step, while older pods still serve: the drop
                            done before the rollout, as charts without a contract phase do (default false)
  MIGRATE_CONNECT_TIMEOUT   how long to retry the first connection, with backoff (default 60s)
  PREMIGRATE_IDENTITY       migration identity recorded in demo_migrate_runs (default: NULL)

Exit codes:
  0  migrations applied, or nothing to do (or stopped by SIGTERM with DEMO_EXIT_0_ON_SIGTERM=true)
  1  failure (database unreachable, a migration failed, the schema is newer than DEMO_VERSION
     and DEMO_REFUSE_NEWER_SCHEMA=true, ...)
  2  usage or configuration error
  3  refused: a destructive migration is pending and SCHEMA_ACCEPT_DATA_LOSS is not true;
     do not retry
`

const migrateStatusHelp = `Usage: demo migrate status

Prints the current schema version and DEMO_VERSION, and exits 0 iff they are equal. A single
connection attempt is made, bounded by MIGRATE_CONNECT_TIMEOUT.

Environment:
  DATABASE_URL              PostgreSQL connection URL (required)
  DEMO_VERSION              expected schema version (default 1)
  MIGRATE_CONNECT_TIMEOUT   bound of the connection attempt (default 60s)

Exit codes:
  0  the schema version equals DEMO_VERSION
  1  it does not, or the database could not be read
  2  usage or configuration error
`

const migrateCheckHelp = `Usage: demo migrate check

Prints the current schema version and DEMO_VERSION, and exits 0 iff the schema has every migration
of DEMO_VERSION (its version is DEMO_VERSION or newer): the question premigrate's migration.check
asks before it believes a record (a database restored from a dump taken before the migration
answers no). A single connection attempt is made, bounded by MIGRATE_CONNECT_TIMEOUT.

Environment:
  DATABASE_URL              PostgreSQL connection URL (required)
  DEMO_VERSION              the schema version this build needs (default 1)
  MIGRATE_CONNECT_TIMEOUT   bound of the connection attempt (default 60s)

Exit codes:
  0  the schema version is DEMO_VERSION or newer
  1  it is older, or the database could not be read
  2  usage or configuration error
`

// migrateSettings are the options of `demo migrate`, from the environment.
type migrateSettings struct {
	databaseURL    string
	target         int
	acceptDataLoss bool
	failVersion    int
	delay          time.Duration
	connectTimeout time.Duration
	identity       string
	refuseNewer    bool
	exit0OnSIGTERM bool
	contractNow    bool
}

func readMigrateSettings(getenv func(string) string) (migrateSettings, error) {
	var s migrateSettings
	var errs []error
	var err error
	s.databaseURL, err = requiredString(getenv, "DATABASE_URL")
	errs = append(errs, err)
	s.target, err = intSetting(getenv, "DEMO_VERSION", 1, 1)
	errs = append(errs, err)
	s.acceptDataLoss, err = boolSetting(getenv, "SCHEMA_ACCEPT_DATA_LOSS")
	errs = append(errs, err)
	s.failVersion, err = intSetting(getenv, "DEMO_FAIL_MIGRATION", 0, 0)
	errs = append(errs, err)
	s.delay, err = durationSetting(getenv, "DEMO_MIGRATION_DELAY", 0)
	errs = append(errs, err)
	s.connectTimeout, err = durationSetting(getenv, "MIGRATE_CONNECT_TIMEOUT", defaultConnectTimeout)
	errs = append(errs, err)
	s.refuseNewer, err = boolSetting(getenv, "DEMO_REFUSE_NEWER_SCHEMA")
	errs = append(errs, err)
	s.exit0OnSIGTERM, err = boolSetting(getenv, "DEMO_EXIT_0_ON_SIGTERM")
	errs = append(errs, err)
	s.contractNow, err = boolSetting(getenv, "DEMO_CONTRACT_IN_MIGRATION")
	errs = append(errs, err)
	s.identity = getenv("PREMIGRATE_IDENTITY")
	return s, errors.Join(errs...)
}

func migrateCmd(ctx context.Context, args []string, e *env) error {
	fs := flag.NewFlagSet("demo migrate", flag.ContinueOnError)
	if done, err := parseFlags(fs, args, migrateHelp, e); done {
		return err
	}
	s, err := readMigrateSettings(e.getenv)
	if err != nil {
		return fail(e.logger(), exitUsage, err, fmt.Sprintf("migrate: configuration error: %v", err))
	}
	return runMigrate(ctx, s, e)
}

// runMigrate is `demo migrate`: it applies the pending migrations up to the target version.
func runMigrate(ctx context.Context, s migrateSettings, e *env) error {
	log := e.logger()
	log.Info(fmt.Sprintf("migrate: target schema version %d (identity %q)", s.target, s.identity))
	start := time.Now()
	res, err := migrate.Run(ctx, migrate.Config{
		DatabaseURL:       s.databaseURL,
		Target:            s.target,
		AcceptDataLoss:    s.acceptDataLoss,
		FailVersion:       s.failVersion,
		Delay:             s.delay,
		ConnectTimeout:    s.connectTimeout,
		Identity:          s.identity,
		RefuseNewerSchema: s.refuseNewer,
		Logger:            cli.StdLogger(log),
	})
	var cfgErr *migrate.ConfigError
	switch {
	case err != nil && ctx.Err() != nil && s.exit0OnSIGTERM:
		log.Warn(fmt.Sprintf("migrate: stopped by SIGTERM halfway, exiting 0 (DEMO_EXIT_0_ON_SIGTERM=true): %s", migrate.OneLine(err)))
		return nil
	case migrate.IsRefused(err):
		return fail(log, exitRefused, err, fmt.Sprintf("migrate: %v", err))
	case errors.As(err, &cfgErr):
		return fail(log, exitUsage, err, fmt.Sprintf("migrate: configuration error: %v", err))
	case migrate.IsNewerSchema(err):
		return fail(log, exitFailure, err, fmt.Sprintf("migrate: %v", err))
	case err != nil:
		return fail(log, exitFailure, err, fmt.Sprintf("migrate: failed: %s", migrate.OneLine(err)))
	}
	log.Info(fmt.Sprintf("migrate: done in %s: %d version(s) applied, schema at version %d",
		time.Since(start).Round(time.Millisecond), len(res.Applied), res.To))
	if s.contractNow {
		return contractInMigration(ctx, s, e)
	}
	return nil
}

// contractInMigration is DEMO_CONTRACT_IN_MIGRATION: the contract step run by the migration, before the rollout.
func contractInMigration(ctx context.Context, s migrateSettings, e *env) error {
	log := e.logger()
	conn, err := migrate.Connect(ctx, s.databaseURL, s.connectTimeout, cli.StdLogger(log))
	if err != nil {
		return fail(log, exitFailure, err, fmt.Sprintf("migrate: contract: connect: %s", migrate.OneLine(err)))
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	c, err := contract(ctx, conn, s.identity, s.target, 0)
	if err != nil {
		return fail(log, exitFailure, err, fmt.Sprintf("migrate: contract: %s", migrate.OneLine(err)))
	}
	log.Warn(fmt.Sprintf("migrate: contract step run in the migration (DEMO_CONTRACT_IN_MIGRATION=true), before the rollout: dropped %s",
		listOrNone(c.Dropped)))
	return nil
}

// statusSettings are the options of `demo migrate status`, from the environment.
type statusSettings struct {
	databaseURL string
	target      int
	timeout     time.Duration
}

func readStatusSettings(getenv func(string) string) (statusSettings, error) {
	var s statusSettings
	var errs []error
	var err error
	s.databaseURL, err = requiredString(getenv, "DATABASE_URL")
	errs = append(errs, err)
	s.target, err = intSetting(getenv, "DEMO_VERSION", 1, 1)
	errs = append(errs, err)
	s.timeout, err = durationSetting(getenv, "MIGRATE_CONNECT_TIMEOUT", defaultConnectTimeout)
	errs = append(errs, err)
	return s, errors.Join(errs...)
}

// migrateStatusCmd is `demo migrate status` and `demo migrate check` (name): the same reading of the schema
// version, judged by equality or by "at least".
func migrateStatusCmd(ctx context.Context, name string, args []string, e *env) error {
	help := migrateStatusHelp
	if name == "check" {
		help = migrateCheckHelp
	}
	fs := flag.NewFlagSet("demo migrate "+name, flag.ContinueOnError)
	if done, err := parseFlags(fs, args, help, e); done {
		return err
	}
	s, err := readStatusSettings(e.getenv)
	if err != nil {
		return fail(e.logger(), exitUsage, err, fmt.Sprintf("migrate %s: configuration error: %v", name, err))
	}
	return runMigrateStatus(ctx, name, s, e)
}

// runMigrateStatus prints the schema version and DEMO_VERSION, and fails unless they are equal (status) or
// the schema is at least DEMO_VERSION (check).
func runMigrateStatus(ctx context.Context, name string, s statusSettings, e *env) error {
	log := e.logger()
	st, err := migrate.CheckStatus(ctx, s.databaseURL, s.target, s.timeout)
	var cfgErr *migrate.ConfigError
	switch {
	case errors.As(err, &cfgErr):
		return fail(log, exitUsage, err, fmt.Sprintf("migrate %s: configuration error: %v", name, err))
	case err != nil:
		return fail(log, exitFailure, err, fmt.Sprintf("migrate %s: %s", name, migrate.OneLine(err)))
	}
	ok, verdict, why := st.UpToDate(), "up to date", fmt.Sprintf("schema version %d, expected %d", st.Current, st.Expected)
	if !ok {
		verdict = "not up to date"
	}
	if name == "check" {
		ok, verdict = st.Current >= st.Expected, "has its migrations"
		if !ok {
			verdict = "does not have its migrations"
			why = fmt.Sprintf("schema version %d is older than this build's %d: its migrations are not applied", st.Current, st.Expected)
		}
	}
	_, _ = fmt.Fprintf(e.Out, "schema version: %d, expected: %d (%s)\n", st.Current, st.Expected, verdict)
	if !ok {
		log.Error("migrate " + name + ": " + why)
		return cli.Exit(exitFailure, errors.New(why))
	}
	return nil
}
