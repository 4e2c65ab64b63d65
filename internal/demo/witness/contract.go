package witness

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ContractTable receives one row per contract step the demo runs (demo contract): when it started by the
// database's clock, which app processes of another version were connected to the database at that moment, and
// what it dropped. A contract drops what older versions use; the database itself says whether any of them could
// still use it.
const ContractTable = "demo_contracts"

// ServeApplicationName is the application_name of demo serve's connections for an app version and a pod: the
// database's own list of sessions (pg_stat_activity) then says which versions are connected.
func ServeApplicationName(appVersion int, pod string) string {
	return fmt.Sprintf("demo serve v%d %s", appVersion, pod)
}

const createContractSQL = `
CREATE TABLE IF NOT EXISTS ` + ContractTable + ` (
    id             bigserial   PRIMARY KEY,
    identity       text,
    app_version    integer     NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    other_sessions text[]      NOT NULL,
    dropped        text[]      NOT NULL DEFAULT '{}'
);
ALTER TABLE ` + ContractTable + ` ADD COLUMN IF NOT EXISTS dropped text[] NOT NULL DEFAULT '{}'`

// otherSessionsSQL reads the database's clock and lists the sessions of demo serve processes of another app version ($1 is the prefix of
// this version's application_name).
const otherSessionsSQL = `SELECT clock_timestamp(), coalesce(array_agg(application_name || ' (pid ' || pid || ')' ORDER BY application_name, pid), '{}')
FROM pg_stat_activity
WHERE datname = current_database() AND application_name LIKE 'demo serve v%' AND application_name NOT LIKE $1 || '%'`

// Contract is the row RecordContract inserted.
type Contract struct {
	StartedAt time.Time
	// OtherSessions are the sessions of demo serve processes of another version at StartedAt.
	OtherSessions []string
	// Dropped is what the step dropped.
	Dropped []string
}

// Step is what a contract does, inside the transaction that records it; it returns what it dropped.
type Step func(ctx context.Context, tx pgx.Tx) (dropped []string, err error)

// RecordContract runs step (when not nil) and records, in one transaction, the start of the contract step of
// identity for appVersion, the sessions of other app versions connected at that moment and what step dropped:
// a step that fails records nothing.
func RecordContract(ctx context.Context, conn Conn, identity string, appVersion int, step Step) (Contract, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return Contract{}, fmt.Errorf("begin transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", LockKey); err != nil {
		return Contract{}, fmt.Errorf("lock the creation of %s: %w", ContractTable, err)
	}
	if _, err := tx.Exec(ctx, createContractSQL); err != nil {
		return Contract{}, fmt.Errorf("create %s: %w", ContractTable, err)
	}
	var c Contract
	if err := tx.QueryRow(ctx, otherSessionsSQL, fmt.Sprintf("demo serve v%d ", appVersion)).Scan(&c.StartedAt, &c.OtherSessions); err != nil {
		return Contract{}, fmt.Errorf("list the sessions of other app versions: %w", err)
	}
	if step != nil {
		if c.Dropped, err = step(ctx, tx); err != nil {
			return Contract{}, err
		}
	}
	if c.Dropped == nil {
		c.Dropped = []string{}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+ContractTable+` (identity, app_version, started_at, other_sessions, dropped) VALUES (NULLIF($1, ''), $2, $3, $4, $5)`,
		identity, appVersion, c.StartedAt, c.OtherSessions, c.Dropped); err != nil {
		return Contract{}, fmt.Errorf("insert into %s: %w", ContractTable, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Contract{}, fmt.Errorf("commit %s row: %w", ContractTable, err)
	}
	return c, nil
}
