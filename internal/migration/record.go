package migration

import (
	"context"
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
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/record"
)

// where names the records' ConfigMaps (--records the release's, --store the one that keeps them).
func (r *recorder) where() record.Where {
	return record.Where{Anchor: r.o.Records, Store: r.o.Store}
}

// recordsAt is where the records are kept, and the lock taken: --store when set, else --records.
func (r *recorder) recordsAt() string {
	return r.where().Holder()
}

// resolve names the database the migration runs on (nothing when no --database-* flag is set).
func (r *recorder) resolve(ctx context.Context, timeout time.Duration, log *slog.Logger) error {
	id, err := dbid.ResolveWithin(ctx, r.spec, r.objects(), timeout, log)
	if err != nil {
		log.Error(fmt.Sprintf("not running the migration: %v", err))
		if ctx.Err() != nil {
			return cli.Exit(exitcode.Interrupted, err)
		}
		return cli.Exit(exitcode.Failed, err)
	}
	r.database = id
	return nil
}

// ensure returns the records ConfigMap, created when missing and --create-records is set; nil when it is
// missing and may not be created.
func (r *recorder) ensure(ctx context.Context) (*corev1.ConfigMap, bool, error) {
	return record.Ensure(ctx, r.clients.ConfigMaps, r.o.Records, r.meta)
}

// storeOptions completes o for writing to --store: the store is created when missing, with the chart's labels
// (Helm's ownership left out: Helm must never adopt it), owned by the object that holds the database's data,
// by the --records ConfigMap when the records are bound to no database, by nothing when only a URL names it
// (an existing store's owner follows: the release may have moved to another database); it starts with the
// records kept in the --records ConfigMap.
func (r *recorder) storeOptions(ctx context.Context, o *record.Options) error {
	o.Create = r.gateOwnedMetadata()
	anchor, err := r.clients.ConfigMaps.Get(ctx, r.o.Records, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		anchor = nil
	case err != nil:
		return fmt.Errorf("get ConfigMap %s: %w", r.o.Records, err)
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
func (r *recorder) write(ctx context.Context, e *Env) error {
	log := e.Log
	o := record.Options{
		Namespace:        r.ns,
		ConfigMap:        r.recordsAt(),
		Identity:         r.o.Identity,
		Job:              r.o.Job,
		Database:         r.database.Value,
		JobCreated:       r.jobCreated,
		Keep:             r.o.Keep,
		WaitForConfigMap: r.o.WaitForConfigMap,
		Create:           r.meta,
		Log:              log,
	}
	var err error
	if r.o.Store != "" {
		err = r.storeOptions(ctx, &o)
	}
	if err == nil {
		err = record.Write(ctx, r.clients.ConfigMaps, o)
	}
	if err != nil {
		log.Error(err.Error())
		if ctx.Err() != nil {
			return cli.Exit(exitcode.Interrupted, err)
		}
		return cli.Exit(exitcode.Failed, err)
	}
	return nil
}
