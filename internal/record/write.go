package record

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigMapClient is the part of client-go's typed ConfigMap client (for one
// namespace) that Write uses: RBAC grants it get and update on one name, and
// create (which RBAC cannot restrict by name) for a missing ConfigMap.
type ConfigMapClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
}

// FieldManager names the gate's writes in the objects' managedFields.
const FieldManager = "premigrate-gate"

// Options says what to record where.
type Options struct {
	Namespace string // only for messages: the client is already namespaced
	ConfigMap string
	Identity  string
	Job       string
	// Database names the database the migration ran on (dbid.ID's Value), stored with the record; empty
	// stores none.
	Database string
	// JobCreated is the Job's creation time, stored with the record (zero stores none).
	JobCreated time.Time
	// Keep is how many entries to keep (newest first); <= 0 keeps all.
	Keep int
	// Create, when not nil, is the metadata of the ConfigMap to create when
	// it does not exist (migrations enabled on an installed release, a
	// ConfigMap deleted by hand, a pre-install hook that runs before the
	// release's objects exist). Nil waits for someone else to create it.
	Create *Metadata
	// Owner, when not nil, is the owner reference a ConfigMap created here gets: the object that holds the
	// database's data, so the records go when the data goes.
	Owner *metav1.OwnerReference
	// OwnerFollows makes Owner the only owner of an existing ConfigMap too (none when Owner is nil): the records
	// follow the database they describe now, so a store made beside an embedded database's claim does not go
	// with that claim once the release moved to another database.
	OwnerFollows bool
	// Seed is what a ConfigMap created here starts with, beside the new record: the records kept before in
	// another ConfigMap (the release's, in charts up to 0.3.0).
	Seed map[string]string
	// WaitForConfigMap bounds the retries while the ConfigMap does not exist
	// yet or the API server fails; 0 tries once.
	WaitForConfigMap time.Duration
	// MinBackoff and MaxBackoff bound the delay between retries
	// (defaults 500ms and 5s).
	MinBackoff, MaxBackoff time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Log gets the write's lines: retries at Info (a conflict, a ConfigMap not created yet) or Warn (forbidden,
	// an API error), the record at Info. Nil discards them.
	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.MinBackoff <= 0 {
		o.MinBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Second, o.MinBackoff)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Write records that o.Identity completed now, by o.Job: a read-modify-write
// of the ConfigMap with its resourceVersion, retried on conflict and, up to
// o.WaitForConfigMap, while the ConfigMap is missing or the API fails.
func Write(ctx context.Context, client ConfigMapClient, o Options) error {
	o.defaults()
	deadline := time.Now().Add(o.WaitForConfigMap)
	delay := o.MinBackoff
	where := fmt.Sprintf("ConfigMap %s/%s", o.Namespace, o.ConfigMap)
	for attempt := 1; ; attempt++ {
		err := writeOnce(ctx, client, o)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("record identity %s in %s: %w", o.Identity, where, ctx.Err())
		}
		wait := delay
		if apierrors.IsConflict(err) {
			// Another writer updated the ConfigMap between our get and
			// update: read it again soon.
			wait = time.Duration(rand.Int64N(int64(100 * time.Millisecond)))
		} else {
			delay = min(2*delay, o.MaxBackoff)
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("%s does not exist (waited %s; it holds the migration records and is created with the chart): %w",
					where, o.WaitForConfigMap, err)
			}
			return fmt.Errorf("record identity %s in %s: gave up after %d attempts in %s: %w",
				o.Identity, where, attempt, o.WaitForConfigMap, err)
		}
		wait = min(wait, remaining)
		switch {
		case apierrors.IsConflict(err):
			o.Log.Info(fmt.Sprintf("%s changed while updating it, retrying", where))
		case apierrors.IsNotFound(err):
			o.Log.Info(fmt.Sprintf("%s does not exist yet, retrying in %s", where, wait.Round(time.Millisecond)))
		case apierrors.IsForbidden(err):
			o.Log.Warn(fmt.Sprintf("forbidden to get or update %s (check the migration ServiceAccount's Role), retrying in %s: %v",
				where, wait.Round(time.Millisecond), err), "identity", o.Identity, "configMap", o.ConfigMap)
		default:
			o.Log.Warn(fmt.Sprintf("updating %s failed, retrying in %s: %v", where, wait.Round(time.Millisecond), err),
				"identity", o.Identity, "configMap", o.ConfigMap)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("record identity %s in %s: %w", o.Identity, where, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func writeOnce(ctx context.Context, client ConfigMapClient, o Options) error {
	value, err := Entry{CompletedAt: o.Now(), Job: o.Job, Database: o.Database, JobCreated: o.JobCreated}.Encode()
	if err != nil {
		return err
	}
	cm, err := client.Get(ctx, o.ConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && o.Create != nil {
		// Created with the record in it: one request, and AlreadyExists (a
		// concurrent creator) is retried as a conflict.
		created := o.Create.configMap(o.ConfigMap)
		if o.Owner != nil {
			created.OwnerReferences = []metav1.OwnerReference{*o.Owner}
		}
		created.Data = maps.Clone(o.Seed)
		if created.Data == nil {
			created.Data = map[string]string{}
		}
		dropped := add(created.Data, o.Identity, value, o.Keep)
		if _, err := client.Create(ctx, created, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), o.ConfigMap, err)
			}
			return fmt.Errorf("create: %w", err)
		}
		o.Log.Info(fmt.Sprintf("recorded identity %s (job %s) in ConfigMap %s/%s, which did not exist: created it with %d earlier records, %d dropped",
			o.Identity, o.Job, o.Namespace, o.ConfigMap, kept(created.Data)-1, len(dropped)))
		return nil
	}
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	updated := cm.DeepCopy()
	if updated.Data == nil {
		updated.Data = map[string]string{}
	}
	dropped := add(updated.Data, o.Identity, value, o.Keep)
	if o.OwnerFollows {
		if want := owners(o.Owner); !sameOwners(cm.OwnerReferences, want) {
			updated.OwnerReferences = want
			o.Log.Info(fmt.Sprintf("ConfigMap %s/%s was owned by %s; it now follows the database it describes: owned by %s",
				o.Namespace, o.ConfigMap, ownerNames(cm.OwnerReferences), ownerNames(want)))
		}
	}
	// cm's resourceVersion travels with the update: the API server refuses
	// it with a conflict if someone else wrote in between.
	if _, err := client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	o.Log.Info(fmt.Sprintf("recorded identity %s (job %s) in ConfigMap %s/%s; %d entries kept, %d dropped (listed under %q)",
		o.Identity, o.Job, o.Namespace, o.ConfigMap, kept(updated.Data), len(dropped), PrunedKey))
	return nil
}

// add records identity's value in data, prunes it to the newest keep entries (never identity itself) and
// notes what was dropped; it returns the dropped identities.
func add(data map[string]string, identity, value string, keep int) []string {
	data[identity] = value
	dropped := Prune(data, identity, keep)
	for _, k := range dropped {
		delete(data, k)
	}
	notePruned(data, identity, dropped)
	return dropped
}

// kept is the number of records in data.
func kept(data map[string]string) int {
	n := len(data)
	if _, ok := data[PrunedKey]; ok {
		n--
	}
	return n
}

// owners is the owner references a ConfigMap with owner has: none when owner is nil.
func owners(owner *metav1.OwnerReference) []metav1.OwnerReference {
	if owner == nil {
		return nil
	}
	return []metav1.OwnerReference{*owner}
}

// sameOwners compares owner references by the object they name.
func sameOwners(a, b []metav1.OwnerReference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].UID != b[i].UID || a[i].Kind != b[i].Kind || a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}

// ownerNames names owner references for a log line.
func ownerNames(refs []metav1.OwnerReference) string {
	if len(refs) == 0 {
		return "nothing"
	}
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = fmt.Sprintf("%s %s (%s)", r.Kind, r.Name, r.UID)
	}
	return strings.Join(names, ", ")
}
