package main

import (
	"context"
	"flag"
	"time"

	"github.com/premigrate/premigrate/internal/record"
)

func recordFlags(fs *flag.FlagSet, e *env) func(ctx context.Context) int {
	var (
		k        k8sFlags
		identity = fs.String("identity", "", "migration identity that succeeded: the key to write (required)")
		records  = fs.String("records", "", "name of the records ConfigMap (required)")
		job      = fs.String("job", "", "name of the migration Job, stored with the record (required)")
		keep     = fs.Int("keep", 20, "keep only the newest N records, by completion time; 0 keeps all")
		waitCM   = fs.Duration("wait-for-configmap", 2*time.Minute, "retry this long while the ConfigMap does not exist yet or the API server fails")
	)
	k.register(fs)
	return func(ctx context.Context) int {
		if err := checkIdentity(*identity); err != nil {
			return usageError(e, fs, "%v", err)
		}
		switch {
		case *records == "":
			return usageError(e, fs, "--records is required")
		case *job == "":
			return usageError(e, fs, "--job is required")
		case *keep < 0:
			return usageError(e, fs, "--keep must be >= 0")
		case *waitCM < 0:
			return usageError(e, fs, "--wait-for-configmap must be >= 0")
		}
		ns, clients, code := k.setup(e, fs)
		if code != exitOK {
			return code
		}
		logf := e.logger()
		err := record.Write(ctx, clients.configMaps(ns), record.Options{
			Namespace:        ns,
			ConfigMap:        *records,
			Identity:         *identity,
			Job:              *job,
			Keep:             *keep,
			WaitForConfigMap: *waitCM,
			Logf:             logf,
		})
		if err != nil {
			logf("%v", err)
			if ctx.Err() != nil {
				return exitInterrupted
			}
			return exitFailed
		}
		return exitOK
	}
}
