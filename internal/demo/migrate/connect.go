package migrate

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Backoff bounds between two connection attempts.
const (
	firstRetryDelay = 200 * time.Millisecond
	maxRetryDelay   = 5 * time.Second
	// maxAttemptTime bounds a single attempt, so an unanswered SYN does not eat the whole budget.
	maxAttemptTime = 10 * time.Second
	minAttemptTime = time.Second
)

// ConfigError is a problem with the configuration (a malformed DATABASE_URL, an unknown version):
// retrying cannot fix it.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Connect opens one session to databaseURL, retrying with exponential backoff until timeout has
// passed, so a database that is still starting (or whose Service has no endpoint yet) is waited
// for. A malformed URL fails at once with a *ConfigError.
func Connect(ctx context.Context, databaseURL string, timeout time.Duration, logger *log.Logger) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("parse DATABASE_URL: %w", err)}
	}
	start := time.Now()
	deadline := start.Add(timeout)
	delay := firstRetryDelay
	for attempt := 1; ; attempt++ {
		// Every attempt gets at least minAttemptTime, so the last one still reports why the
		// database is unreachable rather than an expired deadline.
		attemptTime := min(max(time.Until(deadline), minAttemptTime), maxAttemptTime)
		attemptCtx, cancel := context.WithTimeout(ctx, attemptTime)
		conn, err := pgx.ConnectConfig(attemptCtx, cfg.Copy())
		cancel()
		if err == nil {
			if attempt > 1 {
				logger.Printf("connected to the database after %d attempts (%s)", attempt, time.Since(start).Round(time.Millisecond))
			}
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to the database: %w", errors.Join(ctx.Err(), err))
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return nil, fmt.Errorf("could not connect to the database within %s (%d attempts): %w", timeout, attempt, err)
		}
		wait := min(delay, remaining)
		logger.Printf("database not reachable yet (attempt %d): %s; retrying in %s", attempt, OneLine(err), wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to the database: %w", errors.Join(ctx.Err(), err))
		case <-time.After(wait):
		}
		delay = min(delay*2, maxRetryDelay)
	}
}

// OneLine renders err on a single log line (pgx lists every address it tried on its own line).
func OneLine(err error) string {
	s := strings.ReplaceAll(err.Error(), ":\n", ": ")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}
