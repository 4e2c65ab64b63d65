package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/premigrate/premigrate/internal/demo/load"
	"github.com/premigrate/premigrate/internal/demo/migrate"
	"github.com/premigrate/premigrate/internal/demo/server"
	"github.com/premigrate/premigrate/internal/pgtest"
)

// answer is one response of the demo app.
type answer struct {
	status  int
	version string // the X-Demo-Version header
	body    map[string]any
	raw     string
}

func call(t *testing.T, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, url, err)
	}
	a := answer{status: resp.StatusCode, version: resp.Header.Get(server.VersionHeader), raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body) // not every answer is a JSON object
	return a
}

// schemaPools returns a pool on a fresh database migrated to each schema version 1..8.
func schemaPools(t *testing.T) map[int]*pgxpool.Pool {
	t.Helper()
	pools := map[int]*pgxpool.Pool{}
	for v := 1; v <= 8; v++ {
		dsn := pgtest.NewDB(t)
		migrateTo(t, dsn, v)
		pools[v] = newPool(t, dsn)
	}
	return pools
}

// postRecord creates a record and returns its id.
func postRecord(t *testing.T, base, body string) int64 {
	t.Helper()
	a := call(t, http.MethodPost, base+"/records", body)
	id, _ := a.body["id"].(float64)
	if a.status != http.StatusCreated || id == 0 {
		t.Fatalf("POST /records %s answered %d %s, want 201 with an id", body, a.status, a.raw)
	}
	return int64(id)
}

func TestEachVersionStoresAndReturnsWhatItsSchemaAddedOnItsOwnSchemaAndTheNext(t *testing.T) {
	pools := schemaPools(t)
	for _, tc := range []struct {
		app, schema int
		want        map[string]any // the fields beyond id, body and createdAt
	}{
		{1, 1, map[string]any{}},
		{1, 2, map[string]any{}},
		{2, 2, map[string]any{"author": "alice"}},
		{2, 3, map[string]any{"author": "alice"}},
		{3, 3, map[string]any{"author": "alice"}},
		{3, 4, map[string]any{"author": "alice"}},
		{4, 4, map[string]any{"author": "alice", "tags": []any{"v4"}}},
		{4, 5, map[string]any{"author": "alice", "tags": []any{"v4"}}},
		{5, 5, map[string]any{"author": "alice", "tags": []any{"v5"}, "source": "demo"}},
		{5, 6, map[string]any{"author": "alice", "tags": []any{"v5"}}},
		{6, 6, map[string]any{"author": "alice", "tags": []any{"v6"}}},
		{6, 7, map[string]any{"author": "alice", "tags": []any{"v6"}}},
		{7, 7, map[string]any{"author": "alice", "tags": []any{"v7"}, "noteCount": 1.0}},
		{7, 8, map[string]any{"author": "alice", "tags": []any{"v7"}, "noteCount": 1.0}},
		{8, 8, map[string]any{"author": "alice", "tags": []any{"v8"}, "noteCount": 1.0}},
	} {
		t.Run(fmt.Sprintf("app %d on schema %d", tc.app, tc.schema), func(t *testing.T) {
			srv := httptest.NewServer(server.New(server.Config{Pool: pools[tc.schema], AppVersion: tc.app, Logger: testLogger(t)}).Handler())
			defer srv.Close()

			post := call(t, http.MethodPost, srv.URL+"/records", `{"body":"hello","author":"alice"}`)
			id, _ := post.body["id"].(float64)
			if post.status != http.StatusCreated || id == 0 || post.version != strconv.Itoa(tc.app) {
				t.Fatalf("POST /records answered %d, version %q: %s; want 201 with an id, version %d", post.status, post.version, post.raw, tc.app)
			}
			get := call(t, http.MethodGet, fmt.Sprintf("%s/records/%d", srv.URL, int64(id)), "")
			if get.status != http.StatusOK || get.version != strconv.Itoa(tc.app) {
				t.Fatalf("GET /records/%d answered %d, version %q: %s; want 200, version %d", int64(id), get.status, get.version, get.raw, tc.app)
			}
			got := maps.Clone(get.body)
			if got["id"] != id || got["body"] != "hello" || got["createdAt"] == nil {
				t.Errorf("GET /records/%d answered %s: want its id, body and createdAt", int64(id), get.raw)
			}
			delete(got, "id")
			delete(got, "body")
			delete(got, "createdAt")
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("GET /records/%d answered %v beyond id, body and createdAt; want %v", int64(id), got, tc.want)
			}
		})
	}
}

func TestTheAuthorDefaultsToTheAppVersionAndARecordWithoutOneReadsEmpty(t *testing.T) {
	dsn := pgtest.NewDB(t)
	migrateTo(t, dsn, 2)
	pool := newPool(t, dsn)
	v1 := httptest.NewServer(server.New(server.Config{Pool: pool, AppVersion: 1}).Handler())
	defer v1.Close()
	v2 := httptest.NewServer(server.New(server.Config{Pool: pool, AppVersion: 2}).Handler())
	defer v2.Close()

	for _, tc := range []struct {
		name   string
		writer string // base URL of the server creating the record
		post   string
		want   string
	}{
		{"written by version 2 without an author", v2.URL, `{"body":"hello"}`, "demo-v2"},
		{"written by version 1, which ignores the author", v1.URL, `{"body":"hello","author":"alice"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := postRecord(t, tc.writer, tc.post)
			get := call(t, http.MethodGet, fmt.Sprintf("%s/records/%d", v2.URL, id), "")
			if author, ok := get.body["author"]; get.status != http.StatusOK || !ok || author != tc.want {
				t.Errorf("version 2 read record %d as %d %s, want author %q", id, get.status, get.raw, tc.want)
			}
		})
	}
}

func TestAServerOnTheSchemaBeforeItsOwnFailsWhenItsMigrationAddedSomethingItUses(t *testing.T) {
	pools := schemaPools(t)
	for _, tc := range []struct {
		app               int
		wantPost, wantGet int
	}{
		{2, http.StatusInternalServerError, http.StatusInternalServerError}, // records.author
		{3, http.StatusCreated, http.StatusOK},                              // an index: nothing to miss
		{4, http.StatusInternalServerError, http.StatusInternalServerError}, // tags
		{5, http.StatusInternalServerError, http.StatusInternalServerError}, // records.source
		{6, http.StatusCreated, http.StatusOK},                              // a dropped column: nothing to miss
		{7, http.StatusInternalServerError, http.StatusInternalServerError}, // notes
	} {
		t.Run(fmt.Sprintf("app %d on schema %d", tc.app, tc.app-1), func(t *testing.T) {
			pool := pools[tc.app-1]
			own := httptest.NewServer(server.New(server.Config{Pool: pool, AppVersion: tc.app - 1}).Handler())
			defer own.Close()
			id := postRecord(t, own.URL, `{"body":"written on its own schema"}`)

			srv := httptest.NewServer(server.New(server.Config{Pool: pool, AppVersion: tc.app, Logger: testLogger(t)}).Handler())
			defer srv.Close()
			for _, req := range []struct {
				method, path, body string
				want               int
			}{
				{http.MethodPost, "/records", `{"body":"hello"}`, tc.wantPost},
				{http.MethodGet, fmt.Sprintf("/records/%d", id), "", tc.wantGet},
			} {
				a := call(t, req.method, srv.URL+req.path, req.body)
				if a.status != req.want || a.version != strconv.Itoa(tc.app) {
					t.Errorf("%s %s answered %d, version %q: %s; want %d, version %d", req.method, req.path, a.status, a.version, a.raw, req.want, tc.app)
				}
				// the load generator tells a schema failure from a slow database by this mark
				if a.status == http.StatusInternalServerError && !strings.Contains(a.raw, `"schema":true`) {
					t.Errorf("%s %s failed on the schema without saying so: %s", req.method, req.path, a.raw)
				}
			}
		})
	}
}

func TestEveryResponseNamesTheAppVersionErrorsIncluded(t *testing.T) {
	unreachable := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=2", pgtest.FreePort(t))
	srv := httptest.NewServer(server.New(server.Config{Pool: newPool(t, unreachable), AppVersion: 4}).Handler())
	defer srv.Close()
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{http.MethodGet, "/healthz", "", http.StatusOK},
		{http.MethodGet, "/readyz", "", http.StatusServiceUnavailable},
		{http.MethodPost, "/records", `{"body":"no database"}`, http.StatusInternalServerError},
		{http.MethodGet, "/records/1", "", http.StatusInternalServerError},
		{http.MethodPost, "/records", `{"body":`, http.StatusBadRequest},
		{http.MethodGet, "/records/abc", "", http.StatusBadRequest},
		{http.MethodDelete, "/records/1", "", http.StatusMethodNotAllowed},
		{http.MethodGet, "/nowhere", "", http.StatusNotFound},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			a := call(t, tc.method, srv.URL+tc.path, tc.body)
			if a.status != tc.want || a.version != "4" {
				t.Errorf("answered %d with %s %q, want %d with %q", a.status, server.VersionHeader, a.version, tc.want, "4")
			}
			if strings.Contains(a.raw, `"schema"`) {
				t.Errorf("an unreachable database is called a schema failure: %s", a.raw)
			}
		})
	}
}

func TestAVersionFiveServerFailsNoRequestWhileVersionSixDropsTheSourceColumn(t *testing.T) {
	dsn := pgtest.NewDB(t)
	migrateTo(t, dsn, 5)
	srv := httptest.NewServer(server.New(server.Config{Pool: newPool(t, dsn), AppVersion: 5, Logger: testLogger(t)}).Handler())
	defer srv.Close()
	before := postRecord(t, srv.URL, `{"body":"before"}`)
	if a := call(t, http.MethodGet, fmt.Sprintf("%s/records/%d", srv.URL, before), ""); a.body["source"] != "demo" {
		t.Fatalf("on schema 5, version 5 read record %d as %s: want source \"demo\"", before, a.raw)
	}

	gen, err := load.New(load.Config{Target: srv.URL, Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan load.Report, 1)
	go func() { reports <- gen.Run(context.Background()) }()
	time.Sleep(300 * time.Millisecond)
	// The migration holds its ACCESS EXCLUSIVE lock on records for the delay: every request
	// arriving meanwhile waits for it, then meets a schema without records.source.
	const hold = 700 * time.Millisecond
	_, err = migrate.Run(context.Background(), migrate.Config{
		DatabaseURL: dsn, Target: 6, AcceptDataLoss: true, Delay: hold, ConnectTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("migrate to 6: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	gen.Stop()
	report := <-reports

	if report.Failed != 0 || report.Sent < 100 {
		t.Errorf("load across the migration to 6: %d sent, %d failed: %q; want at least 100, none failed", report.Sent, report.Failed, report.Errors)
	}
	if want := map[string]load.Counts{"5": {Sent: report.Sent}}; !reflect.DeepEqual(report.ByVersion, want) {
		t.Errorf("requests by version %v, want %v", report.ByVersion, want)
	}
	if report.LongestGapMs < (hold / 2).Milliseconds() {
		t.Errorf("longest gap %dms: the requests did not wait while the migration held its lock for %s", report.LongestGapMs, hold)
	}
	if a := call(t, http.MethodGet, fmt.Sprintf("%s/records/%d", srv.URL, before), ""); a.status != http.StatusOK || a.body["source"] != nil || a.body["author"] != "demo-v5" {
		t.Errorf("on schema 6, version 5 read record %d as %d %s: want it without source", before, a.status, a.raw)
	}
}

// The expand/contract pair of version 8: during the expand window (schema 8, body not dropped yet) a version-7
// server and a version-8 one read each other's records, whichever column each writes; once the contract dropped
// body, version 8 still does, and version 7 fails as the old pods of a drop run too early do.
func TestVersions7And8ShareRecordsUntilTheContractThenOnly8Serves(t *testing.T) {
	dsn := pgtest.NewDB(t)
	migrateTo(t, dsn, 8)
	pool := newPool(t, dsn)
	v7 := httptest.NewServer(server.New(server.Config{Pool: pool, AppVersion: 7, Logger: testLogger(t)}).Handler())
	defer v7.Close()
	v8 := httptest.NewServer(server.New(server.Config{Pool: pool, AppVersion: 8, Logger: testLogger(t)}).Handler())
	defer v8.Close()

	byV7 := postRecord(t, v7.URL, `{"body":"written by 7"}`)
	byV8 := postRecord(t, v8.URL, `{"body":"written by 8"}`)
	for _, srv := range []string{v7.URL, v8.URL} {
		for id, want := range map[int64]string{byV7: "written by 7", byV8: "written by 8"} {
			if a := call(t, http.MethodGet, fmt.Sprintf("%s/records/%d", srv, id), ""); a.status != http.StatusOK || a.body["body"] != want {
				t.Errorf("during the expand window, version %s read record %d as %d %s, want body %q", a.version, id, a.status, a.raw, want)
			}
		}
	}

	if _, err := pool.Exec(context.Background(), `DROP TRIGGER records_body_content_sync ON records;
DROP FUNCTION records_body_content_sync();
ALTER TABLE records DROP COLUMN body`); err != nil {
		t.Fatal(err)
	}
	if a := call(t, http.MethodGet, fmt.Sprintf("%s/records/%d", v8.URL, byV7), ""); a.status != http.StatusOK || a.body["body"] != "written by 7" {
		t.Errorf("after the contract, version 8 read record %d as %d %s", byV7, a.status, a.raw)
	}
	postRecord(t, v8.URL, `{"body":"after the contract"}`)
	if a := call(t, http.MethodPost, v7.URL+"/records", `{"body":"too late"}`); a.status != http.StatusInternalServerError {
		t.Errorf("after the contract, version 7 stored a record: %d %s, want 500", a.status, a.raw)
	}
}
