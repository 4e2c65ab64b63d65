package load_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/premigrate/premigrate/internal/demo/load"
)

// app is a stand-in for the demo app's records API whose failures the test decides.
type app struct {
	mu      sync.Mutex
	nextID  int64
	fail    func(method string, n int64) bool // n counts requests from 1
	delay   func(method string, n int64) time.Duration
	schema  func(method string, n int64) bool   // answer a failure the app calls the schema's
	version func(method string, n int64) string // the X-Demo-Version header, "" for none
	author  atomic.Value                        // the "author" of the last POST
	count   atomic.Int64
	failed  atomic.Int64
	methods sync.Map
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.count.Add(1)
	if v, _ := a.methods.LoadOrStore(r.Method, new(atomic.Int64)); v != nil {
		v.(*atomic.Int64).Add(1)
	}
	if a.version != nil {
		if v := a.version(r.Method, n); v != "" {
			w.Header().Set(load.VersionHeader, v)
		}
	}
	if a.delay != nil {
		time.Sleep(a.delay(r.Method, n))
	}
	if a.schema != nil && a.schema(r.Method, n) {
		a.failed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprint(w, `{"error":"could not store the record","schema":true}`)
		return
	}
	if a.fail != nil && a.fail(r.Method, n) {
		a.failed.Add(1)
		http.Error(w, "injected", http.StatusInternalServerError)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/records":
		var in struct{ Author string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.author.Store(in.Author)
		a.mu.Lock()
		a.nextID++
		id := a.nextID
		a.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%d}`, id)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/records/"):
		_, _ = fmt.Fprintf(w, `{"id":%s,"body":"x"}`, strings.TrimPrefix(r.URL.Path, "/records/"))
	default:
		http.NotFound(w, r)
	}
}

func (a *app) requests(method string) int64 {
	v, ok := a.methods.Load(method)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func TestReportCountsEveryRequestSentAndEveryFailure(t *testing.T) {
	a := &app{fail: func(_ string, n int64) bool { return n%5 == 0 }}
	srv := httptest.NewServer(a)
	defer srv.Close()

	report, err := load.Run(context.Background(), load.Config{Target: srv.URL, Rate: 50, Duration: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if report.Sent != a.count.Load() || report.Failed != a.failed.Load() {
		t.Errorf("report says %d sent, %d failed; the app saw %d requests, failed %d", report.Sent, report.Failed, a.count.Load(), a.failed.Load())
	}
	if report.Sent < 20 || report.Failed == 0 {
		t.Errorf("report %+v: want at least 20 requests and some failures", report)
	}
	if gets, posts := a.requests(http.MethodGet), a.requests(http.MethodPost); gets == 0 || gets > posts {
		t.Errorf("%d GETs for %d POSTs: want a GET after each successful POST", gets, posts)
	}
	if len(report.Errors) == 0 || !strings.Contains(report.Errors[0], "status 500") {
		t.Errorf("errors %q do not show the status", report.Errors)
	}
	if report.Running || !report.StoppedAt.After(report.StartedAt) {
		t.Errorf("finished report is running=%v, started %s, stopped %s", report.Running, report.StartedAt, report.StoppedAt)
	}
}

func TestLongestGapSpansAnOutage(t *testing.T) {
	const outage = 700 * time.Millisecond
	var outageStart atomic.Int64 // unix nanos; 0 until the outage begins
	a := &app{fail: func(_ string, n int64) bool {
		now := time.Now().UnixNano()
		if n == 10 {
			outageStart.Store(now)
		}
		s := outageStart.Load()
		return s != 0 && now-s < outage.Nanoseconds()
	}}
	srv := httptest.NewServer(a)
	defer srv.Close()

	report, err := load.Run(context.Background(), load.Config{Target: srv.URL, Rate: 50, Duration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if gap := time.Duration(report.LongestGapMs) * time.Millisecond; gap < outage || gap > outage+time.Second {
		t.Errorf("longest gap %s, want about the %s outage", gap, outage)
	}
}

func TestTheSlowestRequestIsReportedAndATimedOutOneSaysWhenItWasSent(t *testing.T) {
	const slow, timeout = 300 * time.Millisecond, 150 * time.Millisecond
	a := &app{delay: func(_ string, n int64) time.Duration {
		if n == 5 {
			return slow
		}
		return 0
	}}
	srv := httptest.NewServer(a)
	defer srv.Close()

	report, err := load.Run(context.Background(), load.Config{Target: srv.URL, Rate: 20, Duration: time.Second, RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(report.SlowestMs) * time.Millisecond; got < timeout || got > slow {
		t.Errorf("slowest request %s, want the %s timeout of the delayed one", got, timeout)
	}
	if report.Failed != 1 || len(report.Errors) != 1 {
		t.Fatalf("%d failed, errors %q: want the delayed request alone to time out", report.Failed, report.Errors)
	}
	if e := report.Errors[0]; !strings.Contains(e, "(sent ") || !strings.Contains(e, " before)") {
		t.Errorf("error %q does not say when the request was sent and how long it waited", e)
	}
	if report.LongestStallMs > 500 {
		t.Errorf("the generator reports a %d ms stall of its own on an idle machine", report.LongestStallMs)
	}
}

func TestFailuresTheAppCallsTheSchemasAreCountedApart(t *testing.T) {
	a := &app{
		schema: func(_ string, n int64) bool { return n == 3 || n == 7 },
		fail:   func(_ string, n int64) bool { return n == 5 },
	}
	srv := httptest.NewServer(a)
	defer srv.Close()
	report, err := load.Run(context.Background(), load.Config{Target: srv.URL, Rate: 20, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if report.Failed != 3 || report.SchemaFailed != 2 {
		t.Errorf("%d failed of which %d on the schema, want 3 and 2: %q", report.Failed, report.SchemaFailed, report.Errors)
	}
}

func TestOnlyTheFirstTwentyErrorsAreKept(t *testing.T) {
	srv := httptest.NewServer(&app{fail: func(string, int64) bool { return true }})
	defer srv.Close()
	report, err := load.Run(context.Background(), load.Config{Target: srv.URL, Rate: 100, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if report.Failed <= load.MaxErrors || len(report.Errors) != load.MaxErrors {
		t.Errorf("%d failures kept %d errors, want more than %d failures and %d errors", report.Failed, len(report.Errors), load.MaxErrors, load.MaxErrors)
	}
	if report.LongestGapMs < 500 {
		t.Errorf("with no success at all the longest gap is %dms, want the whole run", report.LongestGapMs)
	}
}

func TestReportEndpointServesTheReportAndStopEndsTheRun(t *testing.T) {
	target := httptest.NewServer(&app{})
	defer target.Close()
	gen, err := load.New(load.Config{Target: target.URL, Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	reports := httptest.NewServer(gen.Handler())
	defer reports.Close()
	finished := make(chan load.Report, 1)
	go func() { finished <- gen.Run(context.Background()) }()
	time.Sleep(300 * time.Millisecond)

	get := func(method, path string) load.Report {
		t.Helper()
		req, _ := http.NewRequest(method, reports.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var r load.Report
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, err)
		}
		return r
	}
	if r := get(http.MethodGet, "/report"); !r.Running || r.Sent == 0 {
		t.Errorf("report while running: %+v", r)
	}
	stopped := get(http.MethodPost, "/stop")
	if stopped.Running || stopped.StoppedAt.IsZero() {
		t.Errorf("POST /stop answered a report still running: %+v", stopped)
	}
	select {
	case final := <-finished:
		if final.Sent != stopped.Sent {
			t.Errorf("Run returned %d sent, POST /stop reported %d", final.Sent, stopped.Sent)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after POST /stop")
	}
	time.Sleep(100 * time.Millisecond)
	if later := get(http.MethodGet, "/report"); later.Sent != stopped.Sent || later.Running {
		t.Errorf("report changed after the stop: %+v, then %+v", stopped, later)
	}

	var raw map[string]any
	resp, err := http.Get(reports.URL + "/report")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"sent", "failed", "longestGapMs", "schemaFailed", "slowestMs", "longestStallMs", "errors", "startedAt", "stoppedAt", "byVersion"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("report JSON lacks %q: %v", key, raw)
		}
	}
}

func TestRedirectsAwayFromTheTargetAreNotFollowed(t *testing.T) {
	elsewhere := &app{}
	other := httptest.NewServer(elsewhere)
	defer other.Close()
	redirector := httptest.NewServer(http.RedirectHandler(other.URL+"/records", http.StatusTemporaryRedirect))
	defer redirector.Close()

	report, err := load.Run(context.Background(), load.Config{Target: redirector.URL, Rate: 20, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if elsewhere.count.Load() != 0 {
		t.Errorf("%d requests followed a redirect to another server", elsewhere.count.Load())
	}
	if report.Failed != report.Sent || report.Sent == 0 {
		t.Errorf("redirects counted as successes: %+v", report)
	}
}

func TestInvalidConfigurationIsRejected(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     load.Config
		wantErr string
	}{
		{"no target", load.Config{}, "must be an http(s) URL"},
		{"target without scheme", load.Config{Target: "localhost:8080"}, "must be an http(s) URL"},
		{"negative rate", load.Config{Target: "http://localhost", Rate: -1}, "rate"},
		{"absurd rate", load.Config{Target: "http://localhost", Rate: 1e9}, "rate"},
		{"negative duration", load.Config{Target: "http://localhost", Duration: -time.Second}, "duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := load.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// Outcomes of the requests counted under one version.
const (
	noneFailed = "none failed"
	someFailed = "some failed"
	allFailed  = "all failed"
)

func TestByVersionCountsEachRequestUnderTheVersionNamedByItsResponse(t *testing.T) {
	always := func(v string) func(string, int64) string { return func(string, int64) string { return v } }
	everyFourth := func(_ string, n int64) bool { return n%4 == 0 }
	for _, tc := range []struct {
		name    string
		version func(method string, n int64) string // nil: no server at all
		fail    func(method string, n int64) bool
		want    map[string]string // version -> outcome of its requests
	}{
		{"every response names version 3", always("3"), everyFourth,
			map[string]string{"3": someFailed}},
		{"a rollout: version 2 creates, version 3 reads", func(method string, _ int64) string {
			if method == http.MethodPost {
				return "2"
			}
			return "3"
		}, nil, map[string]string{"2": noneFailed, "3": noneFailed}},
		{"failures without the header, as from a proxy in front of version 4", func(_ string, n int64) string {
			if n%4 == 0 {
				return ""
			}
			return "4"
		}, everyFourth, map[string]string{"4": noneFailed, load.UnknownVersion: allFailed}},
		{"a header that is no version number", always("v2-beta"), nil,
			map[string]string{load.UnknownVersion: noneFailed}},
		{"no response at all", nil, nil,
			map[string]string{load.UnknownVersion: allFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(&app{version: tc.version, fail: tc.fail})
			defer srv.Close()
			if tc.version == nil {
				srv.Close() // its port now refuses connections
			}
			report, err := load.Run(context.Background(), load.Config{Target: srv.URL, Rate: 50, Duration: 400 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var sum load.Counts
			got := map[string]string{}
			for v, c := range report.ByVersion {
				sum.Sent += c.Sent
				sum.Failed += c.Failed
				switch {
				case c.Sent > 0 && c.Failed == 0:
					got[v] = noneFailed
				case c.Sent > 0 && c.Failed == c.Sent:
					got[v] = allFailed
				case c.Failed > 0 && c.Failed < c.Sent:
					got[v] = someFailed
				default:
					got[v] = fmt.Sprintf("%d sent, %d failed", c.Sent, c.Failed)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("byVersion %v, that is %v; want %v", report.ByVersion, got, tc.want)
			}
			if sum.Sent != report.Sent || sum.Failed != report.Failed || report.Sent == 0 {
				t.Errorf("byVersion adds up to %d sent, %d failed; the report says %d sent, %d failed", sum.Sent, sum.Failed, report.Sent, report.Failed)
			}
		})
	}
}

func TestByVersionIsAnEmptyObjectBeforeTheFirstRequest(t *testing.T) {
	gen, err := load.New(load.Config{Target: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(gen.Report())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"byVersion":{}`) {
		t.Errorf("report before the run: %s; want \"byVersion\":{}", raw)
	}
}

func TestThePostNamesTheLoadGeneratorAsItsAuthor(t *testing.T) {
	a := &app{}
	srv := httptest.NewServer(a)
	defer srv.Close()
	if _, err := load.Run(context.Background(), load.Config{Target: srv.URL, Rate: 20, Duration: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.author.Load().(string); got != "demo-load" {
		t.Errorf("the POST's author is %q, want %q", got, "demo-load")
	}
}
