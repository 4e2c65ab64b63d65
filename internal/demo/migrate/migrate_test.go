package migrate_test

import (
	"bytes"
	"context"
	"errors"
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

	observer := connect(t, dsn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		err := observer.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d runs wait for the lock after 30s", waiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
		{"target beyond the newest migration", dsn, 8, "not between 1 and 7"},
		{"target zero", dsn, 0, "not between 1 and 7"},
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := migrate.Run(ctx, slow); err == nil {
		t.Fatal("a run cancelled during its 30 s migration reported success")
	}
	conn := connect(t, dsn)
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
}
