package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Source observes the Deployment, its ReplicaSets and its pods.
type Source interface {
	Observe(ctx context.Context) (Observation, error)
}

// ErrTimeout is Wait's error when its timeout passed before the facts held (or the Deployment left).
var ErrTimeout = errors.New("timed out waiting for the rollout")

// WaitConfig says what Wait waits for and how it looks.
type WaitConfig struct {
	Identity string
	// Soak is how long the facts must hold without a break before Wait returns Done (0: at the first
	// observation where they hold). A break (an old pod scaled up again, a new pod gone unavailable) starts it
	// over.
	Soak time.Duration
	// Interval is the time between two observations (default 2s). The wait lasts through the old pods'
	// grace periods, tens of seconds; a list of three kinds every 2 s is cheaper than three watches held
	// that long, and 2 s is nothing beside it.
	Interval time.Duration
	// Timeout bounds the whole wait (0: none, the context's).
	Timeout time.Duration
	// Progress is the period of the progress lines (default 10s).
	Progress time.Duration
	Log      *slog.Logger
	// now and after are the clock (tests).
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

func (c *WaitConfig) defaults() error {
	if c.Identity == "" {
		return errors.New("rollout: no identity to wait for")
	}
	if c.Soak < 0 || c.Interval < 0 || c.Timeout < 0 || c.Progress < 0 {
		return fmt.Errorf("rollout: negative duration (soak %s, interval %s, timeout %s, progress %s)", c.Soak, c.Interval, c.Timeout, c.Progress)
	}
	if c.Interval == 0 {
		c.Interval = 2 * time.Second
	}
	if c.Progress == 0 {
		c.Progress = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.after == nil {
		c.after = time.After
	}
	return nil
}

// Wait observes src until the rollout facts of cfg.Identity have held for cfg.Soak (Done) or the Deployment
// left the identity (Left), and returns that verdict. It returns an error when ctx ends, when the timeout
// passed (ErrTimeout, wrapped with the last reason) or when the configuration cannot work. An observation that
// fails (the API server away for a moment) is logged and counts as a break of the soak.
func Wait(ctx context.Context, cfg WaitConfig, src Source) (Verdict, error) {
	if err := cfg.defaults(); err != nil {
		return Verdict{}, err
	}
	start := cfg.now()
	var (
		holdingSince time.Time // zero while the facts do not hold
		lastReason   string
		lastProgress = start
	)
	for {
		o, err := src.Observe(ctx)
		now := cfg.now()
		switch {
		case ctx.Err() != nil:
			return Verdict{}, fmt.Errorf("waiting for the rollout of %s: %w", cfg.Identity, context.Cause(ctx))
		case err != nil:
			holdingSince = time.Time{}
			lastReason = "cannot observe the rollout: " + err.Error()
			cfg.Log.Warn(lastReason)
		default:
			v := Evaluate(o, cfg.Identity)
			switch v.State {
			case Left:
				cfg.Log.Info("the rollout left the identity: " + v.Reason)
				return v, nil
			case Pending:
				if !holdingSince.IsZero() {
					cfg.Log.Info(fmt.Sprintf("the rollout facts stopped holding after %s: %s", now.Sub(holdingSince).Round(time.Millisecond), v.Reason))
				}
				holdingSince = time.Time{}
			case Done:
				if holdingSince.IsZero() {
					holdingSince = now
					if cfg.Soak > 0 {
						cfg.Log.Info(fmt.Sprintf("the rollout facts hold (%s); they must hold for %s", v.Reason, cfg.Soak))
					}
				}
				if now.Sub(holdingSince) >= cfg.Soak {
					cfg.Log.Info(fmt.Sprintf("the rollout of %s ended after %s: %s", cfg.Identity, now.Sub(start).Round(time.Millisecond), v.Reason))
					return v, nil
				}
			}
			lastReason = v.Reason
		}
		if cfg.Timeout > 0 && now.Sub(start) >= cfg.Timeout {
			return Verdict{}, fmt.Errorf("%w of %s after %s: %s", ErrTimeout, cfg.Identity, cfg.Timeout, lastReason)
		}
		if now.Sub(lastProgress) >= cfg.Progress {
			lastProgress = now
			cfg.Log.Info(fmt.Sprintf("waiting %s for the rollout of %s: %s", now.Sub(start).Round(time.Second), cfg.Identity, lastReason))
		}
		select {
		case <-ctx.Done():
			return Verdict{}, fmt.Errorf("waiting for the rollout of %s: %w", cfg.Identity, context.Cause(ctx))
		case <-cfg.after(cfg.Interval):
		}
	}
}
