package witness_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/premigrate/premigrate/internal/demo/migrate"
	"github.com/premigrate/premigrate/internal/demo/witness"
	"github.com/premigrate/premigrate/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// logBuffer collects log lines written from another goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("create pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func dbClock(t *testing.T, conn *pgx.Conn) time.Time {
	t.Helper()
	var now time.Time
	if err := conn.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&now); err != nil {
		t.Fatalf("read the database clock: %v", err)
	}
	return now
}

// row is one demo_pod_starts row.
type row struct {
	id               int64
	pod, identity    *string
	appVersion, seen int
	processStartedAt time.Time
	connectedAt      time.Time
}

func rows(t *testing.T, conn *pgx.Conn) []row {
	t.Helper()
	rs, err := conn.Query(context.Background(),
		"SELECT id, pod, identity, app_version, schema_seen, process_started_at, connected_at FROM "+witness.Table+" ORDER BY id")
	if err != nil {
		t.Fatalf("read %s: %v", witness.Table, err)
	}
	got, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.id, &x.pod, &x.identity, &x.appVersion, &x.seen, &x.processStartedAt, &x.connectedAt)
		return x, err
	})
	if err != nil {
		t.Fatalf("read %s: %v", witness.Table, err)
	}
	return got
}

func deref(s *string) string {
	if s == nil {
		return "<NULL>"
	}
	return *s
}

func TestTheWitnessRecordsTheSchemaVersionTheAppSawMigratedOrNot(t *testing.T) {
	for _, tc := range []struct {
		name          string
		setup         string // SQL run before the witness
		migrateTo     int    // 0: no migration
		otherPodFirst bool   // another pod wrote its row (and created the table) before
		wantSeen      int
	}{
		{"empty database, before any migration", "", 0, false, 0},
		{"schema_migrations exists but is empty", "CREATE TABLE schema_migrations (version integer PRIMARY KEY)", 0, false, 0},
		{"schema at version 3", "", 3, false, 3},
		{"table already created by another pod", "", 2, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			conn := connect(t, dsn)
			if tc.setup != "" {
				if _, err := conn.Exec(context.Background(), tc.setup); err != nil {
					t.Fatalf("setup: %v", err)
				}
			}
			if tc.migrateTo > 0 {
				_, err := migrate.Run(context.Background(), migrate.Config{DatabaseURL: dsn, Target: tc.migrateTo, ConnectTimeout: 10 * time.Second})
				if err != nil {
					t.Fatalf("migrate to %d: %v", tc.migrateTo, err)
				}
			}
			pool := newPool(t, dsn)
			var before []row
			if tc.otherPodFirst {
				other := witness.Start{Pod: "other", AppVersion: 1, ProcessStartedAt: time.Now()}
				if _, err := witness.Write(context.Background(), conn, other); err != nil {
					t.Fatalf("the first pod's write: %v", err)
				}
				before = rows(t, conn)
			}

			rec, err := witness.Run(context.Background(), pool, witness.Start{Pod: "web-1", AppVersion: 2, ProcessStartedAt: time.Now()}, nil)
			if err != nil {
				t.Fatalf("witness: %v", err)
			}
			if rec.SchemaSeen != tc.wantSeen {
				t.Errorf("the witness saw schema %d, want %d", rec.SchemaSeen, tc.wantSeen)
			}
			got := rows(t, conn)
			if len(got) != len(before)+1 {
				t.Fatalf("%s holds %d rows, want %d", witness.Table, len(got), len(before)+1)
			}
			last := got[len(got)-1]
			if last.id != rec.ID || last.seen != tc.wantSeen || deref(last.pod) != "web-1" || last.appVersion != 2 {
				t.Errorf("the row is %+v (pod %s), want id %d, pod web-1, app_version 2, schema_seen %d", last, deref(last.pod), rec.ID, tc.wantSeen)
			}
		})
	}
}

func TestTheWitnessRowHoldsWhoStartedAndWhenByBothClocks(t *testing.T) {
	for _, tc := range []struct {
		name, pod, identity   string
		wantPod, wantIdentity string
	}{
		{"pod and identity known", "web-7f9c-abcde", "a1b2c3", "web-7f9c-abcde", "a1b2c3"},
		{"no identity records NULL", "web-2", "", "web-2", "<NULL>"},
		{"no pod name records NULL", "", "a1b2c3", "<NULL>", "a1b2c3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			conn := connect(t, dsn)
			var logs logBuffer
			// Sub-millisecond digits that the table must not keep.
			started := time.Date(2030, 1, 2, 3, 4, 5, 678_901_234, time.UTC)
			before := dbClock(t, conn)
			rec, err := witness.Run(context.Background(), newPool(t, dsn), witness.Start{
				Pod: tc.pod, Identity: tc.identity, AppVersion: 4, ProcessStartedAt: started.In(time.FixedZone("X", 3600)),
			}, log.New(&logs, "", 0))
			if err != nil {
				t.Fatalf("witness: %v", err)
			}
			after := dbClock(t, conn)

			got := rows(t, conn)
			if len(got) != 1 {
				t.Fatalf("%s holds %d rows, want 1", witness.Table, len(got))
			}
			r := got[0]
			if deref(r.pod) != tc.wantPod || deref(r.identity) != tc.wantIdentity || r.appVersion != 4 || r.seen != 0 {
				t.Errorf("pod %s, identity %s, app_version %d, schema_seen %d; want %s, %s, 4, 0",
					deref(r.pod), deref(r.identity), r.appVersion, r.seen, tc.wantPod, tc.wantIdentity)
			}
			if want := time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC); !r.processStartedAt.Equal(want) {
				t.Errorf("process_started_at is %s, want %s (the app's time, to the millisecond)", r.processStartedAt.UTC(), want)
			}
			if r.connectedAt.Before(before) || r.connectedAt.After(after) || !r.connectedAt.Equal(rec.ConnectedAt) {
				t.Errorf("connected_at is %s (returned %s), want the database's clock between %s and %s", r.connectedAt, rec.ConnectedAt, before, after)
			}
			if want := fmt.Sprintf("witness: pod %s version 4 saw schema 0\n", tc.pod); logs.String() != want {
				t.Errorf("logged %q, want %q", logs.String(), want)
			}
		})
	}
}

func TestPodsCreatingTheTableAtTheSameTimeAllRecordTheirStart(t *testing.T) {
	const pods = 8
	for round := range 3 {
		t.Run(fmt.Sprintf("round %d", round+1), func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			conns := make([]*pgx.Conn, pods)
			for i := range conns {
				conns[i] = connect(t, dsn)
			}
			gate := make(chan struct{})
			errs := make([]error, pods)
			var wg sync.WaitGroup
			for i, conn := range conns {
				wg.Go(func() {
					<-gate
					_, errs[i] = witness.Write(context.Background(), conn, witness.Start{
						Pod: fmt.Sprintf("pod-%d", i), AppVersion: 1, ProcessStartedAt: time.Now(),
					})
				})
			}
			close(gate)
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("a first write failed while others created the table: %v", err)
			}
			if got := len(rows(t, conns[0])); got != pods {
				t.Errorf("%s holds %d rows, want %d", witness.Table, got, pods)
			}
		})
	}
}

func TestTheWitnessRetriesUntilTheDatabaseComesUpAndLogsEachFailureOnce(t *testing.T) {
	server := pgtest.Prepare(t)
	var logs logBuffer
	pool := newPool(t, server.DSN("postgres"))
	type outcome struct {
		rec witness.Recorded
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		rec, err := witness.Run(context.Background(), pool, witness.Start{Pod: "late", AppVersion: 3, ProcessStartedAt: time.Now()}, log.New(&logs, "", 0))
		done <- outcome{rec, err}
	}()
	// Attempts at about 0, 0.2, 0.6 and 1.4 s all fail.
	time.Sleep(1500 * time.Millisecond)
	select {
	case out := <-done:
		t.Fatalf("the witness returned before the database started: %+v", out)
	default:
	}
	server.Launch(t)

	select {
	case out := <-done:
		if out.err != nil || out.rec.SchemaSeen != 0 {
			t.Fatalf("after the database came up: %+v\n%s", out, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the witness did not succeed within 30s of the database starting:\n%s", logs.String())
	}

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	seen := map[string]bool{}
	var failures int
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "witness: cannot record the start in demo_pod_starts yet") {
			t.Errorf("unexpected log line %q", l)
		}
		if seen[l] {
			t.Errorf("failure logged twice: %q", l)
		}
		seen[l] = true
		failures++
	}
	if failures == 0 || !strings.Contains(logs.String(), "connect") {
		t.Errorf("the failures to connect were not logged:\n%s", logs.String())
	}
	if last := lines[len(lines)-1]; last != "witness: pod late version 3 saw schema 0" {
		t.Errorf("last log line is %q, want the witness line", last)
	}
}

func TestTheWitnessStopsWhenItsContextEnds(t *testing.T) {
	unreachable := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pgtest.FreePort(t))
	var logs logBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := witness.Run(ctx, newPool(t, unreachable), witness.Start{Pod: "p", AppVersion: 1, ProcessStartedAt: start}, log.New(&logs, "", 0))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want the context's deadline", err)
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("returned %s after start, want about 1s", elapsed)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 {
		t.Errorf("logged %d lines for one repeated failure, want 1:\n%s", n, logs.String())
	}
}
