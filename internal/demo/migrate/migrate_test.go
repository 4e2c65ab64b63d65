package migrate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/premigrate/premigrate/internal/demo/migrate"
	"github.com/premigrate/premigrate/internal/demo/schema"
	"github.com/premigrate/premigrate/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// logBuffer collects log lines from concurrent runs.
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

func config(dsn string, target int, logs *logBuffer) migrate.Config {
	return migrate.Config{
		DatabaseURL:    dsn,
		Target:         target,
		ConnectTimeout: 10 * time.Second,
		Identity:       "test-identity",
		Logger:         log.New(logs, "", log.LstdFlags|log.Lmicroseconds),
	}
}

func run(t *testing.T, cfg migrate.Config) migrate.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := migrate.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("migrate to %d: %v", cfg.Target, err)
	}
	return res
}

func versions(res migrate.Result) []int {
	var vs []int
	for _, a := range res.Applied {
		vs = append(vs, a.Version)
	}
	return vs
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

func schemaVersion(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	v, err := schema.Version(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func queryInts(t *testing.T, conn *pgx.Conn, sql string) []int {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return vs
}

func exists(t *testing.T, conn *pgx.Conn, sql string) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), "SELECT EXISTS ("+sql+")").Scan(&ok); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return ok
}

const (
	sourceColumn = "SELECT 1 FROM information_schema.columns WHERE table_name = 'records' AND column_name = 'source'"
	tagsTable    = "SELECT 1 FROM information_schema.tables WHERE table_name = 'tags'"
	notesTable   = "SELECT 1 FROM information_schema.tables WHERE table_name = 'notes'"
	recordsTable = "SELECT 1 FROM information_schema.tables WHERE table_name = 'records'"
)

func TestMigrationsApplyInOrderAndRunningAgainChangesNothing(t *testing.T) {
	dsn := pgtest.NewDB(t)
	var logs logBuffer

	steps := []struct {
		target      int
		wantApplied []int
	}{
		{2, []int{1, 2}},
		{5, []int{3, 4, 5}},
		{5, nil},
		{5, nil},
	}
	for _, step := range steps {
		res := run(t, config(dsn, step.target, &logs))
		if got := versions(res); !slices.Equal(got, step.wantApplied) {
			t.Fatalf("migrating to %d applied %v, want %v", step.target, got, step.wantApplied)
		}
		if res.To != step.target {
			t.Errorf("migrating to %d left the schema at %d", step.target, res.To)
		}
	}

	conn := connect(t, dsn)
	if got := queryInts(t, conn, "SELECT version FROM schema_migrations ORDER BY applied_at, version"); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Errorf("schema_migrations holds %v, want 1..5 applied in order", got)
	}
	if got := queryInts(t, conn, "SELECT count(*) FROM schema_migrations WHERE duration_ms IS NULL OR duration_ms < 0"); got[0] != 0 {
		t.Errorf("%d versions have no duration", got[0])
	}
	if !exists(t, conn, tagsTable) || !exists(t, conn, sourceColumn) {
		t.Errorf("version 5 schema is incomplete: tags table or records.source missing")
	}
	var runs []string
	rows, err := conn.Query(context.Background(), "SELECT identity || ':' || array_to_string(applied, ',') FROM demo_migrate_runs ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if runs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if want := []string{"test-identity:1,2", "test-identity:3,4,5", "test-identity:", "test-identity:"}; !slices.Equal(runs, want) {
		t.Errorf("demo_migrate_runs holds %q, want %q", runs, want)
	}
	for _, line := range []string{"applied version 1 (create_records) in ", "applied version 5 (add_records_source) in ", "nothing to do"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, logs.String())
		}
	}
}

func TestSchemaAheadOfTheTargetIsLeftAlone(t *testing.T) {
	dsn := pgtest.NewDB(t)
	var logs logBuffer
	run(t, config(dsn, 5, &logs))
	res := run(t, config(dsn, 4, &logs))
	if res.From != 5 || res.To != 5 || len(res.Applied) != 0 {
		t.Errorf("migrating a version 5 schema to 4 gave %+v, want it left at 5", res)
	}
	if !strings.Contains(logs.String(), "ahead of target 4") {
		t.Errorf("log does not say the schema is ahead:\n%s", logs.String())
	}
}

func TestConcurrentRunsAreSerializedByTheAdvisoryLockAndApplyEachVersionOnce(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := context.Background()

	// Hold the lock so both runs are certainly waiting on it at the same time.
	holder := connect(t, dsn)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", migrate.LockKey); err != nil {
		t.Fatal(err)
	}

	var logs logBuffer
	results := make([]migrate.Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			cfg := config(dsn, 7, &logs)
			cfg.AcceptDataLoss = true
			results[i], errs[i] = migrate.Run(ctx, cfg)
		})
	}

	waitForLockWaiters(t, connect(t, dsn), 2)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", migrate.LockKey); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d failed: %v", i, err)
		}
	}
	all := append(versions(results[0]), versions(results[1])...)
	slices.Sort(all)
	if want := []int{1, 2, 3, 4, 5, 6, 7}; !slices.Equal(all, want) {
		t.Errorf("the two runs applied %v and %v together, want each of 1..7 exactly once", versions(results[0]), versions(results[1]))
	}
	if len(results[0].Applied) != 0 && len(results[1].Applied) != 0 {
		t.Errorf("both runs applied something (%v, %v): the second should find nothing to do", versions(results[0]), versions(results[1]))
	}
	conn := connect(t, dsn)
	if got := queryInts(t, conn, "SELECT version FROM schema_migrations ORDER BY version"); !slices.Equal(got, []int{1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("schema_migrations holds %v", got)
	}
	if !exists(t, conn, notesTable) || exists(t, conn, sourceColumn) {
		t.Errorf("schema is not version 7: notes table missing or records.source still there")
	}
	if got := strings.Count(logs.String(), "another migration run holds the lock; waiting for it"); got != 2 {
		t.Errorf("%d runs logged that they wait for the lock, want 2:\n%s", got, logs.String())
	}
}

func TestDestructiveMigrationIsRefusedBeforeAnythingIsAppliedUnlessDataLossIsAccepted(t *testing.T) {
	dsn := pgtest.NewDB(t)
	var logs logBuffer
	run(t, config(dsn, 4, &logs))
	conn := connect(t, dsn)

	_, err := migrate.Run(context.Background(), config(dsn, 7, &logs))
	var refused *migrate.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("got error %v, want a refusal", err)
	}
	if !strings.Contains(err.Error(), "drops column records.source") || !strings.Contains(err.Error(), "version 6") {
		t.Errorf("refusal %q does not name version 6 and the column it drops", err)
	}
	if v := schemaVersion(t, conn); v != 4 {
		t.Errorf("after the refusal the schema is at %d, want 4: version 5 precedes the destructive one but must not be applied either", v)
	}
	if exists(t, conn, sourceColumn) {
		t.Errorf("records.source exists: version 5 was applied despite the refusal")
	}

	cfg := config(dsn, 7, &logs)
	cfg.AcceptDataLoss = true
	res := run(t, cfg)
	if got := versions(res); !slices.Equal(got, []int{5, 6, 7}) {
		t.Errorf("with data loss accepted applied %v, want [5 6 7]", got)
	}
	if exists(t, conn, sourceColumn) || !exists(t, conn, notesTable) {
		t.Errorf("schema is not version 7 after accepting data loss")
	}
}

func TestAnInjectedFailureRollsBackItsMigrationAndLeavesThePreviousVersion(t *testing.T) {
	for _, tc := range []struct {
		name        string
		failVersion int
		leftover    string // a query that finds what the failed migration created
	}{
		{"first version", 1, recordsTable},
		{"table with an index", 4, tagsTable},
		{"added column", 5, sourceColumn},
		{"last version", 7, notesTable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			var logs logBuffer
			if tc.failVersion > 1 {
				prep := config(dsn, tc.failVersion-1, &logs)
				prep.AcceptDataLoss = true
				run(t, prep)
			}
			conn := connect(t, dsn)
			var before int
			if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM demo_migrate_runs").Scan(&before); err != nil && tc.failVersion > 1 {
				t.Fatal(err)
			}

			cfg := config(dsn, 7, &logs)
			cfg.AcceptDataLoss = true
			cfg.FailVersion = tc.failVersion
			_, err := migrate.Run(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), "injected failure") {
				t.Fatalf("got error %v, want the injected failure", err)
			}
			if v := schemaVersion(t, conn); v != tc.failVersion-1 {
				t.Errorf("schema at %d after the failure, want %d", v, tc.failVersion-1)
			}
			if exists(t, conn, tc.leftover) {
				t.Errorf("the DDL of failed migration %d survived the rollback", tc.failVersion)
			}
			var after int
			if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM demo_migrate_runs").Scan(&after); err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Errorf("a failed run was recorded in demo_migrate_runs")
			}

			cfg.FailVersion = 0
			if res := run(t, cfg); res.To != 7 || res.From != tc.failVersion-1 {
				t.Errorf("a clean retry went from %d to %d, want %d to 7", res.From, res.To, tc.failVersion-1)
			}
		})
	}
}

func TestConnectionRetrySurvivesADatabaseThatStartsLate(t *testing.T) {
	server := pgtest.Prepare(t)
	var logs logBuffer
	cfg := config(server.DSN("postgres"), 3, &logs)
	cfg.ConnectTimeout = time.Minute

	done := make(chan error, 1)
	go func() {
		_, err := migrate.Run(context.Background(), cfg)
		done <- err
	}()
	time.Sleep(1500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("migrate finished before the database started: %v", err)
	default:
	}
	server.Launch(t)

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("migrate failed after the database came up: %v\n%s", err, logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("migrate did not finish within a minute of the database starting")
	}
	for _, line := range []string{"database not reachable yet (attempt 1)", "connected to the database after", "applied version 3"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, logs.String())
		}
	}
}

func TestConnectionRetryGivesUpClearlyAfterTheDeadline(t *testing.T) {
	server := pgtest.Prepare(t) // never launched: nothing listens on its port
	var logs logBuffer
	cfg := config(server.DSN("postgres"), 1, &logs)
	cfg.ConnectTimeout = 1500 * time.Millisecond

	start := time.Now()
	_, err := migrate.Run(context.Background(), cfg)
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("migrate succeeded without a database")
	}
	if !strings.Contains(err.Error(), "could not connect to the database within 1.5s") || !strings.Contains(err.Error(), "connect") {
		t.Errorf("error %q does not say the connection deadline passed", err)
	}
	if elapsed < 1500*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("gave up after %s, want about 1.5s", elapsed)
	}
	if n := strings.Count(logs.String(), "database not reachable yet"); n < 2 {
		t.Errorf("only %d retries logged:\n%s", n, logs.String())
	}
}

func TestBadConfigurationFailsAtOnceWithAConfigError(t *testing.T) {
	dsn := pgtest.NewDB(t)
	for _, tc := range []struct {
		name    string
		dsn     string
		target  int
		wantErr string
	}{
		{"target beyond the newest migration", dsn, 9, "not between 1 and 8"},
		{"target zero", dsn, 0, "not between 1 and 8"},
		{"malformed database URL", "postgres://%zz", 1, "parse DATABASE_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			cfg := config(tc.dsn, tc.target, &logs)
			cfg.ConnectTimeout = time.Minute
			start := time.Now()
			_, err := migrate.Run(context.Background(), cfg)
			var cfgErr *migrate.ConfigError
			if !errors.As(err, &cfgErr) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want a configuration error containing %q", err, tc.wantErr)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("a configuration error took %s: it must not be retried", time.Since(start))
			}
		})
	}
}

func TestStatusComparesTheSchemaVersionWithTheExpectedOne(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := context.Background()
	st, err := migrate.CheckStatus(ctx, dsn, 2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Current != 0 || st.UpToDate() {
		t.Errorf("an empty database reports %+v, want version 0, not up to date", st)
	}
	var logs logBuffer
	run(t, config(dsn, 2, &logs))
	for _, tc := range []struct {
		expected int
		upToDate bool
	}{{1, false}, {2, true}, {3, false}} {
		st, err := migrate.CheckStatus(ctx, dsn, tc.expected, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if st.Current != 2 || st.UpToDate() != tc.upToDate {
			t.Errorf("expecting %d on a version 2 schema: got %+v (up to date %v), want up to date %v", tc.expected, st, st.UpToDate(), tc.upToDate)
		}
	}
}

func TestARunKilledDuringASlowMigrationLeavesNothingHalfAppliedAndTheRetryAppliesItOnce(t *testing.T) {
	dsn := pgtest.NewDB(t)
	logs := &logBuffer{}
	run(t, config(dsn, 1, logs))

	slow := config(dsn, 2, logs)
	slow.Delay = 30 * time.Second
	conn := connect(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := migrate.Run(ctx, slow)
		done <- err
	}()
	// killed once it started applying (its start is committed), inside the 30 s migration
	for deadline := time.Now().Add(20 * time.Second); len(queryInts(t, conn, "SELECT id FROM "+migrate.StartsTable)) < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the slow run did not start applying within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a run cancelled during its 30 s migration reported success")
	}
	var author int
	if err := conn.QueryRow(context.Background(),
		"select count(*) from information_schema.columns where table_name='records' and column_name='author'").Scan(&author); err != nil {
		t.Fatalf("reading the columns: %v", err)
	}
	if author != 0 {
		t.Fatal("records.author exists after the killed run: the migration was half-applied")
	}
	res := run(t, config(dsn, 2, logs))
	if got := versions(res); !slices.Equal(got, []int{2}) {
		t.Errorf("the retry applied %v, want [2]", got)
	}
	// every run that started applying left its start, the killed one too; only finished runs are in RunsTable
	starts := queryInts(t, conn, "SELECT array_length(pending, 1) FROM "+migrate.StartsTable+" ORDER BY id")
	if !slices.Equal(starts, []int{1, 1, 1}) || runCount(t, conn) != 2 {
		t.Errorf("%s holds starts pending %v and %s %d runs, want 3 starts (the first, the killed, the retry) and 2 runs",
			migrate.StartsTable, starts, migrate.RunsTable, runCount(t, conn))
	}
	// a run with nothing pending starts nothing
	run(t, config(dsn, 2, logs))
	if n := len(queryInts(t, conn, "SELECT id FROM "+migrate.StartsTable)); n != 3 {
		t.Errorf("%s holds %d starts after a run with nothing pending, want 3", migrate.StartsTable, n)
	}
}

func runCount(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+migrate.RunsTable).Scan(&n); err != nil {
		t.Fatalf("count runs: %v", err)
	}
	return n
}

func TestARunThatRefusesNewerSchemasFailsOnlyOnASchemaBeyondItsTargetAndThenChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name        string
		schema      int // the version the database is at before the run
		target      int
		refuse      bool
		wantRefusal bool
		wantTo      int
	}{
		{"refusing, schema newer than the target", 3, 2, true, true, 3},
		{"refusing, schema two versions newer", 5, 3, true, true, 5},
		{"refusing, schema at the target", 2, 2, true, false, 2},
		{"refusing, schema older than the target", 1, 2, true, false, 2},
		{"not refusing, schema newer than the target", 3, 2, false, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			var logs logBuffer
			run(t, config(dsn, tc.schema, &logs))
			conn := connect(t, dsn)
			runsBefore := runCount(t, conn)

			cfg := config(dsn, tc.target, &logs)
			cfg.RefuseNewerSchema = tc.refuse
			res, err := migrate.Run(context.Background(), cfg)

			if !tc.wantRefusal {
				if err != nil {
					t.Fatalf("run failed: %v", err)
				}
				if res.To != tc.wantTo || schemaVersion(t, conn) != tc.wantTo {
					t.Errorf("schema at %d (result %+v), want %d", schemaVersion(t, conn), res, tc.wantTo)
				}
				if got := runCount(t, conn); got != runsBefore+1 {
					t.Errorf("%s holds %d runs after the run, want %d", migrate.RunsTable, got, runsBefore+1)
				}
				return
			}
			var newer *migrate.NewerSchemaError
			if !errors.As(err, &newer) || !migrate.IsNewerSchema(err) || newer.Schema != tc.schema || newer.Target != tc.target {
				t.Fatalf("got error %v, want a *NewerSchemaError for schema %d, target %d", err, tc.schema, tc.target)
			}
			want := fmt.Sprintf("database schema version %d is newer than this migration's target %d: refusing to run an older migration against a newer schema (DEMO_REFUSE_NEWER_SCHEMA=true)", tc.schema, tc.target)
			if err.Error() != want {
				t.Errorf("refusal reads %q, want %q", err, want)
			}
			if len(res.Applied) != 0 || schemaVersion(t, conn) != tc.schema {
				t.Errorf("the refused run applied %v, schema at %d: want nothing applied, schema at %d", versions(res), schemaVersion(t, conn), tc.schema)
			}
			if got := runCount(t, conn); got != runsBefore {
				t.Errorf("%s holds %d runs after the refusal, want %d: a refused run must not be recorded", migrate.RunsTable, got, runsBefore)
			}
		})
	}
}

func TestTheNewerSchemaCheckReadsTheVersionOnlyOnceTheLockIsHeld(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := context.Background()
	var logs logBuffer
	run(t, config(dsn, 2, &logs))

	holder := connect(t, dsn)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", migrate.LockKey); err != nil {
		t.Fatal(err)
	}
	cfg := config(dsn, 2, &logs)
	cfg.RefuseNewerSchema = true
	done := make(chan error, 1)
	go func() {
		_, err := migrate.Run(ctx, cfg)
		done <- err
	}()
	waitForLockWaiters(t, connect(t, dsn), 1)
	// While the run waits, a newer run (holding the lock) moves the schema to version 3.
	if _, err := holder.Exec(ctx, "INSERT INTO schema_migrations (version, duration_ms) VALUES (3, 0)"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", migrate.LockKey); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var newer *migrate.NewerSchemaError
		if !errors.As(err, &newer) || newer.Schema != 3 || newer.Target != 2 {
			t.Errorf("got error %v, want a refusal of schema 3 for target 2: the version must be read under the lock", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not finish within 30s of the lock's release")
	}
}

// waitForLockWaiters waits until n sessions of the database wait for an advisory lock.
func waitForLockWaiters(t *testing.T, observer *pgx.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		err := observer.QueryRow(context.Background(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for the lock after 30s, want %d", waiting, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestARunRecordsByTheDatabasesClockWhenItHeldTheLockAndWhenItFinished(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := context.Background()
	const delay = 300 * time.Millisecond

	holder := connect(t, dsn)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", migrate.LockKey); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	cfg := config(dsn, 2, &logs)
	cfg.Delay = delay
	type outcome struct {
		res migrate.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := migrate.Run(ctx, cfg)
		done <- outcome{res, err}
	}()
	waitForLockWaiters(t, connect(t, dsn), 1)
	time.Sleep(200 * time.Millisecond) // the run has been waiting a while: started_at must not be when it began to wait
	var released time.Time
	if err := holder.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&released); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", migrate.LockKey); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if out.err != nil {
		t.Fatalf("run failed: %v", out.err)
	}
	var after time.Time
	if err := holder.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&after); err != nil {
		t.Fatal(err)
	}

	var startedAt, finishedAt, lastApplied time.Time
	err := holder.QueryRow(ctx, `SELECT r.started_at, r.finished_at, (SELECT max(applied_at) FROM schema_migrations)
		FROM `+migrate.RunsTable+` r`).Scan(&startedAt, &finishedAt, &lastApplied)
	if err != nil {
		t.Fatalf("read the run: %v", err)
	}
	if startedAt.Before(released) {
		t.Errorf("started_at %s is before the lock was released at %s: it must be when the run held the lock", startedAt, released)
	}
	// Each of the two versions sleeps delay inside its transaction, after started_at.
	if d := finishedAt.Sub(startedAt); d < 2*delay {
		t.Errorf("finished_at is %s after started_at, want at least %s (two versions of %s each)", d, 2*delay, delay)
	}
	// applied_at is the start of the last version's transaction, which then slept delay.
	if d := finishedAt.Sub(lastApplied); d < delay {
		t.Errorf("finished_at is %s after the last version's transaction began, want at least %s: it must be the clock at the insert", d, delay)
	}
	if finishedAt.After(after) {
		t.Errorf("finished_at %s is after the run ended (%s)", finishedAt, after)
	}
	if !out.res.StartedAt.Equal(startedAt) || !out.res.FinishedAt.Equal(finishedAt) {
		t.Errorf("the result says started %s, finished %s; the table %s, %s", out.res.StartedAt, out.res.FinishedAt, startedAt, finishedAt)
	}
}

func TestARunsTableFromAnOlderBinaryGainsStartedAtAndKeepsItsRows(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := context.Background()
	conn := connect(t, dsn)
	// demo_migrate_runs as older binaries created it.
	_, err := conn.Exec(ctx, `
CREATE TABLE demo_migrate_runs (
    id          bigserial   PRIMARY KEY,
    identity    text,
    applied     integer[]   NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO demo_migrate_runs (identity, applied) VALUES ('old-run', '{}');`)
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	run(t, config(dsn, 1, &logs))

	rows, err := conn.Query(ctx, "SELECT identity || ':' || (started_at IS NOT NULL) || ':' || array_to_string(applied, ',') FROM demo_migrate_runs ORDER BY id")
	if err != nil {
		t.Fatalf("read runs: %v", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("read runs: %v", err)
	}
	if want := []string{"old-run:false:", "test-identity:true:1"}; !slices.Equal(got, want) {
		t.Errorf("runs (identity:has started_at:applied) are %q, want %q", got, want)
	}
	var def string
	if err := conn.QueryRow(ctx, "SELECT column_default FROM information_schema.columns WHERE table_name = 'demo_migrate_runs' AND column_name = 'finished_at'").Scan(&def); err != nil {
		t.Fatal(err)
	}
	if def != "clock_timestamp()" {
		t.Errorf("finished_at defaults to %s, want clock_timestamp()", def)
	}
}
