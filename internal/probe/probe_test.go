package probe_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/premigrate/premigrate/internal/probe"
)

func quick(url string) probe.Config {
	return probe.Config{URL: url, Timeout: 300 * time.Millisecond, Interval: 10 * time.Millisecond}
}

func TestRunSucceedsOnceTheServerAnswers2xx(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	cfg := quick(srv.URL + "/readyz")
	cfg.Timeout = 10 * time.Second
	if err := probe.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

func TestRunTimesOut(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	defer failing.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer slow.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	tests := map[string]string{
		"when the server never answers 2xx": failing.URL,
		"when the server never answers":     slow.URL,
		"when nothing listens":              closed.URL,
	}
	for name, url := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := probe.Run(context.Background(), quick(url))
			if !errors.Is(err, probe.ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %s for a 300ms timeout", took)
			}
		})
	}
}

func TestRunRejectsAnInvalidURL(t *testing.T) {
	for _, url := range []string{"", "localhost:8080/readyz", "ftp://example.com/", "http://", "http://a b/"} {
		t.Run(url, func(t *testing.T) {
			if err := probe.Run(context.Background(), quick(url)); !errors.Is(err, probe.ErrInvalidURL) {
				t.Fatalf("err = %v, want ErrInvalidURL", err)
			}
		})
	}
}

func TestRunStopsWhenTheContextIsCancelled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	cfg := quick(srv.URL)
	cfg.Timeout = time.Minute
	err := probe.Run(ctx, cfg)
	if err == nil || errors.Is(err, probe.ErrTimeout) {
		t.Fatalf("err = %v, want a cancellation error", err)
	}
}
