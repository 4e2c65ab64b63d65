// Package ungate holds app pods without running anything in them: their pod template carries premigrate's
// scheduling gate, so Kubernetes neither schedules them nor pulls an image nor starts a container, and Run
// removes that gate from each pod once the migration of the pod's identity has succeeded (gate.Wait decides,
// as it does for the wait-for-migration init container). A failed migration leaves the pods Pending, with an
// Event on each that names the migration.
package ungate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/premigrate/premigrate/internal/gate"
)

// Names the pods carry (the library's premigrate-lib.schedulingGates and premigrate-lib.podAnnotations).
const (
	// SchedulingGate is the scheduling gate of the pods that wait for their migration.
	SchedulingGate = "premigrate.io/migration"
	// IdentityAnnotation names the migration a pod waits for.
	IdentityAnnotation = "premigrate.io/identity"
	// JobAnnotation names the Job of that migration: only its success, or the records, release the pod.
	JobAnnotation = "premigrate.io/migration-job"
)

// Pods is the part of client-go's typed Pod client (one namespace) that Run uses.
type Pods interface {
	gate.PodClient
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
}

// Events creates Events (one namespace).
type Events interface {
	Create(ctx context.Context, event *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
}

// Waiter waits until the migration of identity, run by the Job called job, succeeded or failed (gate.Wait
// without a timeout). An error (the database's object not found within the waiter's own bound, a pod's
// annotation that names no identity) ends that wait: it is told on the pods and asked again after
// RetryAfterFailure, as a failure is, since what caused it may be mended while the pods wait.
type Waiter func(ctx context.Context, identity, job string) (gate.Result, error)

// Config says which pods to release and how to learn that their migration succeeded.
type Config struct {
	Namespace string
	// Selector selects the pods to watch (the release's gated pods carry its label).
	Selector labels.Selector
	// Gate is the scheduling gate to remove (default SchedulingGate).
	Gate string
	Wait Waiter
	Pods Pods
	// Events receives a Warning Event on each held pod when its migration failed, and when a pod cannot be
	// released (no identity annotation). Nil posts none.
	Events Events
	// RetryAfterFailure is how long a failed migration's identity, or a wait that ended in an error, waits
	// before asking again (default 15s): a new Job of the same name (the next helm upgrade, a re-sync) may
	// succeed, and the database's object may come back.
	RetryAfterFailure time.Duration
	// MinBackoff and MaxBackoff bound the delay before listing the pods again after an error, and before
	// retrying a patch that failed (defaults 500ms and 10s).
	MinBackoff, MaxBackoff time.Duration
	// Instance names this process in its Events (the pod's name).
	Instance string
	Log      *slog.Logger
}

// FieldManager is the field manager of the patches that remove the gate.
const FieldManager = "premigrate"

func (c *Config) validate() error {
	switch {
	case c.Selector == nil || c.Selector.Empty():
		return errors.New("a pod selector is required: the gate never watches every pod of the namespace")
	case c.Wait == nil || c.Pods == nil:
		return errors.New("a waiter and a pod client are required")
	}
	if c.Gate == "" {
		c.Gate = SchedulingGate
	}
	if c.RetryAfterFailure <= 0 {
		c.RetryAfterFailure = 15 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(10*time.Second, c.MinBackoff)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// migration is what a held pod waits for.
type migration struct{ identity, job string }

func (m migration) String() string { return fmt.Sprintf("migration %s (Job %s)", m.identity, m.job) }

// waiter is the wait for one migration, running while pods wait for it.
type waiter struct {
	cancel context.CancelFunc
	// succeeded is set once the migration succeeded: its held pods are released as they come, until none is
	// left (then a new pod asks again: the records may have been reset since).
	succeeded bool
	// failure is the summary of the last failure reported, "" while none.
	failure string
}

type runner struct {
	cfg     Config
	updates chan func()
	pods    map[string]*corev1.Pod // the held pods, by name
	waiters map[migration]*waiter
	// told is, by pod UID, what its Events already said (a failure summary, or the reason it cannot be released)
	told map[types.UID]string
	// released is, by pod UID, the resourceVersion a pod had when its gate was removed: a snapshot older
	// than the patch's answer still shows it held, and is not patched again
	released map[types.UID]string
	// retrying is set while a retry of the releases is scheduled
	retrying bool
	backoff  time.Duration
}

// Run releases the held pods until ctx is cancelled; it returns ctx's cause, or a configuration error at once.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("ungate: %w", err)
	}
	r := &runner{
		cfg:      cfg,
		updates:  make(chan func(), 16),
		pods:     map[string]*corev1.Pod{},
		waiters:  map[migration]*waiter{},
		told:     map[types.UID]string{},
		released: map[types.UID]string{},
	}
	cfg.Log.Info(fmt.Sprintf("releasing the pods of %s in namespace %s that carry the scheduling gate %s once their migration succeeded",
		cfg.Selector, cfg.Namespace, cfg.Gate))
	go gate.FollowPods(ctx, cfg.Pods, cfg.Selector, cfg.MinBackoff, cfg.MaxBackoff,
		func(ctx context.Context, pods map[string]*corev1.Pod) {
			r.send(ctx, func() { r.setPods(ctx, pods) })
		},
		func(ctx context.Context, err error) {
			cfg.Log.Warn(fmt.Sprintf("%v (retrying)", err))
		})
	for {
		select {
		case <-ctx.Done():
			for _, w := range r.waiters {
				w.cancel()
			}
			return context.Cause(ctx)
		case f := <-r.updates:
			f()
		}
	}
}

func (r *runner) send(ctx context.Context, f func()) {
	select {
	case r.updates <- f:
	case <-ctx.Done():
	}
}

// held tells whether p carries the gate and is not on its way out.
func (r *runner) held(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == r.cfg.Gate })
}

// setPods takes a new snapshot of the selected pods: it starts a wait for each migration a held pod waits
// for, stops those no pod waits for any more, and releases the pods whose migration succeeded.
func (r *runner) setPods(ctx context.Context, all map[string]*corev1.Pod) {
	r.pods = map[string]*corev1.Pod{}
	wanted := map[migration]bool{}
	for name, p := range all {
		if !r.held(p) {
			delete(r.told, p.UID)
			delete(r.released, p.UID)
			continue
		}
		if rv, ok := r.released[p.UID]; ok && rv == p.ResourceVersion {
			continue
		}
		m := migration{identity: p.Annotations[IdentityAnnotation], job: p.Annotations[JobAnnotation]}
		if m.identity == "" || m.job == "" {
			r.warn(ctx, p, "NoMigration", fmt.Sprintf("premigrate holds this pod (scheduling gate %s) but cannot release it: it has no %s or %s annotation; "+
				"the pod template must include premigrate-lib.podAnnotations", r.cfg.Gate, IdentityAnnotation, JobAnnotation))
			continue
		}
		r.pods[name] = p
		wanted[m] = true
		if _, ok := r.waiters[m]; !ok {
			r.startWait(ctx, m)
		}
	}
	for m, w := range r.waiters {
		if !wanted[m] {
			w.cancel()
			delete(r.waiters, m)
		}
	}
	r.release(ctx)
}

func (r *runner) startWait(ctx context.Context, m migration) {
	wctx, cancel := context.WithCancel(ctx)
	w := &waiter{cancel: cancel}
	r.waiters[m] = w
	r.cfg.Log.Info(fmt.Sprintf("holding the pods of %s until it succeeded", m))
	go func() {
		for {
			res, err := r.cfg.Wait(wctx, m.identity, m.job)
			if wctx.Err() != nil {
				return
			}
			r.send(wctx, func() { r.outcome(wctx, m, w, res, err) })
			if err == nil && res.Outcome == gate.Succeeded {
				return
			}
			select {
			case <-wctx.Done():
				return
			case <-time.After(r.cfg.RetryAfterFailure):
			}
		}
	}()
}

// outcome takes the end of one wait for m.
func (r *runner) outcome(ctx context.Context, m migration, w *waiter, res gate.Result, err error) {
	if r.waiters[m] != w {
		return // no pod waits for m any more
	}
	switch {
	case err != nil:
		w.failure = err.Error()
		r.cfg.Log.Error(fmt.Sprintf("cannot wait for %s: %v; its pods stay pending, asking again in %s", m, err, r.cfg.RetryAfterFailure))
		r.tell(ctx, m, "MigrationUnknown", fmt.Sprintf("premigrate cannot wait for %s: %v", m, err))
	case res.Outcome == gate.Succeeded:
		w.succeeded = true
		r.release(ctx)
	default:
		summary := strings.TrimSpace(res.Summary)
		r.cfg.Log.Warn(fmt.Sprintf("%s %s; its pods stay pending, asking again in %s", m, res.Outcome, r.cfg.RetryAfterFailure))
		w.failure = summary
		r.tell(ctx, m, "MigrationFailed", fmt.Sprintf("premigrate holds this pod: %s %s, so it does not start: %s", m, res.Outcome, summary))
	}
}

// tell posts message on each held pod of m that was not told it yet.
func (r *runner) tell(ctx context.Context, m migration, reason, message string) {
	for _, p := range r.sorted() {
		if (migration{p.Annotations[IdentityAnnotation], p.Annotations[JobAnnotation]}) == m {
			r.warn(ctx, p, reason, message)
		}
	}
}

// warn posts a Warning Event on p, once per message.
func (r *runner) warn(ctx context.Context, p *corev1.Pod, reason, message string) {
	if r.told[p.UID] == message {
		return
	}
	r.told[p.UID] = message
	if r.cfg.Events == nil {
		return
	}
	if len(message) > 1000 {
		message = message[:1000] + "..."
	}
	now := metav1.Now()
	_, err := r.cfg.Events.Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: p.Namespace},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
		},
		Reason:              reason,
		Message:             message,
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: "premigrate-gate"},
		ReportingController: "premigrate.io/gate",
		ReportingInstance:   r.cfg.Instance,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		r.cfg.Log.Warn(fmt.Sprintf("posting the Event %s on pod %s: %v", reason, p.Name, err))
	}
}

func (r *runner) sorted() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(r.pods))
	for _, p := range r.pods {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// release removes the gate from every held pod whose migration succeeded. A patch that fails is retried
// after a backoff; a pod that changed or is gone is left to the next snapshot.
func (r *runner) release(ctx context.Context) {
	failed := 0
	for _, p := range r.sorted() {
		m := migration{p.Annotations[IdentityAnnotation], p.Annotations[JobAnnotation]}
		if w := r.waiters[m]; w == nil || !w.succeeded {
			continue
		}
		err := r.ungate(ctx, p)
		switch {
		case err == nil:
			r.cfg.Log.Info(fmt.Sprintf("pod %s released: %s succeeded", p.Name, m))
			r.released[p.UID] = p.ResourceVersion
			delete(r.pods, p.Name)
		case apierrors.IsNotFound(err):
			delete(r.pods, p.Name) // gone
		case apierrors.IsInvalid(err):
			// changed since the snapshot (the patch's test failed; the next snapshot decides), or refused by an
			// admission policy (the gate's own, when the pod lost the label that makes it the release's)
			r.cfg.Log.Warn(fmt.Sprintf("pod %s not released: %v", p.Name, err))
		default:
			failed++
			r.cfg.Log.Warn(fmt.Sprintf("releasing pod %s: %v (retrying)", p.Name, err))
		}
	}
	if failed == 0 {
		r.backoff = 0
		return
	}
	if r.retrying {
		return
	}
	r.backoff = min(max(2*r.backoff, r.cfg.MinBackoff), r.cfg.MaxBackoff)
	r.retrying = true
	time.AfterFunc(r.backoff, func() {
		r.send(ctx, func() {
			r.retrying = false
			r.release(ctx)
		})
	})
}

// ungate removes the gate from p with a JSON patch that first tests that the gate is still where the snapshot
// has it: the patch removes that one gate and changes nothing else.
func (r *runner) ungate(ctx context.Context, p *corev1.Pod) error {
	i := slices.IndexFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == r.cfg.Gate })
	if i < 0 {
		return nil
	}
	path := fmt.Sprintf("/spec/schedulingGates/%d", i)
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path + "/name", "value": r.cfg.Gate},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return fmt.Errorf("encode the patch: %w", err)
	}
	if _, err := r.cfg.Pods.Patch(ctx, p.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("remove the scheduling gate %s of pod %s: %w", r.cfg.Gate, p.Name, err)
	}
	return nil
}
