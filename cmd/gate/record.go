package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/record"
)

// recordOptions are the flags that name the records, shared by the commands that read or write them.
type recordOptions struct {
	k8s      k8sFlags
	db       databaseFlags
	identity string
	records  string
	store    string
	job      string
	keep     int
	waitCM   time.Duration
	create   string
}

func (o *recordOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.identity, "identity", "", "migration identity that succeeded: the key to write (required)")
	fs.StringVar(&o.records, "records", "", "name of the records ConfigMap (required)")
	fs.StringVar(&o.store, "store", "",
		"name of the ConfigMap that keeps the records, outside the Helm release so that no apply strategy (helm --force, a replace) wipes them: "+
			"created when missing, owned by the object of --database-object (the records live as long as the data they describe), "+
			"by nothing when only --database-url-env names the database, else by the --records ConfigMap; it starts with the records kept there "+
			"before (empty: the records are kept in --records itself)")
	fs.StringVar(&o.job, "job", "", "name of the migration Job, stored with the record (required)")
	fs.IntVar(&o.keep, "keep", 20, "keep only the newest N records, by completion time; 0 keeps all")
	fs.DurationVar(&o.waitCM, "wait-for-configmap", 2*time.Minute,
		"retry this long while the API server fails or (without --create-records) the ConfigMap does not exist yet")
	fs.StringVar(&o.create, "create-records", "",
		`create the records ConfigMap when it is missing, with this metadata: {"labels":{...},"annotations":{...}} (the chart passes its own, Helm's ownership included, so Helm adopts it)`)
	o.db.register(fs)
	o.k8s.register(fs)
}

// recorder is what the commands that read or write the records share once the flags are checked.
type recorder struct {
	o       *recordOptions
	ns      string
	clients *apiClients
	meta    *record.Metadata // nil: never create the ConfigMap
	spec    dbid.Spec        // how to name the database
	// database is the database the migration runs on, once resolved (resolve); the record names it
	database dbid.ID
	// jobCreated is the creation time of the migration's Job, once read (lock); the record stores it
	jobCreated time.Time
	// started is when this gate started: an upper bound of its Job's creation time
	started time.Time
	// check is `gate run --check`: a command that asks the database whether a recorded migration is applied
	check []string
}

// where names the records' ConfigMaps (--records the release's, --store the one that keeps them).
func (r *recorder) where() record.Where {
	return record.Where{Anchor: r.o.records, Store: r.o.store}
}

// recordsAt is where the records are kept, and the lock taken: --store when set, else --records.
func (r *recorder) recordsAt() string {
	return r.where().Holder()
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

// storeOptions completes o for writing to --store: the store is created when missing, with the chart's labels
// (Helm's ownership left out: Helm must never adopt it), owned by the object that holds the database's data,
// by the --records ConfigMap when the records are bound to no database, by nothing when only a URL names it
// (an existing store's owner follows: the release may have moved to another database); it starts with the
// records kept in the --records ConfigMap.
func (r *recorder) storeOptions(ctx context.Context, o *record.Options) error {
	o.Create = r.gateOwnedMetadata()
	anchor, err := r.clients.configMaps(r.ns).Get(ctx, r.o.records, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		anchor = nil
	case err != nil:
		return fmt.Errorf("get ConfigMap %s: %w", r.o.records, err)
	}
	if anchor != nil {
		o.Seed = anchor.Data
	}
	o.OwnerFollows = true
	switch h := r.database.Holder; {
	case h != nil:
		o.Owner = &metav1.OwnerReference{APIVersion: h.APIVersion, Kind: h.Kind, Name: h.Name, UID: types.UID(h.UID)}
	case !r.database.Bound() && anchor != nil:
		o.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: anchor.Name, UID: anchor.UID}
	}
	return nil
}

// gateOwnedMetadata is the metadata of a ConfigMap the gate creates outside the release (the store, the run
// history): the release's labels, managed by the gate, and ignored by Argo CD.
func (r *recorder) gateOwnedMetadata() *record.Metadata {
	meta := &record.Metadata{Labels: map[string]string{}}
	if r.meta != nil {
		maps.Copy(meta.Labels, r.meta.Labels)
	}
	meta.Labels["app.kubernetes.io/managed-by"] = record.FieldManager
	// Argo CD tracking by label (its default before 3.0) would take the ConfigMap, which carries the release's
	// instance label, for an extraneous object of the Application: out of sync, and pruned
	meta.Annotations = map[string]string{
		"argocd.argoproj.io/compare-options": "IgnoreExtraneous",
		"argocd.argoproj.io/sync-options":    "Prune=false",
	}
	return meta
}

// write records the identity.
func (r *recorder) write(ctx context.Context, e *env) error {
	log := e.logger()
	o := record.Options{
		Namespace:        r.ns,
		ConfigMap:        r.recordsAt(),
		Identity:         r.o.identity,
		Job:              r.o.job,
		Database:         r.database.Value,
		JobCreated:       r.jobCreated,
		Keep:             r.o.keep,
		WaitForConfigMap: r.o.waitCM,
		Create:           r.meta,
		Log:              log,
	}
	var err error
	if r.o.store != "" {
		err = r.storeOptions(ctx, &o)
	}
	if err == nil {
		err = record.Write(ctx, r.clients.configMaps(r.ns), o)
	}
	if err != nil {
		log.Error(err.Error())
		if ctx.Err() != nil {
			return cli.Exit(exitInterrupted, err)
		}
		return cli.Exit(exitFailed, err)
	}
	return nil
}
