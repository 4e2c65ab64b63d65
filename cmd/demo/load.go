package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
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
  GET  /report   the JSON report {"sent","failed","longestGapMs","errors","startedAt","stoppedAt","running",
                 "byVersion"} ("errors" holds the first 20 error strings; "byVersion" is
                 {"<version>":{"sent":N,"failed":M},...}, e.g. {"2":{"sent":40,"failed":0}})
  POST /stop     stops the run, waits for the requests in flight, answers the final report

When the run ends (--duration passed or POST /stop) the final report is printed to stdout; with a
report address the process then keeps serving the report until SIGTERM/SIGINT, without one it
exits. SIGTERM/SIGINT during the run stops it and exits.

Exit codes:
  0  the run ended (whatever its failure count)
  1  the report address could not be served
  2  usage error
`

func loadCmd(ctx context.Context, args []string, _ env, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo load", flag.ContinueOnError)
	target := fs.String("target", "", "base URL of the demo app, e.g. http://demo:8080 (required)")
	rate := fs.Float64("rate", load.DefaultRate, "ticks per second (each tick sends a POST and a GET), at most 1000")
	duration := fs.Duration("duration", 10*time.Minute, "how long to run; 0 runs until POST /stop or a signal")
	reportAddr := fs.String("report-addr", ":9090", `address serving GET /report and POST /stop; "" disables it`)
	timeout := fs.Duration("timeout", load.DefaultRequestTimeout, "timeout of each request")
	if code := parseFlags(fs, args, loadHelp, stdout, stderr); code >= 0 {
		return code
	}
	logger := newLogger(stderr)
	if *target == "" {
		logger.Printf("load: --target is required")
		return exitUsage
	}
	gen, err := load.New(load.Config{Target: *target, Rate: *rate, Duration: *duration, RequestTimeout: *timeout})
	if err != nil {
		logger.Printf("load: %v", err)
		return exitUsage
	}

	var srv *http.Server
	serveErr := make(chan error, 1)
	if *reportAddr != "" {
		l, err := net.Listen("tcp", *reportAddr)
		if err != nil {
			logger.Printf("load: listen on %s: %v", *reportAddr, err)
			return exitFailure
		}
		srv = &http.Server{Handler: gen.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger}
		go func() { serveErr <- srv.Serve(l) }()
		logger.Printf("load: report served on %s (GET /report, POST /stop)", l.Addr())
		defer func() { _ = srv.Close() }()
	}

	logger.Printf("load: sending %g ticks/s to %s for %s", *rate, *target, *duration)
	report := gen.Run(ctx)
	logger.Printf("load: stopped: %d sent, %d failed, longest gap %dms", report.Sent, report.Failed, report.LongestGapMs)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(report); err != nil {
		logger.Printf("load: print report: %v", err)
		return exitFailure
	}
	if srv == nil || ctx.Err() != nil {
		return exitOK
	}
	logger.Printf("load: report still served until SIGTERM")
	select {
	case <-ctx.Done():
		return exitOK
	case err := <-serveErr:
		if errors.Is(err, http.ErrServerClosed) {
			return exitOK
		}
		logger.Printf("load: %v", fmt.Errorf("serve report: %w", err))
		return exitFailure
	}
}
