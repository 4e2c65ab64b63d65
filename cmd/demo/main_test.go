package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/demo/load"
	"github.com/premigrate/premigrate/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// result is what one in-process run of the demo command left behind.
type result struct {
	code           int
	stdout, stderr string
}

func demo(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return demoCtx(ctx, vars, args...)
}

func demoCtx(ctx context.Context, vars map[string]string, args ...string) result {
	return demoStartedAt(ctx, time.Now(), vars, args...)
}

// demoStartedAt runs the demo command as a process that started at started.
func demoStartedAt(ctx context.Context, started time.Time, vars map[string]string, args ...string) result {
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, &env{
		Streams: cli.Streams{Out: &stdout, Err: &stderr},
		getenv:  func(k string) string { return vars[k] },
		started: started,
	})
	code := cli.ExitCode(err)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// logged is how s appears within the msg value of a log line: quotes and backslashes escaped.
func logged(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func schemaVersion(t *testing.T, dsn string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var v int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMigratePrintsEveryAppliedVersionWithItsDurationAndATimestamp(t *testing.T) {
	dsn := pgtest.NewDB(t)
	r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "3", "PREMIGRATE_IDENTITY": "abc123"}, "migrate")
	if r.code != exitOK {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	for v, name := range []string{"create_records", "add_records_author", "index_records_created_at"} {
		line := regexp.MustCompile(fmt.Sprintf(`(?m)^time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=INFO msg="applied version %d \(%s\) in [0-9.]+[µm]?s"$`, v+1, name))
		if !line.MatchString(r.stderr) {
			t.Errorf("no timestamped line for version %d with its duration in:\n%s", v+1, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, "3 version(s) applied, schema at version 3") {
		t.Errorf("no summary in:\n%s", r.stderr)
	}

	again := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "3"}, "migrate")
	if again.code != exitOK || !strings.Contains(again.stderr, "nothing to do") {
		t.Errorf("second run: exit %d:\n%s", again.code, again.stderr)
	}
}

func TestDestructiveMigrationExitsThreeNamingTheColumnUntilDataLossIsAccepted(t *testing.T) {
	dsn := pgtest.NewDB(t)
	vars := map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "5"}
	if r := demo(t, vars, "migrate"); r.code != exitOK {
		t.Fatalf("migrate to 5: exit %d\n%s", r.code, r.stderr)
	}

	vars["DEMO_VERSION"] = "7"
	r := demo(t, vars, "migrate")
	if r.code != exitRefused {
		t.Errorf("exit %d, want %d", r.code, exitRefused)
	}
	if !strings.Contains(r.stderr, "drops column records.source") || !strings.Contains(r.stderr, "SCHEMA_ACCEPT_DATA_LOSS=true") {
		t.Errorf("refusal does not name the dropped column and the way out:\n%s", r.stderr)
	}
	if v := schemaVersion(t, dsn); v != 5 {
		t.Errorf("schema at %d after the refusal, want 5", v)
	}

	vars["SCHEMA_ACCEPT_DATA_LOSS"] = "true"
	if r := demo(t, vars, "migrate"); r.code != exitOK {
		t.Errorf("with data loss accepted: exit %d\n%s", r.code, r.stderr)
	}
	if v := schemaVersion(t, dsn); v != 7 {
		t.Errorf("schema at %d, want 7", v)
	}
}

func TestMigrateExitCodes(t *testing.T) {
	dsn := pgtest.NewDB(t)
	unreachable := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", pgtest.FreePort(t))
	for _, tc := range []struct {
		name     string
		vars     map[string]string
		wantCode int
		wantLog  string
	}{
		{"missing DATABASE_URL", map[string]string{}, exitUsage, "DATABASE_URL is required"},
		{"DEMO_VERSION not a number", map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "two"}, exitUsage, `DEMO_VERSION="two"`},
		{"DEMO_VERSION beyond the newest migration", map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "9"}, exitUsage, "not between 1 and 8"},
		{"SCHEMA_ACCEPT_DATA_LOSS not a boolean", map[string]string{"DATABASE_URL": dsn, "SCHEMA_ACCEPT_DATA_LOSS": "yes please"}, exitUsage, "want true or false"},
		{"bad MIGRATE_CONNECT_TIMEOUT", map[string]string{"DATABASE_URL": dsn, "MIGRATE_CONNECT_TIMEOUT": "soon"}, exitUsage, "MIGRATE_CONNECT_TIMEOUT"},
		{"database unreachable until the deadline", map[string]string{"DATABASE_URL": unreachable, "MIGRATE_CONNECT_TIMEOUT": "500ms"}, exitFailure, "could not connect to the database within 500ms"},
		{"injected failure", map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "2", "DEMO_FAIL_MIGRATION": "2"}, exitFailure, "injected failure in migration 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := demo(t, tc.vars, "migrate")
			if r.code != tc.wantCode || !strings.Contains(r.stderr, logged(tc.wantLog)) {
				t.Errorf("exit %d, want %d with %q in:\n%s", r.code, tc.wantCode, tc.wantLog, r.stderr)
			}
		})
	}
}

func TestMigrateStatusExitsZeroOnlyWhenTheSchemaEqualsDemoVersion(t *testing.T) {
	dsn := pgtest.NewDB(t)
	if r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "3"}, "migrate"); r.code != exitOK {
		t.Fatalf("migrate to 3: exit %d\n%s", r.code, r.stderr)
	}
	for _, tc := range []struct {
		demoVersion string
		wantCode    int
		wantOut     string
	}{
		{"2", exitFailure, "schema version: 3, expected: 2 (not up to date)"},
		{"3", exitOK, "schema version: 3, expected: 3 (up to date)"},
		{"4", exitFailure, "schema version: 3, expected: 4 (not up to date)"},
	} {
		t.Run("DEMO_VERSION="+tc.demoVersion, func(t *testing.T) {
			r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": tc.demoVersion}, "migrate", "status")
			if r.code != tc.wantCode || !strings.Contains(r.stdout, tc.wantOut) {
				t.Errorf("exit %d, stdout %q; want exit %d, %q", r.code, r.stdout, tc.wantCode, tc.wantOut)
			}
		})
	}

	empty := pgtest.NewDB(t)
	if r := demo(t, map[string]string{"DATABASE_URL": empty}, "migrate", "status"); r.code != exitFailure || !strings.Contains(r.stdout, "schema version: 0, expected: 1") {
		t.Errorf("on an empty database: exit %d, stdout %q", r.code, r.stdout)
	}
	unreachable := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", pgtest.FreePort(t))
	if r := demo(t, map[string]string{"DATABASE_URL": unreachable, "MIGRATE_CONNECT_TIMEOUT": "2s"}, "migrate", "status"); r.code != exitFailure {
		t.Errorf("without a database: exit %d, want %d\n%s", r.code, exitFailure, r.stderr)
	}
}

func TestMigrateCheckExitsZeroOnlyWhenTheSchemaHasDemoVersionsMigrations(t *testing.T) {
	dsn := pgtest.NewDB(t)
	if r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "3"}, "migrate"); r.code != exitOK {
		t.Fatalf("migrate to 3: exit %d\n%s", r.code, r.stderr)
	}
	for _, tc := range []struct {
		demoVersion string
		wantCode    int
		wantOut     string
	}{
		{"2", exitOK, "schema version: 3, expected: 2 (has its migrations)"},
		{"3", exitOK, "schema version: 3, expected: 3 (has its migrations)"},
		{"4", exitFailure, "schema version: 3, expected: 4 (does not have its migrations)"},
	} {
		t.Run("DEMO_VERSION="+tc.demoVersion, func(t *testing.T) {
			r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": tc.demoVersion}, "migrate", "check")
			if r.code != tc.wantCode || !strings.Contains(r.stdout, tc.wantOut) {
				t.Errorf("exit %d, stdout %q; want exit %d, %q", r.code, r.stdout, tc.wantCode, tc.wantOut)
			}
			if tc.wantCode != exitOK && !strings.Contains(r.stderr, "schema version 3 is older than this build's 4") {
				t.Errorf("stderr does not say why:\n%s", r.stderr)
			}
		})
	}
}

func TestHelpDocumentsEveryFlagAndEnvironmentVariable(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"demo migrate", "demo migrate status", "demo serve", "demo report", "demo load", "demo contract"}},
		{[]string{"contract", "--help"}, []string{"DATABASE_URL", "DEMO_VERSION", "PREMIGRATE_IDENTITY", "CONTRACT_TIMEOUT", "demo_contracts"}},
		{[]string{"migrate", "--help"}, []string{"DATABASE_URL", "DEMO_VERSION", "SCHEMA_ACCEPT_DATA_LOSS", "DEMO_FAIL_MIGRATION", "DEMO_REFUSE_NEWER_SCHEMA", "MIGRATE_CONNECT_TIMEOUT", "PREMIGRATE_IDENTITY", "3  refused", "started_at, finished_at"}},
		{[]string{"migrate", "status", "-h"}, []string{"DATABASE_URL", "DEMO_VERSION", "MIGRATE_CONNECT_TIMEOUT"}},
		{[]string{"migrate", "check", "-h"}, []string{"DATABASE_URL", "DEMO_VERSION", "MIGRATE_CONNECT_TIMEOUT"}},
		{[]string{"serve", "--help"}, []string{"DATABASE_URL", "DEMO_VERSION", "LISTEN_ADDR", "SHUTDOWN_DELAY", "POD_NAME", "PREMIGRATE_IDENTITY", "demo_pod_starts", "/healthz", "/readyz", "POST /records", "GET  /records/{id}"}},
		{[]string{"report", "--help"}, []string{"DATABASE_URL", "DEMO_VERSION", "POD_NAME", "PREMIGRATE_IDENTITY", "REPORT_TIMEOUT", "demo_pod_starts"}},
		{[]string{"load", "--help"}, []string{"-target", "-rate", "-duration", "-report-addr", "-timeout", "GET  /report", "POST /stop", "longestGapMs"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := demo(t, nil, tc.args...)
			if r.code != exitOK {
				t.Errorf("exit %d, want 0", r.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("help lacks %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}

func TestUsageMistakesExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"migrate", "--no-such-flag"},
		{"migrate", "status", "extra"},
		{"serve", "extra"},
		{"report", "extra"},
		{"contract", "extra"},
		{"contract"},
		{"load"},
		{"load", "--target", "localhost:8080"},
		{"load", "--target", "http://localhost", "--rate", "fast"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if r := demo(t, nil, args...); r.code != exitUsage {
				t.Errorf("exit %d, want %d\n%s", r.code, exitUsage, r.stderr)
			}
		})
	}
}

func TestServeAnswersUntilSignalledThenLoadReportsNoFailure(t *testing.T) {
	dsn := pgtest.NewDB(t)
	if r := demo(t, map[string]string{"DATABASE_URL": dsn}, "migrate"); r.code != exitOK {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	served := make(chan result, 1)
	go func() {
		served <- demoCtx(ctx, map[string]string{"DATABASE_URL": dsn, "LISTEN_ADDR": addr, "SHUTDOWN_DELAY": "300ms"}, "serve")
	}()

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready after 30s (last error %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	r := demo(t, nil, "load", "--target", "http://"+addr, "--rate", "40", "--duration", "1s", "--report-addr", "")
	if r.code != exitOK {
		t.Fatalf("load: exit %d\n%s", r.code, r.stderr)
	}
	var report load.Report
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
		t.Fatalf("load printed no JSON report: %v\n%s", err, r.stdout)
	}
	if report.Sent < 40 || report.Failed != 0 {
		t.Errorf("load report %+v: want at least 40 requests, none failed", report)
	}

	sigterm()
	select {
	case s := <-served:
		if s.code != exitOK || !strings.Contains(s.stderr, "shutdown complete") {
			t.Errorf("serve: exit %d\n%s", s.code, s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after the signal")
	}
}

func TestMigrateRefusesASchemaNewerThanDemoVersionOnlyWhenAskedTo(t *testing.T) {
	dsn := pgtest.NewDB(t)
	if r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "3"}, "migrate"); r.code != exitOK {
		t.Fatalf("migrate to 3: exit %d\n%s", r.code, r.stderr)
	}
	for _, tc := range []struct {
		name        string
		demoVersion string
		refuse      string
		wantCode    int
		wantLine    string // the msg of a whole log line
		wantNewRuns int
	}{
		{"refusing, schema newer", "2", "true", exitFailure,
			"migrate: database schema version 3 is newer than this migration's target 2: refusing to run an older migration against a newer schema (DEMO_REFUSE_NEWER_SCHEMA=true)", 0},
		{"refusing, schema at the target", "3", "true", exitOK, "schema is at version 3, the target: nothing to do", 1},
		{"not refusing by default, schema newer", "2", "", exitOK, "schema is at version 3, ahead of target 2: nothing to do", 1},
		{"explicitly not refusing, schema newer", "1", "false", exitOK, "schema is at version 3, ahead of target 1: nothing to do", 1},
		{"not a boolean", "2", "maybe", exitUsage, `migrate: configuration error: DEMO_REFUSE_NEWER_SCHEMA="maybe": want true or false`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runs(t, dsn)
			r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": tc.demoVersion, "DEMO_REFUSE_NEWER_SCHEMA": tc.refuse}, "migrate")
			line := regexp.MustCompile(`(?m)^time=\S+ level=[A-Z]+ msg=` + regexp.QuoteMeta(strconv.Quote(tc.wantLine)) + `$`)
			if r.code != tc.wantCode || !line.MatchString(r.stderr) {
				t.Errorf("exit %d, want %d with the line %q in:\n%s", r.code, tc.wantCode, tc.wantLine, r.stderr)
			}
			if got := runs(t, dsn) - before; got != tc.wantNewRuns {
				t.Errorf("%d runs recorded, want %d", got, tc.wantNewRuns)
			}
			if v := schemaVersion(t, dsn); v != 3 {
				t.Errorf("schema at %d, want 3", v)
			}
		})
	}
}

func runs(t *testing.T, dsn string) int {
	t.Helper()
	return queryInt(t, dsn, "SELECT count(*) FROM demo_migrate_runs")
}

func queryInt(t *testing.T, dsn, sql string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var n int
	if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// waitHTTP polls url until it answers want, for up to 30 s.
func waitHTTP(t *testing.T, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer %d after 30s (last error %v)", url, want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestServeRecordsItsStartOnceEvenOnADatabaseNoMigrationTouched(t *testing.T) {
	dsn := pgtest.NewDB(t)
	addr := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	started := time.Now().Add(-1500 * time.Millisecond)
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	served := make(chan result, 1)
	go func() {
		served <- demoStartedAt(ctx, started, map[string]string{
			"DATABASE_URL": dsn, "LISTEN_ADDR": addr, "SHUTDOWN_DELAY": "0s", "DEMO_VERSION": "2",
			"POD_NAME": "demo-7d4f-x2x9z", "HOSTNAME": "not-this-one", "PREMIGRATE_IDENTITY": "id-42",
		}, "serve")
	}()
	// Unmigrated: the app serves, is not ready, and records its start all the same.
	waitHTTP(t, "http://"+addr+"/healthz", http.StatusOK)
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable)
	deadline := time.Now().Add(30 * time.Second)
	for queryInt(t, dsn, "SELECT count(*) FROM pg_tables WHERE tablename = 'demo_pod_starts'") == 0 ||
		queryInt(t, dsn, "SELECT count(*) FROM demo_pod_starts") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no row in demo_pod_starts 30s after serve started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Later migrations and probes do not add rows: one per process.
	if r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "2"}, "migrate"); r.code != exitOK {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK)
	sigterm()
	var s result
	select {
	case s = <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after the signal")
	}
	if s.code != exitOK {
		t.Errorf("serve: exit %d\n%s", s.code, s.stderr)
	}
	if n := strings.Count(s.stderr, `msg="witness: pod demo-7d4f-x2x9z version 2 saw schema 0"`+"\n"); n != 1 {
		t.Errorf("the witness line appears %d times, want once:\n%s", n, s.stderr)
	}

	ctx2 := context.Background()
	conn, err := pgx.Connect(ctx2, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx2) }()
	var (
		n, appVersion, seen int
		pod, identity       string
		processStarted      time.Time
		beforeConnect       bool
	)
	err = conn.QueryRow(ctx2, `SELECT count(*) OVER (), pod, identity, app_version, schema_seen, process_started_at,
		process_started_at < connected_at FROM demo_pod_starts`).Scan(&n, &pod, &identity, &appVersion, &seen, &processStarted, &beforeConnect)
	if err != nil {
		t.Fatalf("read demo_pod_starts: %v", err)
	}
	if n != 1 || pod != "demo-7d4f-x2x9z" || identity != "id-42" || appVersion != 2 || seen != 0 {
		t.Errorf("demo_pod_starts holds %d row(s), the first: pod %q, identity %q, app_version %d, schema_seen %d; want 1: demo-7d4f-x2x9z, id-42, 2, 0",
			n, pod, identity, appVersion, seen)
	}
	if want := started.Truncate(time.Millisecond); !processStarted.Equal(want) || !beforeConnect {
		t.Errorf("process_started_at is %s (before connected_at: %v), want %s, the process's start", processStarted, beforeConnect, want)
	}
}

func TestServeWithoutADatabaseServesAndShutsDownCleanlyWithoutItsWitnessRow(t *testing.T) {
	unreachable := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pgtest.FreePort(t))
	addr := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	served := make(chan result, 1)
	go func() {
		served <- demoCtx(ctx, map[string]string{"DATABASE_URL": unreachable, "LISTEN_ADDR": addr, "SHUTDOWN_DELAY": "0s"}, "serve")
	}()
	waitHTTP(t, "http://"+addr+"/healthz", http.StatusOK)
	time.Sleep(time.Second) // a few failed witness attempts
	sigterm()
	select {
	case s := <-served:
		if s.code != exitOK {
			t.Errorf("serve: exit %d\n%s", s.code, s.stderr)
		}
		if n := strings.Count(s.stderr, "witness: cannot record the start"); n != 1 {
			t.Errorf("the repeated witness failure was logged %d times, want once:\n%s", n, s.stderr)
		}
		if !strings.Contains(s.stderr, "witness: not recorded: ") {
			t.Errorf("serve does not say the witness gave up:\n%s", s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after the signal")
	}
}

func TestThePodNameIsPodNameElseHostname(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"both set", map[string]string{"POD_NAME": "pod-a", "HOSTNAME": "host-b"}, "pod-a"},
		{"only POD_NAME", map[string]string{"POD_NAME": "pod-a"}, "pod-a"},
		{"only HOSTNAME", map[string]string{"HOSTNAME": "host-b"}, "host-b"},
		{"neither: the system's host name", map[string]string{}, host},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podName(func(k string) string { return tc.vars[k] }); got != tc.want {
				t.Errorf("pod name %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMigrateStoppedBySIGTERMHalfwayExitsZeroOnlyWhenAskedTo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		exit0    string
		wantCode int
	}{
		{name: "as a tool that traps SIGTERM and exits cleanly", exit0: "true", wantCode: exitOK},
		{name: "by default it fails", exit0: "", wantCode: exitFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(2*time.Second, cancel) // SIGTERM while version 1 sleeps in its transaction
			r := demoCtx(ctx, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "2", "DEMO_MIGRATION_DELAY": "30s",
				"DEMO_EXIT_0_ON_SIGTERM": tc.exit0}, "migrate")
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.wantCode, r.stderr)
			}
			if v := schemaVersion(t, dsn); v != 0 {
				t.Errorf("schema at %d: the stopped run must have applied nothing", v)
			}
		})
	}
}

func TestReportRecordsItsStartAndFailsOnASchemaOlderThanItsVersion(t *testing.T) {
	dsn := pgtest.NewDB(t)
	envs := map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "2", "POD_NAME": "report-1", "PREMIGRATE_IDENTITY": "abc"}
	if r := demo(t, envs, "report"); r.code != exitFailure || !strings.Contains(r.stderr, "schema 0 is older than DEMO_VERSION 2") {
		t.Errorf("report on an unmigrated database: exit %d, want %d naming the schema\n%s", r.code, exitFailure, r.stderr)
	}
	if r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "2"}, "migrate"); r.code != exitOK {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	envs["POD_NAME"] = "report-2"
	if r := demo(t, envs, "report"); r.code != exitOK || r.stdout != "report: 0 records on schema 2\n" {
		t.Errorf("report on schema 2: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	if got := queryInt(t, dsn, "SELECT count(*) FROM demo_pod_starts WHERE identity = 'abc' AND pod IN ('report-1', 'report-2')"); got != 2 {
		t.Errorf("demo_pod_starts has %d rows of the two reports, want 2 (each start, failed or not)", got)
	}
}
