// Package witness records, once per process, that a demo app process reached its database: which
// pod, which app version, which schema version it saw, when the process started and when it
// connected. The row is an oracle independent of the gate: a test can tell from it alone whether an
// app ever ran on a schema older than its own, and compare its times with the migration's own
// record (demo_migrate_runs).
//
// The table is not a migration: the app creates it itself, so the witness works on an empty
// database before any migration ran.
package witness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/premigrate/premigrate/internal/demo/schema"
)

// Table receives one row per app process, written at its first successful database connection.
const Table = "demo_pod_starts"

// LockKey is the pg_advisory_xact_lock key taken around the creation of Table: two processes
// creating it at once would otherwise race on the catalog (a unique_violation on pg_type).
// It differs from the migration lock, which a running migration holds for minutes.
const LockKey int64 = 0x70726d7769746e73 // "prmwitns"

const createSQL = `
CREATE TABLE IF NOT EXISTS ` + Table + ` (
    id                 bigserial   PRIMARY KEY,
    pod                text,
    identity           text,
    app_version        integer     NOT NULL,
    schema_seen        integer     NOT NULL,
    process_started_at timestamptz NOT NULL,
    connected_at       timestamptz NOT NULL DEFAULT clock_timestamp()
)`

const insertSQL = `INSERT INTO ` + Table + ` (pod, identity, app_version, schema_seen, process_started_at)
VALUES (NULLIF($1, ''), NULLIF($2, ''), $3, $4, $5)
RETURNING id, connected_at`

// Retry bounds of Run.
const (
	FirstRetryDelay = 200 * time.Millisecond
	MaxRetryDelay   = 5 * time.Second
	// attemptTimeout bounds one attempt, so a database that never answers does not stall the retries.
	attemptTimeout = 10 * time.Second
	// maxLoggedErrors bounds the memory of failures already logged (errors that embed something
	// changing would otherwise grow it for ever); beyond it, new failures are not logged.
	maxLoggedErrors = 100
)

// Start describes the process being witnessed.
type Start struct {
	// Pod is the pod name (POD_NAME, else HOSTNAME); empty records NULL.
	Pod string
	// Identity is the migration identity the pod was deployed with (PREMIGRATE_IDENTITY); empty
	// records NULL.
	Identity string
	// AppVersion is the schema version the binary is built for (DEMO_VERSION).
	AppVersion int
	// ProcessStartedAt is when the process started, by the app's clock; it is recorded with
	// millisecond precision.
	ProcessStartedAt time.Time
}

// Recorded is the row Write inserted.
type Recorded struct {
	ID int64
	// SchemaSeen is the schema version read just before the insert (0 for an unmigrated database).
	SchemaSeen int
	// ConnectedAt is the database's clock at the insert.
	ConnectedAt time.Time
}

// Conn is one database session: a *pgx.Conn or a *pgxpool.Conn.
type Conn interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Write makes one attempt: it reads the schema version, creates Table if needed and inserts the row.
func Write(ctx context.Context, conn Conn, s Start) (Recorded, error) {
	seen, err := schema.Version(ctx, conn)
	if err != nil {
		return Recorded{}, err
	}
	rec := Recorded{SchemaSeen: seen}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return Recorded{}, fmt.Errorf("begin transaction: %w", err)
	}
	// After Commit this is a no-op; after a failure it ends the transaction and releases the lock.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", LockKey); err != nil {
		return Recorded{}, fmt.Errorf("lock the creation of %s: %w", Table, err)
	}
	if _, err := tx.Exec(ctx, createSQL); err != nil {
		return Recorded{}, fmt.Errorf("create %s: %w", Table, err)
	}
	started := s.ProcessStartedAt.UTC().Truncate(time.Millisecond)
	if err := tx.QueryRow(ctx, insertSQL, s.Pod, s.Identity, s.AppVersion, seen, started).Scan(&rec.ID, &rec.ConnectedAt); err != nil {
		return Recorded{}, fmt.Errorf("insert into %s: %w", Table, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Recorded{}, fmt.Errorf("commit %s row: %w", Table, err)
	}
	return rec, nil
}

// Run writes the row once, retrying with a backoff (FirstRetryDelay doubling up to MaxRetryDelay)
// until it succeeds or ctx ends; it is meant to run in its own goroutine, so it never holds up
// serving. It logs one line once the row is written and each distinct failure once. The error is
// the context's when it ended first.
func Run(ctx context.Context, pool *pgxpool.Pool, s Start, logger *log.Logger) (Recorded, error) {
	if logger == nil {
		logger = log.New(io.Discard, "", 0)
	}
	logged := map[string]bool{}
	delay := FirstRetryDelay
	for {
		rec, err := attempt(ctx, pool, s)
		if err == nil {
			logger.Printf("witness: pod %s version %d saw schema %d", s.Pod, s.AppVersion, rec.SchemaSeen)
			return rec, nil
		}
		if ctx.Err() != nil {
			return Recorded{}, fmt.Errorf("record the start in %s: %w", Table, errors.Join(ctx.Err(), err))
		}
		if msg := oneLine(err); !logged[msg] && len(logged) < maxLoggedErrors {
			logged[msg] = true
			logger.Printf("witness: cannot record the start in %s yet (retrying until it works): %s", Table, msg)
		}
		select {
		case <-ctx.Done():
			return Recorded{}, fmt.Errorf("record the start in %s: %w", Table, errors.Join(ctx.Err(), err))
		case <-time.After(delay):
		}
		delay = min(delay*2, MaxRetryDelay)
	}
}

// attempt acquires one connection of pool and writes the row on it.
func attempt(ctx context.Context, pool *pgxpool.Pool, s Start) (Recorded, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return Recorded{}, fmt.Errorf("connect to the database: %w", err)
	}
	defer conn.Release()
	return Write(ctx, conn, s)
}

// oneLine renders err on a single log line (pgx lists every address it tried on its own line).
func oneLine(err error) string {
	s := strings.ReplaceAll(err.Error(), ":\n", ": ")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}
