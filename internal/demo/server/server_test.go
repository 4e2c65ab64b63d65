package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/premigrate/premigrate/internal/demo/load"
	"github.com/premigrate/premigrate/internal/demo/migrate"
	"github.com/premigrate/premigrate/internal/demo/server"
	"github.com/premigrate/premigrate/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func migrateTo(t *testing.T, dsn string, version int) {
	t.Helper()
	_, err := migrate.Run(context.Background(), migrate.Config{
		DatabaseURL: dsn, Target: version, AcceptDataLoss: true, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("migrate to %d: %v", version, err)
	}
}

func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func testLogger(t *testing.T) *log.Logger {
	return log.New(testWriter{t}, "", log.Ltime|log.Lmicroseconds)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type readiness struct {
	Ready         bool   `json:"ready"`
	SchemaVersion *int   `json:"schemaVersion"`
	Reason        string `json:"reason"`
}

func getReadyz(t *testing.T, base string) (int, readiness) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var r readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("decode /readyz: %v", err)
	}
	return resp.StatusCode, r
}

func TestReadinessHoldsOnTheAppsSchemaVersionAndTheNextOneOnly(t *testing.T) {
	const appVersion = 3
	for _, tc := range []struct {
		name   string
		schema int
		ready  bool
	}{
		{"empty database", 0, false},
		{"schema below the app version", 2, false},
		{"schema equal to the app version", 3, true},
		{"schema one above", 4, true},
		{"schema two above", 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			if tc.schema > 0 {
				migrateTo(t, dsn, tc.schema)
			}
			srv := httptest.NewServer(server.New(server.Config{Pool: newPool(t, dsn), AppVersion: appVersion}).Handler())
			defer srv.Close()

			status, r := getReadyz(t, srv.URL)
			wantStatus := http.StatusServiceUnavailable
			if tc.ready {
				wantStatus = http.StatusOK
			}
			if status != wantStatus || r.Ready != tc.ready {
				t.Errorf("schema %d, app %d: /readyz answered %d %+v, want %d", tc.schema, appVersion, status, r, wantStatus)
			}
			if r.SchemaVersion == nil || *r.SchemaVersion != tc.schema {
				t.Errorf("/readyz reports schema version %v, want %d", r.SchemaVersion, tc.schema)
			}
		})
	}
}

func TestReadinessReadsTheSchemaVersionAtMostOncePerCachePeriod(t *testing.T) {
	const ttl = 2 * time.Second
	dsn := pgtest.NewDB(t)
	migrateTo(t, dsn, 1)
	srv := httptest.NewServer(server.New(server.Config{
		Pool: newPool(t, dsn), AppVersion: 1, ReadinessCacheTTL: ttl,
	}).Handler())
	defer srv.Close()

	cachedAt := time.Now() // no later than the read the first probe caches
	if status, _ := getReadyz(t, srv.URL); status != http.StatusOK {
		t.Fatalf("/readyz on schema 1 answered %d", status)
	}
	migrateTo(t, dsn, 3) // two versions ahead of the app: not ready any more
	if status, r := getReadyz(t, srv.URL); status != http.StatusOK || *r.SchemaVersion != 1 {
		t.Fatalf("%s after the first probe /readyz answered %d for schema %d: the version was read again", time.Since(cachedAt), status, *r.SchemaVersion)
	}
	for {
		status, r := getReadyz(t, srv.URL)
		if status == http.StatusServiceUnavailable && *r.SchemaVersion == 3 {
			break
		}
		if time.Since(cachedAt) > ttl+5*time.Second {
			t.Fatalf("/readyz still reports schema %d %s after the first probe", *r.SchemaVersion, time.Since(cachedAt))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if elapsed := time.Since(cachedAt); elapsed < ttl {
		t.Errorf("the new schema version showed after %s, before the %s cache period ended", elapsed, ttl)
	}
}

func TestHealthIsAlwaysOKWhileReadinessNeedsTheDatabase(t *testing.T) {
	unreachable := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=2", pgtest.FreePort(t))
	srv := httptest.NewServer(server.New(server.Config{Pool: newPool(t, unreachable), AppVersion: 1}).Handler())
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz answered %d without a database, want 200", resp.StatusCode)
	}
	if status, r := getReadyz(t, srv.URL); status != http.StatusServiceUnavailable || r.Reason == "" {
		t.Errorf("/readyz answered %d %+v without a database, want 503 with a reason", status, r)
	}
}

func TestRecordsCanBeCreatedAndReadBack(t *testing.T) {
	dsn := pgtest.NewDB(t)
	migrateTo(t, dsn, 1)
	srv := httptest.NewServer(server.New(server.Config{Pool: newPool(t, dsn), AppVersion: 1}).Handler())
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/records", "application/json", strings.NewReader(`{"body":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID int64 }
	err = json.NewDecoder(resp.Body).Decode(&created)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || err != nil || created.ID == 0 {
		t.Fatalf("POST /records answered %d id %d (%v), want 201 with an id", resp.StatusCode, created.ID, err)
	}

	resp, err = http.Get(fmt.Sprintf("%s/records/%d", srv.URL, created.ID))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID        int64
		Body      string
		CreatedAt time.Time
	}
	err = json.NewDecoder(resp.Body).Decode(&got)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || got.ID != created.ID || got.Body != "hello" || got.CreatedAt.IsZero() {
		t.Errorf("GET /records/%d answered %d %+v (%v)", created.ID, resp.StatusCode, got, err)
	}

	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{http.MethodGet, "/records/999999", "", http.StatusNotFound},
		{http.MethodGet, "/records/abc", "", http.StatusBadRequest},
		{http.MethodPost, "/records", `{"body":`, http.StatusBadRequest},
		{http.MethodPost, "/records", `{}`, http.StatusBadRequest},
		{http.MethodDelete, "/records/1", "", http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s %s answered %d, want %d", tc.method, tc.path, tc.body, resp.StatusCode, tc.want)
		}
	}
}

// serve runs the server on a loopback port until the returned cancel (the SIGTERM) is called.
func serve(t *testing.T, cfg server.Config) (base string, sigterm context.CancelFunc, done <-chan error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		errc <- server.New(cfg).Serve(ctx, l)
	}()
	// the server logs through t until it returns: a test must not end before it did
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(time.Minute):
			t.Error("the server did not return within a minute of its shutdown")
		}
	})
	return "http://" + l.Addr().String(), cancel, errc
}

func TestGracefulShutdownDropsNoRequestUnderLoad(t *testing.T) {
	dsn := pgtest.NewDB(t)
	migrateTo(t, dsn, 1)
	const delay = 2 * time.Second
	base, sigterm, done := serve(t, server.Config{
		Pool: newPool(t, dsn), AppVersion: 1, ShutdownDelay: delay, Logger: testLogger(t),
	})

	gen, err := load.New(load.Config{Target: base, Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan load.Report, 1)
	go func() { reports <- gen.Run(context.Background()) }()
	time.Sleep(time.Second)

	// A request in flight when the listener closes: its body arrives only after the delay.
	body, bodyWriter := io.Pipe()
	slow := make(chan error, 1)
	go func() {
		resp, err := http.Post(base+"/records", "application/json", body)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		slow <- err
	}()
	if _, err := bodyWriter.Write([]byte(`{"body":"slow`)); err != nil {
		t.Fatal(err)
	}

	sentBefore := gen.Report().Sent
	sigterm()
	start := time.Now()
	for {
		if status, _ := getReadyz(t, base); status == http.StatusServiceUnavailable {
			break
		}
		if time.Since(start) > time.Second {
			t.Fatalf("/readyz still succeeds %s after SIGTERM", time.Since(start))
		}
	}
	// Keep the load on for a while, as a Service does until it drops the unready endpoint.
	time.Sleep(delay / 2)
	gen.Stop()
	report := <-reports
	if report.Failed != 0 || report.Sent <= sentBefore {
		t.Errorf("load during shutdown: %d sent (%d before SIGTERM), %d failed: %q", report.Sent, sentBefore, report.Failed, report.Errors)
	}

	// Wait until the listener is closed: the server is draining.
	for {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), time.Second)
		if err != nil {
			break
		}
		_ = conn.Close()
		if time.Since(start) > delay+5*time.Second {
			t.Fatalf("listener still open %s after SIGTERM", time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if since := time.Since(start); since < delay {
		t.Errorf("listener closed %s after SIGTERM, before the %s delay", since, delay)
	}
	select {
	case err := <-done:
		t.Fatalf("server exited (%v) with a request in flight", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := bodyWriter.Write([]byte(`"}`)); err != nil {
		t.Fatal(err)
	}
	if err := bodyWriter.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-slow; err != nil {
		t.Errorf("the in-flight request was dropped: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v after draining", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not exit after draining")
	}
}

func TestServeFailsWhenTheListenerBreaks(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	err = server.New(server.Config{AppVersion: 1}).Serve(context.Background(), l)
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve on a closed listener returned %v, want an error", err)
	}
}

func TestAfterShutdownBeginsEveryResponseClosesItsConnection(t *testing.T) {
	dsn := pgtest.NewDB(t)
	migrateTo(t, dsn, 1)
	base, sigterm, _ := serve(t, server.Config{
		Pool: newPool(t, dsn), AppVersion: 1, ShutdownDelay: 2 * time.Second, Logger: testLogger(t),
	})
	// closes GETs /healthz and reports whether the response closes its connection.
	closes := func() bool {
		t.Helper()
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.Close
	}
	if closes() {
		t.Fatal("a response before shutdown closes its connection: keep-alive is off")
	}
	sigterm()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if status, _ := getReadyz(t, base); status == http.StatusServiceUnavailable {
			break
		}
		if time.Since(start) > time.Second {
			t.Fatal("/readyz still succeeds a second after SIGTERM")
		}
	}
	if !closes() {
		t.Error("a response during the shutdown delay keeps its connection open for reuse")
	}
}
