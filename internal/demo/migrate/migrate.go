// Package migrate applies the demo app's embedded, versioned SQL migrations to PostgreSQL.
//
// A run holds a session-level advisory lock for its whole duration, so concurrent runs are
// serialised: the second waits, then finds nothing left to do. Every version is applied in its own
// transaction together with its schema_migrations row, so a failure leaves the previous version
// intact. Destructive migrations are refused, before anything is applied, unless the caller
// accepts data loss. A schema newer than the target is left alone, or, when the caller asks for it,
// refused as Alembic and golang-migrate do.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/premigrate/premigrate/internal/demo/schema"
)

// LockKey is the pg_advisory_lock key every migration run takes.
const LockKey int64 = 0x70726d6967726174 // "prmigrat"

// RunsTable receives one row per successful run.
const RunsTable = "demo_migrate_runs"

// StartsTable receives one row per run that starts applying migrations, committed before the first one: a run
// stopped mid-way (killed, its lock lost) leaves its start and no row in RunsTable, so the tests can count
// the runs that started, not only those that finished.
const StartsTable = "demo_migrate_starts"

// bookkeepingSQL creates the bookkeeping tables, and brings a demo_migrate_runs table created by an
// older binary (without started_at) up to date. Both timestamps of a run come from the database's
// clock_timestamp(), so they compare with each other and with other tables' database timestamps
// whatever the clocks of the pods.
const bookkeepingSQL = `
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer     PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    duration_ms bigint      NOT NULL
);
CREATE TABLE IF NOT EXISTS ` + RunsTable + ` (
    id          bigserial   PRIMARY KEY,
    identity    text,
    applied     integer[]   NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at  timestamptz
);
ALTER TABLE ` + RunsTable + `
    ADD COLUMN IF NOT EXISTS started_at timestamptz,
    ALTER COLUMN finished_at SET DEFAULT clock_timestamp();
CREATE TABLE IF NOT EXISTS ` + StartsTable + ` (
    id          bigserial   PRIMARY KEY,
    identity    text,
    pending     integer[]   NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);`

// Config describes one migration run.
type Config struct {
	// DatabaseURL is a PostgreSQL connection string (URL or key=value).
	DatabaseURL string
	// Target is the schema version to reach.
	Target int
	// AcceptDataLoss allows destructive migrations.
	AcceptDataLoss bool
	// FailVersion, when non-zero, makes that version's migration fail inside its transaction after
	// its DDL ran (fault injection).
	FailVersion int
	// Delay, when non-zero, makes every applied version sleep this long on the server inside its
	// transaction (fault injection: a slow migration that can be killed halfway).
	Delay time.Duration
	// ConnectTimeout is how long the first connection is retried.
	ConnectTimeout time.Duration
	// Identity is recorded in demo_migrate_runs (empty records NULL).
	Identity string
	// RefuseNewerSchema makes a run fail with a *NewerSchemaError, without applying or recording
	// anything, when the schema version is already beyond Target (an older migration must not run
	// against a newer schema). Off, such a schema is left alone and the run succeeds.
	RefuseNewerSchema bool
	// Logger receives progress lines; nil discards them.
	Logger *log.Logger
	// Migrations to apply; nil means the embedded ones.
	Migrations []Migration
}

// Applied describes one version a run applied.
type Applied struct {
	Version  int
	Name     string
	Duration time.Duration
}

// Result describes a finished run.
type Result struct {
	// From is the schema version found once the lock was held; To the version left behind.
	From, To int
	Applied  []Applied
	// StartedAt is the database's clock when the run held the advisory lock, before anything was
	// applied; zero when the lock was never taken.
	StartedAt time.Time
	// FinishedAt is the database's clock when the run was recorded in demo_migrate_runs; zero when
	// it was not.
	FinishedAt time.Time
}

// Drop is one thing a pending destructive migration would destroy.
type Drop struct {
	Version int
	What    string
}

// RefusedError reports pending destructive migrations that were not allowed. Nothing was applied.
type RefusedError struct {
	Drops []Drop
}

func (e *RefusedError) Error() string {
	parts := make([]string, len(e.Drops))
	for i, d := range e.Drops {
		parts[i] = fmt.Sprintf("version %d %s", d.Version, d.What)
	}
	return fmt.Sprintf("refusing destructive migration: %s; nothing was applied; set SCHEMA_ACCEPT_DATA_LOSS=true to allow it",
		strings.Join(parts, ", "))
}

// NewerSchemaError reports a schema beyond the target of a run that refuses newer schemas
// (Config.RefuseNewerSchema). Nothing was applied or recorded.
type NewerSchemaError struct {
	Schema, Target int
}

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this migration's target %d: refusing to run an older migration against a newer schema (DEMO_REFUSE_NEWER_SCHEMA=true)",
		e.Schema, e.Target)
}

// Run connects (retrying until cfg.ConnectTimeout), takes the advisory lock and applies every
// pending version up to cfg.Target. A schema already at the target is left alone; one beyond it
// too, unless cfg.RefuseNewerSchema makes that an error.
func Run(ctx context.Context, cfg Config) (Result, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = log.New(io.Discard, "", 0)
	}
	migrations := cfg.Migrations
	if migrations == nil {
		var err error
		if migrations, err = Embedded(); err != nil {
			return Result{}, err
		}
	}
	if cfg.Target < 1 || cfg.Target > Latest(migrations) {
		return Result{}, &ConfigError{Err: fmt.Errorf("target version %d is not between 1 and %d, the newest migration", cfg.Target, Latest(migrations))}
	}

	conn, err := Connect(ctx, cfg.DatabaseURL, cfg.ConnectTimeout, logger)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()

	startedAt, err := lock(ctx, conn, logger)
	if err != nil {
		return Result{}, err
	}
	// Closing the session releases the lock too; unlocking explicitly keeps it short when the
	// connection is pooled by something in between.
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", LockKey); err != nil {
			logger.Printf("release migration lock: %v", err)
		}
	}()

	// Read under the lock: no other run can move the version until this one ends. Reading works
	// before the bookkeeping tables exist (version 0), so a refusal changes nothing at all.
	current, err := schema.Version(ctx, conn)
	if err != nil {
		return Result{}, err
	}
	res := Result{From: current, To: current, StartedAt: startedAt}
	if cfg.RefuseNewerSchema && current > cfg.Target {
		return res, &NewerSchemaError{Schema: current, Target: cfg.Target}
	}
	if _, err := conn.Exec(ctx, bookkeepingSQL); err != nil {
		return res, fmt.Errorf("create bookkeeping tables: %w", err)
	}

	var pending []Migration
	for _, m := range migrations {
		if m.Version > current && m.Version <= cfg.Target {
			pending = append(pending, m)
		}
	}
	switch {
	case current > cfg.Target:
		logger.Printf("schema is at version %d, ahead of target %d: nothing to do", current, cfg.Target)
	case len(pending) == 0:
		logger.Printf("schema is at version %d, the target: nothing to do", current)
	default:
		logger.Printf("schema is at version %d, target %d: %d migration(s) pending", current, cfg.Target, len(pending))
	}

	if refused := refusedDrops(pending, cfg.AcceptDataLoss); refused != nil {
		return res, refused
	}
	if cfg.FailVersion > 0 && cfg.FailVersion > current && cfg.FailVersion <= cfg.Target {
		logger.Printf("fault injection: migration %d will fail", cfg.FailVersion)
	}

	if len(pending) > 0 {
		versions := make([]int32, len(pending))
		for i, m := range pending {
			versions[i] = int32(m.Version)
		}
		// one statement, so its own transaction: committed before anything is applied
		if _, err := conn.Exec(ctx, "INSERT INTO "+StartsTable+" (identity, pending) VALUES (NULLIF($1, ''), $2)", cfg.Identity, versions); err != nil {
			return res, fmt.Errorf("record the start in %s: %w", StartsTable, err)
		}
	}
	for _, m := range pending {
		if m.Destructive() {
			logger.Printf("applying destructive version %d (%s), data loss accepted: %s", m.Version, m.Name, strings.Join(m.Drops, ", "))
		}
		d, err := apply(ctx, conn, m, m.Version == cfg.FailVersion, cfg.Delay)
		if err != nil {
			return res, fmt.Errorf("migration %d (%s) failed and was rolled back; schema stays at version %d: %w", m.Version, m.Name, res.To, err)
		}
		res.Applied = append(res.Applied, Applied{Version: m.Version, Name: m.Name, Duration: d})
		res.To = m.Version
		logger.Printf("applied version %d (%s) in %s", m.Version, m.Name, d.Round(time.Microsecond))
	}

	versions := make([]int32, len(res.Applied))
	for i, a := range res.Applied {
		versions[i] = int32(a.Version)
	}
	// One statement, so its own transaction: finished_at is the database's clock at the insert.
	err = conn.QueryRow(ctx,
		"INSERT INTO "+RunsTable+" (identity, applied, started_at, finished_at) VALUES (NULLIF($1, ''), $2, $3, clock_timestamp()) RETURNING finished_at",
		cfg.Identity, versions, startedAt).Scan(&res.FinishedAt)
	if err != nil {
		return res, fmt.Errorf("record the run in %s: %w", RunsTable, err)
	}
	if len(res.Applied) > 0 {
		logger.Printf("schema migrated from version %d to %d", res.From, res.To)
	}
	return res, nil
}

// lock takes the advisory lock, saying so when another run holds it, and returns the database's
// clock once the lock is held.
func lock(ctx context.Context, conn *pgx.Conn, logger *log.Logger) (time.Time, error) {
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", LockKey).Scan(&got); err != nil {
		return time.Time{}, fmt.Errorf("take migration lock: %w", err)
	}
	if !got {
		logger.Printf("another migration run holds the lock; waiting for it")
		start := time.Now()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", LockKey); err != nil {
			return time.Time{}, fmt.Errorf("wait for migration lock: %w", err)
		}
		logger.Printf("got the migration lock after %s", time.Since(start).Round(time.Millisecond))
	}
	var at time.Time
	if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock after taking the migration lock: %w", err)
	}
	return at, nil
}

// refusedDrops returns the refusal for pending destructive migrations, or nil.
func refusedDrops(pending []Migration, acceptDataLoss bool) *RefusedError {
	if acceptDataLoss {
		return nil
	}
	var drops []Drop
	for _, m := range pending {
		for _, what := range m.Drops {
			drops = append(drops, Drop{Version: m.Version, What: what})
		}
	}
	if drops == nil {
		return nil
	}
	return &RefusedError{Drops: drops}
}

// apply runs one migration and its bookkeeping row in a single transaction.
func apply(ctx context.Context, conn *pgx.Conn, m Migration, injectFailure bool, delay time.Duration) (time.Duration, error) {
	start := time.Now()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin transaction: %w", err)
	}
	// After Commit this is a no-op; after a failure it discards everything the migration did.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return 0, fmt.Errorf("execute SQL: %w", err)
	}
	if delay > 0 {
		if _, err := tx.Exec(ctx, "SELECT pg_sleep($1)", delay.Seconds()); err != nil {
			return 0, fmt.Errorf("injected delay: %w", err)
		}
	}
	d := time.Since(start)
	if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, duration_ms) VALUES ($1, $2)", m.Version, d.Milliseconds()); err != nil {
		return 0, fmt.Errorf("record version: %w", err)
	}
	if injectFailure {
		// Fail on the server, after the DDL and the bookkeeping row, so the rollback is real.
		if _, err := tx.Exec(ctx, fmt.Sprintf(
			"DO $$ BEGIN RAISE EXCEPTION 'injected failure in migration %d (DEMO_FAIL_MIGRATION)'; END $$", m.Version)); err != nil {
			return 0, fmt.Errorf("execute SQL: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return time.Since(start), nil
}

// Status compares the schema version with target.
type Status struct {
	Current, Expected int
}

// UpToDate reports whether the schema is exactly at the expected version.
func (s Status) UpToDate() bool { return s.Current == s.Expected }

// CheckStatus reads the schema version with a single connection attempt bounded by
// connectTimeout and compares it with target.
func CheckStatus(ctx context.Context, databaseURL string, target int, connectTimeout time.Duration) (Status, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return Status{}, &ConfigError{Err: fmt.Errorf("parse DATABASE_URL: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return Status{}, fmt.Errorf("connect to the database: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	v, err := schema.Version(ctx, conn)
	if err != nil {
		return Status{}, err
	}
	return Status{Current: v, Expected: target}, nil
}

// IsNewerSchema reports whether err is a refusal of a schema newer than the target.
func IsNewerSchema(err error) bool {
	var n *NewerSchemaError
	return errors.As(err, &n)
}

// IsRefused reports whether err is a refusal of destructive migrations.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
