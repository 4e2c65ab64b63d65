package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/probe"
)

// probeOptions are the flags of `gate probe`.
type probeOptions struct {
	url      string
	timeout  time.Duration
	interval time.Duration
}

func (o *probeOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.url, "url", "", "URL to GET until it answers 2xx (required)")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "give up after this long with exit code 4")
	fs.DurationVar(&o.interval, "interval", time.Second, "pause between attempts")
}

// runProbe is `gate probe`: it GETs the URL until it answers 2xx (exit 0) or the timeout passed (3).
func runProbe(ctx context.Context, o *probeOptions, e *env) error {
	if o.url == "" {
		return cli.Usagef("--url is required")
	}
	if o.timeout <= 0 || o.interval <= 0 {
		return cli.Usagef("--timeout and --interval must be > 0")
	}
	log := e.logger()
	err := probe.Run(ctx, probe.Config{URL: o.url, Timeout: o.timeout, Interval: o.interval, Logf: cli.Logf(log)})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, probe.ErrInvalidURL):
		return &cli.UsageError{Err: err}
	case errors.Is(err, probe.ErrTimeout):
		log.Error(err.Error())
		return cli.Exit(exitcode.Timeout, err)
	case ctx.Err() != nil:
		log.Error("interrupted: " + err.Error())
		return cli.Exit(exitcode.Interrupted, err)
	default:
		log.Error(err.Error())
		return cli.Exit(exitcode.Failed, err)
	}
}
