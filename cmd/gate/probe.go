package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/premigrate/premigrate/internal/probe"
)

func probeFlags(fs *flag.FlagSet, e *env) func(ctx context.Context) int {
	var (
		url      = fs.String("url", "", "URL to GET until it answers 2xx (required)")
		timeout  = fs.Duration("timeout", 60*time.Second, "give up after this long with exit code 3")
		interval = fs.Duration("interval", time.Second, "pause between attempts")
	)
	return func(ctx context.Context) int {
		if *url == "" {
			return usageError(e, fs, "--url is required")
		}
		if *timeout <= 0 || *interval <= 0 {
			return usageError(e, fs, "--timeout and --interval must be > 0")
		}
		logf := e.logger()
		err := probe.Run(ctx, probe.Config{URL: *url, Timeout: *timeout, Interval: *interval, Logf: logf})
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, probe.ErrInvalidURL):
			return usageError(e, fs, "%v", err)
		case errors.Is(err, probe.ErrTimeout):
			logf("%v", err)
			return exitTimeout
		case ctx.Err() != nil:
			logf("interrupted: %v", err)
			return exitInterrupted
		default:
			logf("%v", err)
			return exitFailed
		}
	}
}
