package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/premigrate/premigrate/internal/gate"
)

func waitFlags(fs *flag.FlagSet, e *env) func(ctx context.Context) int {
	var (
		k        k8sFlags
		identity = fs.String("identity", "", "migration identity to wait for: a key of the records ConfigMap (required)")
		records  = fs.String("records", "", "name of the records ConfigMap written by gate record (required)")
		job      = fs.String("job", "", "exact name of the migration Job of this identity (required): only that Job's Complete condition counts, never another Job's")
		timeout  = fs.Duration("timeout", 15*time.Minute, "give up after this long with exit code 3; 0 waits forever")
		progress = fs.Duration("progress-interval", 10*time.Second, "period of the progress lines")
	)
	k.register(fs)
	return func(ctx context.Context) int {
		if err := checkIdentity(*identity); err != nil {
			return usageError(e, fs, "%v", err)
		}
		if *records == "" {
			return usageError(e, fs, "--records is required")
		}
		if *job == "" {
			return usageError(e, fs, "--job is required")
		}
		if *timeout < 0 || *progress <= 0 {
			return usageError(e, fs, "--timeout must be >= 0 and --progress-interval > 0")
		}
		ns, clients, code := k.setup(e, fs)
		if code != exitOK {
			return code
		}
		logf := e.logger()
		res, err := gate.Wait(ctx, gate.Config{
			Namespace:        ns,
			Identity:         *identity,
			Records:          *records,
			Job:              *job,
			Timeout:          *timeout,
			ProgressInterval: *progress,
			Logf:             logf,
		}, clients.jobs(ns), clients.configMaps(ns))
		switch {
		case errors.Is(err, gate.ErrInvalidConfig):
			return usageError(e, fs, "%v", err)
		case err != nil:
			logf("interrupted: %v", err)
			return exitInterrupted
		}
		switch res.Outcome {
		case gate.Succeeded:
			return exitOK
		case gate.Failed:
			return exitFailed
		case gate.TimedOut:
			return exitTimeout
		default:
			logf("unexpected outcome %v", res.Outcome)
			return exitFailed
		}
	}
}
