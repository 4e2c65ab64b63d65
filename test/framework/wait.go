package framework

import (
	"context"
	"testing"
	"time"
)

// WaitUntil polls cond until it returns true, an error, or timeout passes. Between two polls it waits
// PollInterval of what the last poll took: a client-go read polls every 500 ms, a `kubectl exec psql` about
// every 2 s, so that no condition spends the machine's cores on being asked (development.md).
func WaitUntil(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		start := time.Now()
		done, err := cond(ctx)
		if err == nil && done {
			return
		}
		if err == nil {
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(PollInterval(time.Since(start))):
				continue
			}
		}
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// PollInterval is the wait after a poll that took took: four times as long, within [500 ms, 5 s].
func PollInterval(took time.Duration) time.Duration {
	return min(max(4*took, 500*time.Millisecond), 5*time.Second)
}
