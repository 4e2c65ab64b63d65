package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/premigrate/premigrate/internal/pgtest"
)

// A contract of version 2 sees the sessions of a version-1 server while it runs, and none once it stopped: the
// database's own list of sessions, by the application_name serve gives them.
func TestContractSeesTheSessionsOfAnOlderServerUntilItStopped(t *testing.T) {
	dsn := pgtest.NewDB(t)
	if r := demo(t, map[string]string{"DATABASE_URL": dsn}, "migrate"); r.code != exitOK {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	served := make(chan result, 1)
	go func() {
		served <- demoCtx(ctx, map[string]string{"DATABASE_URL": dsn, "LISTEN_ADDR": addr, "SHUTDOWN_DELAY": "100ms", "POD_NAME": "app-old"}, "serve")
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("serve not ready after 30s")
		}
	}
	contract := func() result {
		return demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "2", "PREMIGRATE_IDENTITY": "abc123def0"}, "contract")
	}
	r := contract()
	if r.code != exitOK || !strings.Contains(r.stdout, "sessions of other versions connected: demo serve v1 app-old (pid ") {
		t.Errorf("contract while v1 serves: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	sigterm()
	if s := <-served; s.code != exitOK {
		t.Fatalf("serve: exit %d\n%s", s.code, s.stderr)
	}
	// a backend leaves pg_stat_activity a moment after its client closed the connection
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r = contract(); strings.HasSuffix(r.stdout, "connected: none\n") || time.Now().After(deadline) {
			break
		}
	}
	if r.code != exitOK || !strings.Contains(r.stdout, `identity "abc123def0"`) || !strings.HasSuffix(r.stdout, "connected: none\n") {
		t.Errorf("contract after v1 stopped: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
}

// Version 8's contract drops records.body once, and only on a schema that has its expand (migration 8); an older
// version's contract drops nothing. DEMO_CONTRACT_IN_MIGRATION runs the same drop in the migration.
func TestTheContractOfVersion8DropsBodyOnceAndOnlyAfterItsExpand(t *testing.T) {
	tests := []struct {
		name        string
		migrateTo   string
		contractAs  string
		wantCode    int
		wantOut     string
		bodyRemains bool
	}{
		{"refused on a schema without its expand", "7", "8", exitFailure, "", true},
		{"drops body and its trigger after the expand", "8", "8", exitOK, "dropped: column records.body, trigger records_body_content_sync;", false},
		{"of version 7 on schema 8 drops nothing", "8", "7", exitOK, "dropped: none;", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			if r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": tt.migrateTo, "SCHEMA_ACCEPT_DATA_LOSS": "true"}, "migrate"); r.code != exitOK {
				t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
			}
			r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": tt.contractAs}, "contract")
			if r.code != tt.wantCode || !strings.Contains(r.stdout, tt.wantOut) {
				t.Fatalf("contract: exit %d (want %d), stdout %q (want %q)\n%s", r.code, tt.wantCode, r.stdout, tt.wantOut, r.stderr)
			}
			if tt.wantCode != exitOK && !strings.Contains(r.stderr, "needs its expand (migration 8) first, and the schema is at version 7: nothing dropped") {
				t.Errorf("the refusal does not say why:\n%s", r.stderr)
			}
			if got := hasBody(t, dsn); got != tt.bodyRemains {
				t.Errorf("records.body exists: %t, want %t", got, tt.bodyRemains)
			}
			if tt.wantCode == exitOK {
				if again := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": tt.contractAs}, "contract"); again.code != exitOK || !strings.Contains(again.stdout, "dropped: none;") {
					t.Errorf("the contract again: exit %d, stdout %q, want nothing dropped\n%s", again.code, again.stdout, again.stderr)
				}
			}
		})
	}
	t.Run("run in the migration with DEMO_CONTRACT_IN_MIGRATION", func(t *testing.T) {
		dsn := pgtest.NewDB(t)
		r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "8", "SCHEMA_ACCEPT_DATA_LOSS": "true", "DEMO_CONTRACT_IN_MIGRATION": "true"}, "migrate")
		if r.code != exitOK || hasBody(t, dsn) {
			t.Errorf("migrate with the contract: exit %d, records.body left %t\n%s", r.code, hasBody(t, dsn), r.stderr)
		}
	})
}

func hasBody(t *testing.T, dsn string) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM information_schema.columns WHERE table_name = 'records' AND column_name = 'body'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}
