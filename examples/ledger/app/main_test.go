package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/premigrate/premigrate/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func query[T any](t *testing.T, dsn, q string) T {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	var v T
	require.NoError(t, conn.QueryRow(context.Background(), q).Scan(&v))
	return v
}

func TestAnAppStartOnAnUnmigratedDatabaseIsRecordedAndRefused(t *testing.T) {
	dsn := pgtest.NewDB(t)
	err := serve(context.Background(), dsn, 1, "pod-a", "127.0.0.1:0", quiet)
	require.ErrorContains(t, err, "refusing to serve")
	assert.Equal(t, "pod-a 1 0", query[string](t, dsn, `SELECT pod || ' ' || wanted || ' ' || seen FROM ledger_pod_starts`))
}

func TestMigrationsApplyEachVersionOnceAndNeverGoBack(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := context.Background()
	require.NoError(t, migrate(ctx, dsn, 2, "job-1", quiet))
	require.NoError(t, migrate(ctx, dsn, 2, "job-2", quiet), "an applied version is not applied again")
	assert.Equal(t, "1:job-1,2:job-1", query[string](t, dsn, `SELECT string_agg(version || ':' || pod, ',' ORDER BY version) FROM ledger_schema`))
	err := migrate(ctx, dsn, 1, "job-3", quiet)
	require.ErrorIs(t, err, errRefused)
	assert.Equal(t, exitRefused, exitCode(err))
}

func TestAContractDropsTheOlderVersionsTablesOnceAndOnlyAfterItsMigration(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := context.Background()
	require.NoError(t, migrate(ctx, dsn, 2, "job-1", quiet))
	err := contract(ctx, dsn, 3, "contract-0", quiet)
	require.ErrorIs(t, err, errRefused, "a contract before its migration")
	assert.Equal(t, exitRefused, exitCode(err))
	// a build of version 1 serving: the contract sees its session
	older, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	_, err = older.Exec(ctx, `SELECT set_config('application_name', 'ledger serve 1 pod-old', false)`)
	require.NoError(t, err)
	require.NoError(t, contract(ctx, dsn, 2, "contract-1", quiet))
	require.NoError(t, older.Close(ctx))
	require.NoError(t, contract(ctx, dsn, 2, "contract-2", quiet), "a version contracted before")
	assert.Equal(t, "2:contract-1:ledger_v1:ledger serve 1 pod-old", query[string](t, dsn,
		`SELECT string_agg(version || ':' || pod || ':' || dropped || ':' || older_sessions, ',') FROM ledger_contracts`))
	assert.Equal(t, "ledger_v2", query[string](t, dsn, `SELECT string_agg(tablename, ',') FROM pg_tables WHERE tablename LIKE 'ledger_v%'`))
}

func TestTheProxyForwardsConnectionsToTheDatabase(t *testing.T) {
	dsn := pgtest.NewDB(t)
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	target := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	go func() { done <- proxy(ctx, addr, target, quiet) }()
	cfg.Host, cfg.Port = "127.0.0.1", port(t, addr)
	var conn *pgx.Conn
	require.Eventually(t, func() bool { conn, err = pgx.ConnectConfig(context.Background(), cfg); return err == nil }, 5*time.Second, 50*time.Millisecond)
	var one int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT 1`).Scan(&one))
	_ = conn.Close(context.Background())
	cancel()
	require.NoError(t, <-done)
}

func TestWaitForDBEndsWhenTheDatabaseAnswersAndFailsWhenNothingListens(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := context.Background()
	require.NoError(t, waitForDB(ctx, dsn, time.Second, quiet))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	start := time.Now()
	err = waitForDB(ctx, "postgres://ledger@"+addr+"/ledger?sslmode=disable&connect_timeout=1", 2*time.Second, quiet)
	require.ErrorContains(t, err, "wait for the database")
	assert.Less(t, time.Since(start), 10*time.Second, "it gives up after its timeout")
}

func port(t *testing.T, addr string) uint16 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.ParseUint(p, 10, 16)
	require.NoError(t, err)
	return uint16(n)
}
