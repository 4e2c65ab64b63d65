package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/premigrate/premigrate/internal/demo/load"
)

const loadHelp = `Usage: demo load --target URL [flags]

Sends a POST /records then a GET /records/{id} to the target on every tick, counting requests
sent and failed and the longest gap between two successful requests. Only the target URL is
contacted; redirects are not followed. The counts are also split by the app version that answered,
named by the X-Demo-Version header of the response ("unknown" for no response, or none named).

While it runs, and after it stopped, the report is served on --report-addr:
  GET  /report   the JSON report {"sent","failed","longestGapMs","slowestMs","longestStallMs","errors",
                 "startedAt","stoppedAt","running","byVersion"} ("errors" holds the first 20 error
                 strings; "byVersion" is {"<version>":{"sent":N,"failed":M},...}, e.g.
                 {"2":{"sent":40,"failed":0}}; "slowestMs" is the slowest request, "longestStallMs"
                 how far the generator itself fell behind its ticks: a starved machine, not the app)
  POST /stop     stops the run, waits for the requests in flight, answers the final report

When the run ends (--duration passed or POST /stop) the final report is printed to stdout; with a
report address the process then keeps serving the report until SIGTERM/SIGINT, without one it
exits. SIGTERM/SIGINT during the run stops it and exits.

Exit codes:
  0  the run ended (whatever its failure count)
  1  the report address could not be served
  2  usage error
`

// loadOptions are the flags of `demo load`.
type loadOptions struct {
	target     string
	rate       float64
	duration   time.Duration
	reportAddr string
	timeout    time.Duration
}

func (o *loadOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.target, "target", "", "base URL of the demo app, e.g. http://demo:8080 (required)")
	fs.Float64Var(&o.rate, "rate", load.DefaultRate, "ticks per second (each tick sends a POST and a GET), at most 1000")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long to run; 0 runs until POST /stop or a signal")
	fs.StringVar(&o.reportAddr, "report-addr", ":9090", `address serving GET /report and POST /stop; "" disables it`)
	fs.DurationVar(&o.timeout, "timeout", load.DefaultRequestTimeout, "timeout of each request")
}

func loadCmd(ctx context.Context, args []string, e *env) error {
	fs := flag.NewFlagSet("demo load", flag.ContinueOnError)
	o := &loadOptions{}
	o.register(fs)
	if done, err := parseFlags(fs, args, loadHelp, e); done {
		return err
	}
	return runLoad(ctx, o, e)
}

// runLoad is `demo load`: it sends steady traffic to the target and prints the report.
func runLoad(ctx context.Context, o *loadOptions, e *env) error {
	log := e.logger()
	if o.target == "" {
		return fail(log, exitUsage, errors.New("--target is required"), "load: --target is required")
	}
	gen, err := load.New(load.Config{Target: o.target, Rate: o.rate, Duration: o.duration, RequestTimeout: o.timeout})
	if err != nil {
		return fail(log, exitUsage, err, fmt.Sprintf("load: %v", err))
	}

	var srv *http.Server
	serveErr := make(chan error, 1)
	if o.reportAddr != "" {
		l, err := net.Listen("tcp", o.reportAddr)
		if err != nil {
			return fail(log, exitFailure, err, fmt.Sprintf("load: listen on %s: %v", o.reportAddr, err))
		}
		srv = &http.Server{Handler: gen.Handler(), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)}
		go func() { serveErr <- srv.Serve(l) }()
		log.Info(fmt.Sprintf("load: report served on %s (GET /report, POST /stop)", l.Addr()))
		defer func() { _ = srv.Close() }()
	}

	log.Info(fmt.Sprintf("load: sending %g ticks/s to %s for %s", o.rate, o.target, o.duration))
	report := gen.Run(ctx)
	log.Info(fmt.Sprintf("load: stopped: %d sent, %d failed, longest gap %dms, slowest request %dms, own longest stall %dms",
		report.Sent, report.Failed, report.LongestGapMs, report.SlowestMs, report.LongestStallMs))
	enc := json.NewEncoder(e.Out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(report); err != nil {
		return fail(log, exitFailure, err, fmt.Sprintf("load: print report: %v", err))
	}
	if srv == nil || ctx.Err() != nil {
		return nil
	}
	log.Info("load: report still served until SIGTERM")
	select {
	case <-ctx.Done():
		return nil
	case err := <-serveErr:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		err = fmt.Errorf("serve report: %w", err)
		return fail(log, exitFailure, err, fmt.Sprintf("load: %v", err))
	}
}
