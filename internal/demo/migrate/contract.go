package migrate

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/premigrate/premigrate/internal/demo/schema"
)

// contractStep is the contract half of an expand/contract pair: what becomes droppable once no app version
// older than version runs. Migration version is the expand half.
type contractStep struct {
	version int
	// done asks whether the schema has it already (a contract runs once; running it again drops nothing).
	done string
	sql  string
	// drops says what sql drops, for the logs and demo_contracts.
	drops []string
}

// contracts are the demo's contract steps, by version.
var contracts = []contractStep{{
	version: 8,
	done:    `SELECT NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'records' AND column_name = 'body')`,
	sql: `DROP TRIGGER records_body_content_sync ON records;
DROP FUNCTION records_body_content_sync();
ALTER TABLE records DROP COLUMN body;
ALTER TABLE records ALTER COLUMN content SET NOT NULL;`,
	drops: []string{"column records.body", "trigger records_body_content_sync"},
}}

// NotExpandedError is a contract asked of a schema that lacks its expand: nothing was dropped.
type NotExpandedError struct {
	Version, Schema int
}

func (e *NotExpandedError) Error() string {
	return fmt.Sprintf("the contract of version %d needs its expand (migration %d) first, and the schema is at version %d: nothing dropped",
		e.Version, e.Version, e.Schema)
}

// Contract runs, inside tx and under the migrations' advisory lock (no migration runs meanwhile), the contract
// of every expand/contract pair up to appVersion that the schema has not contracted yet, and returns what it
// dropped (nothing when there was nothing left to do). A schema without the expand of such a pair is refused
// with a *NotExpandedError.
func Contract(ctx context.Context, tx pgx.Tx, appVersion int) ([]string, error) {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", LockKey); err != nil {
		return nil, fmt.Errorf("take the migrations' lock: %w", err)
	}
	current, err := schema.Version(ctx, tx)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, c := range contracts {
		if c.version > appVersion {
			break
		}
		if current < c.version {
			return nil, &NotExpandedError{Version: c.version, Schema: current}
		}
		var done bool
		if err := tx.QueryRow(ctx, c.done).Scan(&done); err != nil {
			return nil, fmt.Errorf("ask whether the contract of version %d ran: %w", c.version, err)
		}
		if done {
			continue
		}
		if _, err := tx.Exec(ctx, c.sql); err != nil {
			return nil, fmt.Errorf("contract of version %d: %w", c.version, err)
		}
		dropped = append(dropped, c.drops...)
	}
	return dropped, nil
}
