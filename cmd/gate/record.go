package main

import (
	"context"
	"flag"
	"time"

	corev1 "k8s.io/api/core/v1"

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
	create   *string
}

func registerRecordFlags(fs *flag.FlagSet) *recordOptions {
	o := &recordOptions{
		identity: fs.String("identity", "", "migration identity that succeeded: the key to write (required)"),
		records:  fs.String("records", "", "name of the records ConfigMap (required)"),
		job:      fs.String("job", "", "name of the migration Job, stored with the record (required)"),
		keep:     fs.Int("keep", 20, "keep only the newest N records, by completion time; 0 keeps all"),
		waitCM: fs.Duration("wait-for-configmap", 2*time.Minute,
			"retry this long while the API server fails or (without --create-records) the ConfigMap does not exist yet"),
		create: fs.String("create-records", "",
			`create the records ConfigMap when it is missing, with this metadata: {"labels":{...},"annotations":{...}} (the chart passes its own, Helm's ownership included, so Helm adopts it)`),
	}
	o.k.register(fs)
	return o
}

// recorder is what `gate record` and `gate run` share once the flags are checked.
type recorder struct {
	o       *recordOptions
	ns      string
	clients *apiClients
	meta    *record.Metadata // nil: never create the ConfigMap
}

// prepare checks the flags and builds the client; it returns a non-zero exit code on a usage error.
func (o *recordOptions) prepare(e *env, fs *flag.FlagSet) (*recorder, int) {
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
	var meta *record.Metadata
	if *o.create != "" {
		m, err := record.ParseMetadata(*o.create)
		if err != nil {
			return nil, usageError(e, fs, "--create-records: %v", err)
		}
		meta = m
	}
	ns, clients, code := o.k.setup(e, fs)
	if code != exitOK {
		return nil, code
	}
	return &recorder{o: o, ns: ns, clients: clients, meta: meta}, exitOK
}

// ensure returns the records ConfigMap, created when missing and --create-records is set; nil when it is
// missing and may not be created.
func (r *recorder) ensure(ctx context.Context) (*corev1.ConfigMap, bool, error) {
	return record.Ensure(ctx, r.clients.configMaps(r.ns), *r.o.records, r.meta)
}

// write records the identity and returns the exit code.
func (r *recorder) write(ctx context.Context, logf func(string, ...any)) int {
	err := record.Write(ctx, r.clients.configMaps(r.ns), record.Options{
		Namespace:        r.ns,
		ConfigMap:        *r.o.records,
		Identity:         *r.o.identity,
		Job:              *r.o.job,
		Keep:             *r.o.keep,
		WaitForConfigMap: *r.o.waitCM,
		Create:           r.meta,
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

func recordFlags(fs *flag.FlagSet, e *env) func(ctx context.Context) int {
	o := registerRecordFlags(fs)
	return func(ctx context.Context) int {
		r, code := o.prepare(e, fs)
		if code != exitOK {
			return code
		}
		return r.write(ctx, e.logger())
	}
}
