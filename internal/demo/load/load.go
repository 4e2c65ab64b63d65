// Package load drives steady traffic at the demo app and reports what failed: on every tick it
// creates a record (POST /records) and reads it back (GET /records/{id}). It measures the longest
// gap between two successful requests, the number an upgrade without downtime keeps small. It
// counts the requests per app version too, the version named by the X-Demo-Version header of each
// response: which version answered, and which one failed.
package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults for Config fields left zero.
const (
	DefaultRate           = 20
	DefaultRequestTimeout = 5 * time.Second
	// MaxErrors is how many error strings a report keeps (the first ones).
	MaxErrors = 20
	// VersionHeader is the response header naming the app version that answered
	// (server.VersionHeader of the demo app).
	VersionHeader = "X-Demo-Version"
	// UnknownVersion is the key of Report.ByVersion for requests without an app version: no
	// response (refused, reset, timed out), or a response without a numeric VersionHeader (a
	// proxy's error page, a redirect elsewhere).
	UnknownVersion = "unknown"
	// author is the "author" the POST sends, stored by app versions from 2 on.
	author = "demo-load"
)

// Config configures a load run.
type Config struct {
	// Target is the base URL of the demo app, e.g. http://127.0.0.1:8080. Only this URL is sent
	// requests; redirects are not followed.
	Target string
	// Rate is ticks per second; each tick sends a POST then a GET.
	Rate float64
	// Duration bounds the run; zero runs until ctx is cancelled or Stop is called.
	Duration time.Duration
	// RequestTimeout bounds each request.
	RequestTimeout time.Duration
	// Client sends the requests; nil means a client built for the run.
	Client *http.Client
}

// Report is the outcome of a run, also while it is running.
type Report struct {
	Sent   int64 `json:"sent"`
	Failed int64 `json:"failed"`
	// SchemaFailed counts the failed requests the app answered with "schema": true: the database refused
	// its statement for the schema (an app version on a schema older than its own). The rest of Failed
	// is a slow or unreachable app or database.
	SchemaFailed int64 `json:"schemaFailed"`
	LongestGapMs int64 `json:"longestGapMs"`
	// SlowestMs is the longest any request took, answered or not (a timed-out one counts its
	// timeout).
	SlowestMs int64 `json:"slowestMs"`
	// LongestStallMs is how far the generator itself fell behind its own ticks at worst: when its
	// process or node is starved of CPU, requests look slow (or time out) for reasons that are not
	// the app's. A failure during a long stall says "look at the machine" before "look at the app".
	LongestStallMs int64     `json:"longestStallMs"`
	Errors         []string  `json:"errors"`
	StartedAt      time.Time `json:"startedAt"`
	StoppedAt      time.Time `json:"stoppedAt,omitzero"`
	Running        bool      `json:"running"`
	// ByVersion splits Sent and Failed by the app version that answered: its key is the value of
	// VersionHeader ("2"), or UnknownVersion. Its counts add up to Sent and Failed.
	ByVersion map[string]Counts `json:"byVersion"`
}

// Counts are the requests answered by one app version, and how many of them failed.
type Counts struct {
	Sent   int64 `json:"sent"`
	Failed int64 `json:"failed"`
}

// Generator runs one load run. Its Report may be read at any time, from any goroutine.
type Generator struct {
	cfg    Config
	base   *url.URL
	client *http.Client

	stopOnce sync.Once
	stopCh   chan struct{}
	done     chan struct{}

	mu          sync.Mutex
	report      Report
	lastSuccess time.Time
	longestGap  time.Duration
	slowest     time.Duration
	stall       time.Duration
}

// New validates cfg and returns a generator ready to Run.
func New(cfg Config) (*Generator, error) {
	base, err := url.Parse(cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("parse target URL: %w", err)
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("target %q must be an http(s) URL with a host", cfg.Target)
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Rate < 0 || cfg.Rate > 1000 {
		return nil, fmt.Errorf("rate %v must be between 0 and 1000 ticks per second", cfg.Rate)
	}
	if cfg.Duration < 0 {
		return nil, fmt.Errorf("duration %s must not be negative", cfg.Duration)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{
			Timeout: cfg.RequestTimeout,
			// Never follow a redirect away from the target.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	return &Generator{
		cfg: cfg, base: base, client: client,
		stopCh: make(chan struct{}), done: make(chan struct{}),
		report: Report{Errors: []string{}, ByVersion: map[string]Counts{}},
	}, nil
}

// Run is New followed by Generator.Run.
func Run(ctx context.Context, cfg Config) (Report, error) {
	g, err := New(cfg)
	if err != nil {
		return Report{}, err
	}
	return g.Run(ctx), nil
}

// Stop ends the run early; the report stays readable. Safe to call more than once.
func (g *Generator) Stop() { g.stopOnce.Do(func() { close(g.stopCh) }) }

// Run sends traffic until the duration passes, ctx is cancelled or Stop is called, waits for the
// requests in flight, and returns the final report. Call it once.
func (g *Generator) Run(ctx context.Context) Report {
	defer close(g.done)
	start := time.Now()
	g.mu.Lock()
	g.report = Report{StartedAt: start.UTC(), Running: true, Errors: []string{}, ByVersion: map[string]Counts{}}
	g.lastSuccess = start
	g.mu.Unlock()

	var deadline <-chan time.Time
	if g.cfg.Duration > 0 {
		timer := time.NewTimer(g.cfg.Duration)
		defer timer.Stop()
		deadline = timer.C
	}
	ticker := time.NewTicker(time.Duration(float64(time.Second) / g.cfg.Rate))
	// (the ticker drops the ticks a starved receiver misses, so a stall shows as one long interval)
	defer ticker.Stop()

	// Requests are not tied to ctx: stopping the run must not fail the requests in flight.
	reqCtx := context.WithoutCancel(ctx)
	period := time.Duration(float64(time.Second) / g.cfg.Rate)
	var wg sync.WaitGroup
	last := start
	for tick := true; tick; {
		wg.Go(func() { g.tick(reqCtx) })
		select {
		case now := <-ticker.C:
			g.noteStall(now.Sub(last) - period)
			last = now
		case <-deadline:
			tick = false
		case <-g.stopCh:
			tick = false
		case <-ctx.Done():
			tick = false
		}
	}
	wg.Wait()

	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.noteGap(now)
	g.report.StoppedAt = now.UTC()
	g.report.Running = false
	return g.snapshot()
}

// Report returns the report so far.
func (g *Generator) Report() Report {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.report.Running {
		g.noteGap(time.Now())
	}
	return g.snapshot()
}

func (g *Generator) snapshot() Report {
	r := g.report
	r.Errors = append([]string{}, g.report.Errors...)
	r.ByVersion = maps.Clone(g.report.ByVersion)
	r.LongestGapMs = g.longestGap.Milliseconds()
	r.SlowestMs = g.slowest.Milliseconds()
	r.LongestStallMs = g.stall.Milliseconds()
	return r
}

// noteStall accounts for a tick that came late by d.
func (g *Generator) noteStall(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d > g.stall {
		g.stall = d
	}
}

// noteGap accounts for the time since the last success; callers hold mu.
func (g *Generator) noteGap(now time.Time) {
	if gap := now.Sub(g.lastSuccess); gap > g.longestGap {
		g.longestGap = gap
	}
}

func (g *Generator) tick(ctx context.Context) {
	var created struct {
		ID int64 `json:"id"`
	}
	body, _ := json.Marshal(map[string]string{"body": "load " + time.Now().UTC().Format(time.RFC3339Nano), "author": author})
	if !g.do(ctx, http.MethodPost, "/records", body, http.StatusCreated, &created) {
		return
	}
	g.do(ctx, http.MethodGet, fmt.Sprintf("/records/%d", created.ID), nil, http.StatusOK, nil)
}

// do sends one request and accounts for it; it reports whether it succeeded.
func (g *Generator) do(ctx context.Context, method, path string, body []byte, want int, out any) bool {
	u := *g.base
	u.Path += path
	sent := time.Now()
	version, err := g.send(ctx, method, u.String(), body, want, out)

	now := time.Now()
	took := now.Sub(sent)
	g.mu.Lock()
	defer g.mu.Unlock()
	if took > g.slowest {
		g.slowest = took
	}
	g.report.Sent++
	c := g.report.ByVersion[version]
	c.Sent++
	if err != nil {
		c.Failed++
	}
	g.report.ByVersion[version] = c
	if err != nil {
		g.report.Failed++
		if errors.As(err, new(schemaError)) {
			g.report.SchemaFailed++
		}
		if len(g.report.Errors) < MaxErrors {
			g.report.Errors = append(g.report.Errors, fmt.Sprintf("%s %s %s: %v (sent %s, %s before)",
				now.UTC().Format("15:04:05.000"), method, path, err, sent.UTC().Format("15:04:05.000"), took.Round(time.Millisecond)))
		}
		return false
	}
	g.noteGap(now)
	if now.After(g.lastSuccess) {
		g.lastSuccess = now
	}
	return true
}

// send sends one request and checks its answer; it returns the app version that answered (see
// responseVersion) and what went wrong.
func (g *Generator) send(ctx context.Context, method, target string, body []byte, want int, out any) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return UnknownVersion, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the method and URL are already in the error string
		}
		return UnknownVersion, err
	}
	defer func() { _ = resp.Body.Close() }()
	version := responseVersion(resp)
	payload, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return version, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode != want {
		err := fmt.Errorf("status %d, want %d: %s", resp.StatusCode, want, strings.TrimSpace(string(payload)))
		var body struct {
			Schema bool `json:"schema"`
		}
		if json.Unmarshal(payload, &body) == nil && body.Schema {
			err = schemaError{err}
		}
		return version, err
	}
	if out != nil {
		if err := json.Unmarshal(payload, out); err != nil {
			return version, fmt.Errorf("decode response: %w", err)
		}
	}
	return version, nil
}

// schemaError is a failure the app answered as the schema's (see Report.SchemaFailed).
type schemaError struct{ error }

func (e schemaError) Unwrap() error { return e.error }

// responseVersion is the app version a response names in VersionHeader, as a decimal number, or
// UnknownVersion when it names none (whatever else the header holds: the report's keys stay few).
func responseVersion(resp *http.Response) string {
	v, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get(VersionHeader)))
	if err != nil || v < 0 {
		return UnknownVersion
	}
	return strconv.Itoa(v)
}

// Done is closed when Run has returned.
func (g *Generator) Done() <-chan struct{} { return g.done }

// Handler serves the report: GET /report answers the JSON report, POST /stop stops the run, waits
// for the requests in flight and answers the final report.
func (g *Generator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /report", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, g.Report())
	})
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, r *http.Request) {
		g.Stop()
		select {
		case <-g.done:
		case <-r.Context().Done():
		case <-time.After(g.cfg.RequestTimeout + time.Second):
		}
		writeJSON(w, g.Report())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
