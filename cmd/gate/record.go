package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/record"
)

// recordOptions are the flags of `gate record`, and of `gate run` which records too.
type recordOptions struct {
	k8s      k8sFlags
	db       databaseFlags
	identity string
	records  string
	job      string
	keep     int
	waitCM   time.Duration
	create   string
}

func (o *recordOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.identity, "identity", "", "migration identity that succeeded: the key to write (required)")
	fs.StringVar(&o.records, "records", "", "name of the records ConfigMap (required)")
	fs.StringVar(&o.job, "job", "", "name of the migration Job, stored with the record (required)")
	fs.IntVar(&o.keep, "keep", 20, "keep only the newest N records, by completion time; 0 keeps all")
	fs.DurationVar(&o.waitCM, "wait-for-configmap", 2*time.Minute,
		"retry this long while the API server fails or (without --create-records) the ConfigMap does not exist yet")
	fs.StringVar(&o.create, "create-records", "",
		`create the records ConfigMap when it is missing, with this metadata: {"labels":{...},"annotations":{...}} (the chart passes its own, Helm's ownership included, so Helm adopts it)`)
	o.db.register(fs)
	o.k8s.register(fs)
}

// recorder is what `gate record` and `gate run` share once the flags are checked.
type recorder struct {
	o       *recordOptions
	ns      string
	clients *apiClients
	meta    *record.Metadata // nil: never create the ConfigMap
	spec    dbid.Spec        // how to name the database
	// database is the database the migration runs on, once resolved (resolve); the record names it
	database dbid.ID
}

// prepare checks the flags and builds the client.
func (o *recordOptions) prepare(e *env) (*recorder, error) {
	if err := checkIdentity(o.identity); err != nil {
		return nil, &usageError{err: err}
	}
	switch {
	case o.records == "":
		return nil, usageErrorf("--records is required")
	case o.job == "":
		return nil, usageErrorf("--job is required")
	case o.keep < 0:
		return nil, usageErrorf("--keep must be >= 0")
	case o.waitCM < 0:
		return nil, usageErrorf("--wait-for-configmap must be >= 0")
	}
	spec, err := o.db.spec(e.getenv)
	if err != nil {
		return nil, &usageError{err: err}
	}
	var meta *record.Metadata
	if o.create != "" {
		m, err := record.ParseMetadata(o.create)
		if err != nil {
			return nil, usageErrorf("--create-records: %v", err)
		}
		meta = m
	}
	ns, clients, err := o.k8s.setup(e)
	if err != nil {
		return nil, err
	}
	return &recorder{o: o, ns: ns, clients: clients, meta: meta, spec: spec}, nil
}

// resolve names the database the migration runs on (nothing when no --database-* flag is set).
func (r *recorder) resolve(ctx context.Context, timeout time.Duration, log *slog.Logger) error {
	id, err := resolveDatabase(ctx, r.spec, r.clients.objectGetter(r.ns), timeout, log)
	if err != nil {
		log.Error(fmt.Sprintf("not running the migration: %v", err))
		if ctx.Err() != nil {
			return cli.Exit(exitInterrupted, err)
		}
		return cli.Exit(exitFailed, err)
	}
	r.database = id
	return nil
}

// ensure returns the records ConfigMap, created when missing and --create-records is set; nil when it is
// missing and may not be created.
func (r *recorder) ensure(ctx context.Context) (*corev1.ConfigMap, bool, error) {
	return record.Ensure(ctx, r.clients.configMaps(r.ns), r.o.records, r.meta)
}

// write records the identity.
func (r *recorder) write(ctx context.Context, e *env) error {
	log := e.logger()
	err := record.Write(ctx, r.clients.configMaps(r.ns), record.Options{
		Namespace:        r.ns,
		ConfigMap:        r.o.records,
		Identity:         r.o.identity,
		Job:              r.o.job,
		Database:         r.database.Value,
		Keep:             r.o.keep,
		WaitForConfigMap: r.o.waitCM,
		Create:           r.meta,
		Logf:             cli.Logf(log),
	})
	if err != nil {
		log.Error(err.Error())
		if ctx.Err() != nil {
			return cli.Exit(exitInterrupted, err)
		}
		return cli.Exit(exitFailed, err)
	}
	return nil
}

// runRecord is `gate record`: it records that the migration of an identity succeeded.
func runRecord(ctx context.Context, o *recordOptions, e *env) error {
	r, err := o.prepare(e)
	if err != nil {
		return err
	}
	if err := r.resolve(ctx, o.waitCM, e.logger()); err != nil {
		return err
	}
	return r.write(ctx, e)
}
