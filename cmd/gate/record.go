package main

import (
	"context"
	"flag"
	"time"

	"github.com/premigrate/premigrate/internal/record"
)

// recordOptions are the flags of `gate record` and `gate run`.
type recordOptions struct {
	k        k8sFlags
	identity *string
	records  *string
	job      *string
	keep     *int
	waitCM   *time.Duration
}

func registerRecordFlags(fs *flag.FlagSet) *recordOptions {
	o := &recordOptions{
		identity: fs.String("identity", "", "migration identity that succeeded: the key to write (required)"),
		records:  fs.String("records", "", "name of the records ConfigMap (required)"),
		job:      fs.String("job", "", "name of the migration Job, stored with the record (required)"),
		keep:     fs.Int("keep", 20, "keep only the newest N records, by completion time; 0 keeps all"),
		waitCM:   fs.Duration("wait-for-configmap", 2*time.Minute, "retry this long while the ConfigMap does not exist yet or the API server fails"),
	}
	o.k.register(fs)
	return o
}

// prepare checks the flags and builds the client; it returns a non-zero exit code on a usage error.
func (o *recordOptions) prepare(e *env, fs *flag.FlagSet) (func(ctx context.Context) int, int) {
	if err := checkIdentity(*o.identity); err != nil {
		return nil, usageError(e, fs, "%v", err)
	}
	switch {
	case *o.records == "":
		return nil, usageError(e, fs, "--records is required")
	case *o.job == "":
		return nil, usageError(e, fs, "--job is required")
	case *o.keep < 0:
		return nil, usageError(e, fs, "--keep must be >= 0")
	case *o.waitCM < 0:
		return nil, usageError(e, fs, "--wait-for-configmap must be >= 0")
	}
	ns, clients, code := o.k.setup(e, fs)
	if code != exitOK {
		return nil, code
	}
	return func(ctx context.Context) int {
		logf := e.logger()
		err := record.Write(ctx, clients.configMaps(ns), record.Options{
			Namespace:        ns,
			ConfigMap:        *o.records,
			Identity:         *o.identity,
			Job:              *o.job,
			Keep:             *o.keep,
			WaitForConfigMap: *o.waitCM,
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
	}, exitOK
}

func recordFlags(fs *flag.FlagSet, e *env) func(ctx context.Context) int {
	o := registerRecordFlags(fs)
	return func(ctx context.Context) int {
		write, code := o.prepare(e, fs)
		if code != exitOK {
			return code
		}
		return write(ctx)
	}
}
