// Package server is the demo app's HTTP server: a tiny records API on PostgreSQL that needs the
// schema of its app version (what each migration up to it added), liveness and readiness
// endpoints, and a graceful shutdown that first fails readiness, keeps serving for a while (so load
// balancers stop sending traffic), then drains in-flight requests. Every response names the app
// version in the VersionHeader header.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/premigrate/premigrate/internal/demo/schema"
)

// Defaults for Config fields left zero.
const (
	DefaultReadinessCacheTTL = time.Second
	DefaultShutdownTimeout   = 30 * time.Second
	maxBodyBytes             = 1 << 20
	dbTimeout                = 5 * time.Second
)

// Config configures a Server.
type Config struct {
	// Pool is the database the records live in.
	Pool *pgxpool.Pool
	// AppVersion is the schema version this binary is built for (DEMO_VERSION).
	AppVersion int
	// ShutdownDelay is how long the server keeps serving, not ready, after shutdown begins.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the drain of in-flight requests after the delay.
	ShutdownTimeout time.Duration
	// ReadinessCacheTTL is how long a schema version read stays valid for /readyz.
	ReadinessCacheTTL time.Duration
	// Logger receives lifecycle and error lines; nil discards them.
	Logger *log.Logger
}

// Server serves the demo API. Create it with New.
type Server struct {
	cfg      Config
	log      *log.Logger
	mux      *http.ServeMux
	shutting atomic.Bool

	cacheMu  sync.Mutex
	cachedAt time.Time
	cachedV  int
	cachedE  error
}

// New returns a server for cfg.
func New(cfg Config) *Server {
	if cfg.ReadinessCacheTTL == 0 {
		cfg.ReadinessCacheTTL = DefaultReadinessCacheTTL
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = log.New(io.Discard, "", 0)
	}
	s := &Server{cfg: cfg, log: logger, mux: http.NewServeMux()}
	s.mux.HandleFunc("POST /records", s.createRecord)
	s.mux.HandleFunc("GET /records/{id}", s.getRecord)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	return s
}

// Handler returns the HTTP handler of all endpoints.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Once shutdown began, every response closes its connection: clients move to the pods that stay,
		// and no keep-alive connection is left idle for Shutdown to close under a client's next request.
		if s.shutting.Load() {
			w.Header().Set("Connection", "close")
		}
		w.Header().Set(VersionHeader, strconv.Itoa(s.cfg.AppVersion))
		s.mux.ServeHTTP(w, r)
	})
}

// Serve serves on l until ctx is cancelled (the SIGTERM of a pod), then shuts down: readiness
// fails at once, requests are still served for ShutdownDelay, then the listener closes and
// in-flight requests are drained (bounded by ShutdownTimeout).
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          s.log,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()
	s.log.Printf("serving on %s (app version %d, ready on schema versions %d..%d)", l.Addr(), s.cfg.AppVersion, s.cfg.AppVersion, s.cfg.AppVersion+1)

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	s.shutting.Store(true)
	s.log.Printf("shutdown requested: /readyz now fails; still serving for %s", s.cfg.ShutdownDelay)
	time.Sleep(s.cfg.ShutdownDelay)

	s.log.Printf("closing the listener and draining in-flight requests (up to %s)", s.cfg.ShutdownTimeout)
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("drain in-flight requests: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	s.log.Printf("shutdown complete")
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type readiness struct {
	Ready         bool   `json:"ready"`
	AppVersion    int    `json:"appVersion"`
	SchemaVersion *int   `json:"schemaVersion,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	res := readiness{AppVersion: s.cfg.AppVersion}
	if s.shutting.Load() {
		res.Reason = "shutting down"
		writeJSON(w, http.StatusServiceUnavailable, res)
		return
	}
	v, err := s.schemaVersion(r.Context())
	if err != nil {
		res.Reason = err.Error()
		writeJSON(w, http.StatusServiceUnavailable, res)
		return
	}
	res.SchemaVersion = &v
	if !schema.Compatible(s.cfg.AppVersion, v) {
		res.Reason = fmt.Sprintf("schema version %d is outside %d..%d", v, s.cfg.AppVersion, s.cfg.AppVersion+1)
		writeJSON(w, http.StatusServiceUnavailable, res)
		return
	}
	res.Ready = true
	writeJSON(w, http.StatusOK, res)
}

// schemaVersion reads the schema version at most once per ReadinessCacheTTL, however many probes
// arrive: concurrent callers wait for the one read in progress.
func (s *Server) schemaVersion(ctx context.Context) (int, error) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if !s.cachedAt.IsZero() && time.Since(s.cachedAt) < s.cfg.ReadinessCacheTTL {
		return s.cachedV, s.cachedE
	}
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	v, err := schema.Version(ctx, s.cfg.Pool)
	if err != nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		// The prober went away: do not cache its cancellation.
		return 0, err
	}
	s.cachedAt, s.cachedV, s.cachedE = time.Now(), v, err
	return v, err
}

// writeDatabaseError answers a request whose database work failed: 500, with "schema": true when the database
// refused a statement for the schema (SQLSTATE class 42: an undefined table or column, what an app version
// meets on a schema older than its own), so that a client tells that from a slow or unreachable database.
func writeDatabaseError(w http.ResponseWriter, msg string, err error) {
	body := map[string]any{"error": msg}
	if IsSchemaError(err) {
		body["schema"] = true
	}
	writeJSON(w, http.StatusInternalServerError, body)
}

// IsSchemaError reports whether err is the database refusing a statement for the schema (SQLSTATE class 42).
func IsSchemaError(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && strings.HasPrefix(pg.Code, "42")
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
