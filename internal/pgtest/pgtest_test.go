package pgtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/premigrate/premigrate/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestEachNewDBIsAFreshDatabaseOnTheSharedServer(t *testing.T) {
	ctx := context.Background()
	first, second := pgtest.NewDB(t), pgtest.NewDB(t)
	if first == second {
		t.Fatalf("two calls returned the same database %s", first)
	}
	if _, err := connect(t, first).Exec(ctx, "CREATE TABLE only_here (id int)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	var n int
	err := connect(t, second).QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_here'").Scan(&n)
	if err != nil {
		t.Fatalf("query second database: %v", err)
	}
	if n != 0 {
		t.Errorf("a table created in one test database is visible in another")
	}
	if first, again := pgtest.Shared(t), pgtest.Shared(t); first != again {
		t.Errorf("Shared returned two different servers")
	}
}

func TestPreparedServerAcceptsConnectionsOnlyAfterLaunch(t *testing.T) {
	s := pgtest.Prepare(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, s.DSN("postgres")); err == nil {
		_ = conn.Close(ctx)
		t.Fatalf("connected to a server that was not launched")
	}
	s.Launch(t)
	var version string
	if err := connect(t, s.DSN("postgres")).QueryRow(context.Background(), "SHOW server_version").Scan(&version); err != nil {
		t.Fatalf("query server version: %v", err)
	}
	t.Logf("PostgreSQL %s on port %d", version, s.Port)
}

func TestStoppingAServerTwiceIsHarmless(t *testing.T) {
	s := pgtest.Start(t)
	for i := range 2 {
		if err := s.Stop(); err != nil {
			t.Fatalf("stop #%d: %v", i+1, err)
		}
	}
}
