package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/premigrate/premigrate/internal/demo/load"
	"github.com/premigrate/premigrate/internal/pgtest"
)

func TestLoadAgainstServeOfVersionSevenCountsEveryRequestUnderVersionSeven(t *testing.T) {
	dsn := pgtest.NewDB(t)
	if r := demo(t, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "7", "SCHEMA_ACCEPT_DATA_LOSS": "true"}, "migrate"); r.code != exitOK {
		t.Fatalf("migrate to 7: exit %d\n%s", r.code, r.stderr)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	served := make(chan result, 1)
	go func() {
		served <- demoCtx(ctx, map[string]string{"DATABASE_URL": dsn, "DEMO_VERSION": "7", "LISTEN_ADDR": addr, "SHUTDOWN_DELAY": "0s"}, "serve")
	}()
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK)

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
	if want := map[string]load.Counts{"7": {Sent: report.Sent}}; !reflect.DeepEqual(report.ByVersion, want) {
		t.Errorf("byVersion %v, want %v", report.ByVersion, want)
	}
	records := queryInt(t, dsn, "SELECT count(*) FROM records WHERE author = 'demo-load'")
	for _, table := range []string{"tags", "notes"} {
		if n := queryInt(t, dsn, "SELECT count(*) FROM "+table); n != records || n == 0 {
			t.Errorf("%d rows in %s for %d records written by the load: want one per record", n, table, records)
		}
	}

	sigterm()
	select {
	case s := <-served:
		if s.code != exitOK {
			t.Errorf("serve: exit %d\n%s", s.code, s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after the signal")
	}
}

func TestServeAndLoadHelpNameTheVersionHeaderAndTheReportByVersion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--help"}, []string{"X-Demo-Version: DEMO_VERSION", `"author"`, `"tags"`, `"source"`, `"noteCount"`}},
		{[]string{"load", "--help"}, []string{"X-Demo-Version", `"byVersion"`, `{"2":{"sent":40,"failed":0}}`, `"unknown"`}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := demo(t, nil, tc.args...)
			for _, w := range tc.want {
				if r.code != exitOK || !strings.Contains(r.stdout, w) {
					t.Errorf("exit %d, help lacks %q:\n%s", r.code, w, r.stdout)
				}
			}
		})
	}
}
