package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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
