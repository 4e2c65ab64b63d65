package witness_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/premigrate/premigrate/internal/demo/witness"
	"github.com/premigrate/premigrate/internal/pgtest"
)

// session opens a connection with application_name name, closed at the end of the test.
func session(t *testing.T, dsn, name string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.RuntimeParams["application_name"] = name
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestRecordContractNamesTheSessionsOfOtherAppVersionsConnectedAtItsStart(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := context.Background()
	session(t, dsn, witness.ServeApplicationName(1, "app-old-a"))
	session(t, dsn, witness.ServeApplicationName(2, "app-new-a"))
	session(t, dsn, witness.ServeApplicationName(12, "app-later-a"))
	session(t, dsn, "psql")
	conn := connect(t, dsn)

	c, err := witness.RecordContract(ctx, conn, "abc123def0", 2, nil)
	require.NoError(t, err)
	require.Len(t, c.OtherSessions, 2, "the v1 and v12 sessions, not v2's own, nor another program's: %v", c.OtherSessions)
	assert.Contains(t, c.OtherSessions[0], "demo serve v1 app-old-a (pid ")
	assert.Contains(t, c.OtherSessions[1], "demo serve v12 app-later-a (pid ")

	var identity string
	var others []string
	require.NoError(t, conn.QueryRow(ctx, "SELECT identity, other_sessions FROM "+witness.ContractTable).Scan(&identity, &others))
	assert.Equal(t, "abc123def0", identity)
	assert.Equal(t, c.OtherSessions, others)
}

func TestRecordContractWithNoOtherVersionConnectedRecordsNone(t *testing.T) {
	dsn := pgtest.NewDB(t)
	session(t, dsn, witness.ServeApplicationName(3, "app-a"))
	c, err := witness.RecordContract(context.Background(), connect(t, dsn), "", 3, nil)
	require.NoError(t, err)
	assert.Empty(t, c.OtherSessions)
	assert.False(t, c.StartedAt.IsZero())
}

func TestRecordContractRecordsWhatItsStepDroppedAndNothingWhenTheStepFails(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := context.Background()
	conn := connect(t, dsn)
	_, err := witness.RecordContract(ctx, conn, "failed", 8, func(context.Context, pgx.Tx) ([]string, error) {
		return nil, assert.AnError
	})
	require.ErrorIs(t, err, assert.AnError)

	c, err := witness.RecordContract(ctx, conn, "abc", 8, func(ctx context.Context, tx pgx.Tx) ([]string, error) {
		_, err := tx.Exec(ctx, "CREATE TABLE dropped_by_the_step (id int)")
		return []string{"table t"}, err
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"table t"}, c.Dropped)
	var identity string
	var dropped []string
	require.NoError(t, conn.QueryRow(ctx, "SELECT string_agg(identity, ','), max(dropped) FROM "+witness.ContractTable).Scan(&identity, &dropped))
	assert.Equal(t, "abc", identity, "one row, of the step that worked")
	assert.Equal(t, []string{"table t"}, dropped)
}
