package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LockAnnotation is the annotation of the records ConfigMap that holds the release's migration lock: at most
// one migration of a release runs at a time, whatever its tool does about concurrency (Django's migrate and
// many others take no lock of their own).
const LockAnnotation = "premigrate.io/migration-lock"

// Holder says who holds the lock.
type Holder struct {
	Identity string `json:"identity"`
	Job      string `json:"job"`
	// JobUID tells this Job from an earlier one of the same name (a hook Job replaced by the next upgrade's).
	JobUID string `json:"jobUID,omitempty"`
	// JobCreated is the creation time of the holder's Job: the order in which migrations were deployed.
	JobCreated time.Time `json:"jobCreated,omitzero"`
	Pod        string    `json:"pod,omitempty"`
	// Acquired is when the holder took the lock; Renewed when it last said it still runs.
	Acquired time.Time `json:"acquired"`
	Renewed  time.Time `json:"renewed"`
}

func (h Holder) same(o Holder) bool {
	return h.Job == o.Job && h.Pod == o.Pod && h.Acquired.Equal(o.Acquired)
}

func (h Holder) String() string {
	return fmt.Sprintf("migration %s of Job %s (pod %s, since %s)", h.Identity, h.Job, h.Pod, h.Acquired.UTC().Format(time.RFC3339))
}

// LockOptions says which lock to take, and how to create the ConfigMap that holds it when it is missing.
type LockOptions struct {
	Namespace string // only for messages: the client is already namespaced
	ConfigMap string
	Holder    Holder // Identity, Job, JobCreated and Pod; the times are set here
	// Lease is how long a lock whose holder stopped renewing it (a pod killed without a chance to release
	// it) blocks the others, as each waiter measures it on its own clock: a lock that did not change for a
	// Lease is taken over, once Running says its holder runs no more. The holder renews every Lease/6.
	// Default 30s.
	Lease time.Duration
	// Running, when set, says whether the holder's pod may still run its command, and why. A holder cut off
	// from the API server (a partition, an API server restart, a managed control plane's upgrade) cannot renew
	// the lock, and its command goes on: a lost renewal never stops a migration halfway. So a lock that did not
	// change for a Lease is taken over only when its pod is gone or ended; an error counts as running (the
	// waiter waits, and says why, until its own deadline). Nil: the Lease alone decides.
	Running func(ctx context.Context, h Holder) (running bool, why string, err error)
	// Poll is how often a waiter reads the lock; default 1s.
	Poll time.Duration
	// Create, Owner and Seed make a missing ConfigMap as Write does.
	Create *Metadata
	Owner  *metav1.OwnerReference
	Seed   map[string]string
	// WaitForConfigMap bounds the wait while the ConfigMap does not exist and may not be created here
	// (o.Create nil); 0 tries once.
	WaitForConfigMap time.Duration
	// Progress is how often a waiter says it still waits; default 30s.
	Progress time.Duration
	Now      func() time.Time
	// Log gets the lock's lines: taking and waiting at Info, taking over a holder that stopped renewing and a
	// failed renewal at Warn, a lost lock at Error. Nil discards them.
	Log *slog.Logger
}

func (o *LockOptions) defaults() {
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Progress <= 0 {
		o.Progress = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Lock is a held migration lock; Release gives it back.
type Lock struct {
	client ConfigMapClient
	o      LockOptions
	holder Holder
	stop   chan struct{}
	done   chan struct{}
	lost   chan struct{}
	once   sync.Once
}

// HolderOf returns the lock recorded on cm, if any.
func HolderOf(cm *corev1.ConfigMap) (Holder, bool) {
	v, ok := cm.Annotations[LockAnnotation]
	if !ok {
		return Holder{}, false
	}
	var h Holder
	if err := json.Unmarshal([]byte(v), &h); err != nil {
		// unreadable: someone's, of unknown age; it expires like any other
		return Holder{Identity: "?", Job: "?", Pod: v}, true
	}
	return h, true
}

// Acquire takes the release's migration lock on the ConfigMap o.ConfigMap (created when missing and o.Create
// is set), waiting while another migration holds it and renews it. It returns the lock, renewed in the
// background until Release, and the ConfigMap as it was when the lock was taken: its records are the ones
// to decide on, since another migration may have completed during the wait. The update carries the
// resourceVersion it read, so of two waiters only one takes a free lock.
func Acquire(ctx context.Context, client ConfigMapClient, o LockOptions) (*Lock, *corev1.ConfigMap, error) {
	o.defaults()
	where := fmt.Sprintf("ConfigMap %s/%s", o.Namespace, o.ConfigMap)
	var (
		seen      string    // the lock's value as last read
		seenSince time.Time // when this waiter first read that value
		said      time.Time // when this waiter last said it waits
		saidAlive time.Time // when this waiter last said the holder of an unrenewed lock still runs
		waitStart = o.Now()
		missing   time.Time // when the ConfigMap was first found missing
	)
	for {
		cm, err := client.Get(ctx, o.ConfigMap, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && o.Create != nil:
			held, created, err := o.create(ctx, client)
			if err == nil {
				o.Log.Info(fmt.Sprintf("created %s and took the release's migration lock in it", where))
				return held, created, nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return nil, nil, fmt.Errorf("create %s to take the migration lock: %w", where, err)
			}
			continue
		case apierrors.IsNotFound(err):
			if missing.IsZero() {
				missing = o.Now()
				o.Log.Info(fmt.Sprintf("%s does not exist yet (it holds the migration records and is created with the chart): waiting up to %s for it",
					where, o.WaitForConfigMap))
			}
			if o.Now().Sub(missing) >= o.WaitForConfigMap {
				return nil, nil, fmt.Errorf("%s does not exist (waited %s): %w", where, o.WaitForConfigMap, err)
			}
			if err := sleep(ctx, o.Poll); err != nil {
				return nil, nil, fmt.Errorf("waiting for %s to take the migration lock: %w", where, err)
			}
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("read the migration lock in %s: %w", where, err)
		}
		now := o.Now()
		holder, held := HolderOf(cm)
		value := cm.Annotations[LockAnnotation]
		if value != seen {
			seen, seenSince = value, now
		}
		// A lock of this same Job is an earlier pod's, which ended without releasing it (killed): a Job runs
		// one pod at a time, and with a podFailurePolicy (every premigrate Job has one) it starts the next only
		// once the previous one is terminal.
		ours := held && o.Holder.JobUID != "" && holder.JobUID == o.Holder.JobUID
		free := !held || ours
		expired := held && now.Sub(seenSince) >= o.Lease
		ended := "" // why the holder of an expired lock runs no more, when Running says so
		if expired && !free && o.Running != nil {
			running, why, err := o.Running(ctx, holder)
			ended = " and " + why
			if err != nil {
				running, why = true, fmt.Sprintf("cannot tell whether its pod %s still runs: %v", holder.Pod, err)
			}
			if running {
				expired = false
				if saidAlive.IsZero() || now.Sub(saidAlive) >= o.Progress {
					o.Log.Warn(fmt.Sprintf("the migration lock in %s did not change for %s, but its holder, %s, may still be running (%s): "+
						"a migration cut off from the API server cannot renew the lock, and goes on; waiting until its pod ends "+
						"(a pod on a node that is gone ends only when deleted: kubectl delete pod %s --force)",
						where, now.Sub(seenSince).Round(time.Second), holder, why, holder.Pod), "configMap", o.ConfigMap, "holder", holder.String())
					saidAlive = now
				}
			}
		}
		if free || expired {
			switch {
			case ours && holder.Pod != o.Holder.Pod:
				o.Log.Warn(fmt.Sprintf("the migration lock in %s is held by an earlier pod of this Job, %s, which ended without releasing it: taking it over",
					where, holder.Pod), "configMap", o.ConfigMap, "holder", holder.String())
			case expired && !free:
				o.Log.Warn(fmt.Sprintf("the migration lock in %s did not change for %s: its holder, %s, stopped renewing it%s; taking it over",
					where, now.Sub(seenSince).Round(time.Second), holder, ended), "configMap", o.ConfigMap, "holder", holder.String())
			}
			l, updated, err := o.take(ctx, client, cm)
			switch {
			case err == nil:
				if waited := o.Now().Sub(waitStart); !said.IsZero() {
					o.Log.Info(fmt.Sprintf("took the release's migration lock after waiting %s", waited.Round(time.Second)))
				}
				return l, updated, nil
			case apierrors.IsConflict(err):
				// another waiter (or the holder's renewal) wrote first: read again at once
				continue
			default:
				return nil, nil, fmt.Errorf("take the migration lock in %s: %w", where, err)
			}
		}
		if said.IsZero() || now.Sub(said) >= o.Progress {
			verb := "holds"
			if !said.IsZero() {
				verb = "still holds"
			}
			o.Log.Info(fmt.Sprintf("another migration of this release %s the lock in %s: %s, last renewed %s; waiting for it "+
				"(one migration at a time; this Job's deadline keeps running)",
				verb, where, holder, holder.Renewed.UTC().Format(time.RFC3339)))
			said = now
		}
		if err := sleep(ctx, o.Poll+time.Duration(rand.Int64N(int64(o.Poll/4)+1))); err != nil {
			return nil, nil, fmt.Errorf("waiting for the migration lock in %s, held by %s: %w", where, holder, err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		return nil
	}
}

// create makes the missing ConfigMap with the lock in it.
func (o *LockOptions) create(ctx context.Context, client ConfigMapClient) (*Lock, *corev1.ConfigMap, error) {
	cm := o.Create.configMap(o.ConfigMap)
	if o.Owner != nil {
		cm.OwnerReferences = []metav1.OwnerReference{*o.Owner}
	}
	cm.Data = maps.Clone(o.Seed)
	h := o.Holder
	h.Acquired = o.Now()
	h.Renewed = h.Acquired
	if err := setHolder(cm, h); err != nil {
		return nil, nil, err
	}
	created, err := client.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, nil, err
	}
	return o.start(client, h), created, nil
}

// take writes this holder into cm, with cm's resourceVersion.
func (o *LockOptions) take(ctx context.Context, client ConfigMapClient, cm *corev1.ConfigMap) (*Lock, *corev1.ConfigMap, error) {
	h := o.Holder
	h.Acquired = o.Now()
	h.Renewed = h.Acquired
	updated := cm.DeepCopy()
	if err := setHolder(updated, h); err != nil {
		return nil, nil, err
	}
	got, err := client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, nil, err
	}
	return o.start(client, h), got, nil
}

func setHolder(cm *corev1.ConfigMap, h Holder) error {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode the migration lock: %w", err)
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[LockAnnotation] = string(b)
	return nil
}

func (o *LockOptions) start(client ConfigMapClient, h Holder) *Lock {
	l := &Lock{client: client, o: *o, holder: h, stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}
	go l.renew()
	return l
}

// Holder is the lock as this holder wrote it.
func (l *Lock) Holder() Holder { return l.holder }

// Lost is closed when the lock is found to be another's: a waiter took it over (its holder's pod was judged
// gone, or the lock was removed by hand). What the lock protected goes on (stopping a migration halfway is
// worse than finishing it), but its outcome must not be recorded. Renewals that fail, however long, do not
// lose the lock: a waiter takes it over only once this pod ended (LockOptions.Running).
// A nil Lock is never lost.
func (l *Lock) Lost() <-chan struct{} {
	if l == nil {
		return nil
	}
	return l.lost
}

// renew says every Lease/6 that the holder still runs, until Release.
func (l *Lock) renew() {
	defer close(l.done)
	where := fmt.Sprintf("ConfigMap %s/%s", l.o.Namespace, l.o.ConfigMap)
	tick := time.NewTicker(l.o.Lease / 6)
	defer tick.Stop()
	renewed := l.o.Now()
	lost, late := false, false
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.o.Lease/6)
		err := l.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
			h := l.holder
			h.Renewed = l.o.Now()
			return true, setHolder(cm, h)
		})
		cancel()
		switch {
		case err == nil:
			if late {
				l.o.Log.Info(fmt.Sprintf("renewed the migration lock in %s again, after %s without", where, l.o.Now().Sub(renewed).Round(time.Second)),
					"configMap", l.o.ConfigMap)
			}
			renewed, late = l.o.Now(), false
		case lost:
		case errors.Is(err, errNotOurs):
			l.o.Log.Error(fmt.Sprintf("the migration lock in %s is no longer this migration's: %v; the command goes on (stopping it halfway "+
				"is worse), and its outcome will not be recorded", where, err), "configMap", l.o.ConfigMap)
			lost = true
			close(l.lost)
		case !late && l.o.Now().Sub(renewed) >= 2*l.o.Lease/3:
			l.o.Log.Error(fmt.Sprintf("cannot renew the migration lock in %s for %s: %v; the command goes on (a lost renewal never "+
				"stops it), and the other migrations of this release wait while this pod runs (retrying)",
				where, l.o.Now().Sub(renewed).Round(time.Second), err), "configMap", l.o.ConfigMap)
			late = true
		default:
			l.o.Log.Warn(fmt.Sprintf("renewing the migration lock in %s: %v (retrying)", where, err), "configMap", l.o.ConfigMap)
		}
	}
}

var errNotOurs = errors.New("the lock is no longer this migration's")

// update applies change to the ConfigMap while it still holds this lock, retrying conflicts.
func (l *Lock) update(ctx context.Context, change func(*corev1.ConfigMap) (bool, error)) error {
	for {
		cm, err := l.client.Get(ctx, l.o.ConfigMap, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if h, ok := HolderOf(cm); !ok || !h.same(l.holder) {
			return fmt.Errorf("%w (it is %q)", errNotOurs, cm.Annotations[LockAnnotation])
		}
		updated := cm.DeepCopy()
		write, err := change(updated)
		if err != nil || !write {
			return err
		}
		_, err = l.client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
		if !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("update: %w", err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(rand.Int64N(int64(100 * time.Millisecond)))):
		}
	}
}

// Release stops the renewals and removes the lock, if it is still this holder's. It is safe to call more
// than once, and on a nil Lock; a lock that cannot be removed expires after its Lease.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return nil
	}
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		err = l.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
			delete(cm.Annotations, LockAnnotation)
			return true, nil
		})
		switch {
		case errors.Is(err, errNotOurs):
			err = nil // taken over: nothing of ours to remove
		case err != nil:
			err = fmt.Errorf("release the migration lock in ConfigMap %s/%s: %w", l.o.Namespace, l.o.ConfigMap, err)
		}
	})
	return err
}
