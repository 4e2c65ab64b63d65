// Package probe polls an HTTP URL until it answers 2xx (the chart's helm test).
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Config says what to probe and for how long.
type Config struct {
	URL string
	// Timeout bounds all attempts (default 60s).
	Timeout time.Duration
	// Interval is the pause between attempts (default 1s).
	Interval time.Duration
	// RequestTimeout bounds one attempt (default 5s, at most Timeout).
	RequestTimeout time.Duration
	// Client defaults to a new http.Client.
	Client *http.Client
	// Logf defaults to discarding.
	Logf func(format string, args ...any)
}

// ErrTimeout is wrapped by Run's error when no attempt got a 2xx in time.
var ErrTimeout = errors.New("probe timed out")

// ErrInvalidURL is wrapped by Run's error when cfg.URL cannot be probed.
var ErrInvalidURL = errors.New("invalid probe URL")

// Run GETs cfg.URL until an answer is 2xx (nil) or cfg.Timeout passes.
func Run(ctx context.Context, cfg Config) error {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %q: want http(s)://host[:port]/path", ErrInvalidURL, cfg.URL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	cfg.RequestTimeout = min(cfg.RequestTimeout, cfg.Timeout)
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}

	deadline := time.Now().Add(cfg.Timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var last error
	for attempt := 1; ; attempt++ {
		status, err := get(ctx, cfg)
		if err == nil && status >= 200 && status < 300 {
			cfg.Logf("GET %s: %d after %d attempt(s)", cfg.URL, status, attempt)
			return nil
		}
		if err == nil {
			err = fmt.Errorf("status %d", status)
		}
		last = err
		cfg.Logf("GET %s: attempt %d: %v", cfg.URL, attempt, err)
		select {
		case <-ctx.Done():
			if time.Now().Before(deadline) {
				return fmt.Errorf("probe %s: %w", cfg.URL, context.Cause(ctx))
			}
			return fmt.Errorf("%w: no 2xx from %s within %s, last: %w", ErrTimeout, cfg.URL, cfg.Timeout, last)
		case <-time.After(cfg.Interval):
		}
	}
}

func get(ctx context.Context, cfg Config) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL, nil)
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}
