// Package schema reads the demo database's schema version and decides whether a binary built for
// one schema version can run on another.
package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// MigrationsTable records every applied schema version, one row per version.
const MigrationsTable = "schema_migrations"

// undefinedTable is the SQLSTATE PostgreSQL answers when a relation does not exist.
const undefinedTable = "42P01"

// Querier is what Version needs from a connection, a pool or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Version returns the highest applied schema version, or 0 when nothing was ever migrated
// (including when the bookkeeping table does not exist yet).
func Version(ctx context.Context, q Querier) (int, error) {
	var v int
	err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+MigrationsTable).Scan(&v)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == undefinedTable {
			return 0, nil
		}
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Compatible reports whether a binary built for schema version app can serve on schema version
// current: its own version and the next one (a rolling upgrade runs the old binary on the new
// schema; a rollback runs the previous binary on the schema one step ahead).
func Compatible(app, current int) bool {
	return app <= current && current <= app+1
}
