package ungate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/premigrate/premigrate/internal/gate"
	"github.com/premigrate/premigrate/internal/ungate"
)

const ns = "shop"

// heldPod is a pod of the release that waits for the migration of identity.
func heldPod(name, identity string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + name),
			Labels:      map[string]string{"premigrate.io/gated-by": "shop-gate"},
			Annotations: map[string]string{ungate.IdentityAnnotation: identity, ungate.JobAnnotation: "shop-migrate"},
		},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: ungate.SchedulingGate}}},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

// waits is a Waiter whose outcomes the test decides, per identity.
type waits struct {
	mu       sync.Mutex
	calls    map[string]int
	outcomes map[string]chan gate.Result
	errs     map[string]chan error
}

func newWaits() *waits {
	return &waits{calls: map[string]int{}, outcomes: map[string]chan gate.Result{}, errs: map[string]chan error{}}
}

// errCh ends the next wait for identity with an error.
func (w *waits) errCh(identity string) chan error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.errs[identity] == nil {
		w.errs[identity] = make(chan error, 10)
	}
	return w.errs[identity]
}

func (w *waits) ch(identity string) chan gate.Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.outcomes[identity] == nil {
		w.outcomes[identity] = make(chan gate.Result, 10)
	}
	return w.outcomes[identity]
}

func (w *waits) wait(ctx context.Context, identity, job string) (gate.Result, error) {
	w.mu.Lock()
	w.calls[identity+"/"+job]++
	w.mu.Unlock()
	select {
	case res := <-w.ch(identity):
		return res, nil
	case err := <-w.errCh(identity):
		return gate.Result{}, err
	case <-ctx.Done():
		return gate.Result{}, ctx.Err()
	}
}

func (w *waits) count(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[key]
}

func start(t *testing.T, cs *fake.Clientset, w *waits) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ungate.Run(ctx, ungate.Config{
			Namespace:         ns,
			Selector:          labels.SelectorFromSet(labels.Set{"premigrate.io/gated-by": "shop-gate"}),
			Wait:              w.wait,
			Pods:              cs.CoreV1().Pods(ns),
			Events:            cs.CoreV1().Events(ns),
			RetryAfterFailure: 20 * time.Millisecond,
			MinBackoff:        10 * time.Millisecond,
			MaxBackoff:        50 * time.Millisecond,
			Instance:          "shop-gate-0",
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after its context was cancelled")
		}
	})
}

func gates(t *testing.T, cs *fake.Clientset, name string) []string {
	t.Helper()
	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	var out []string
	for _, g := range p.Spec.SchedulingGates {
		out = append(out, g.Name)
	}
	return out
}

func events(t *testing.T, cs *fake.Clientset) []corev1.Event {
	t.Helper()
	l, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return l.Items
}

func TestRunReleasesTheHeldPodsOnlyOnceTheirMigrationSucceeded(t *testing.T) {
	cs := fake.NewClientset(
		heldPod("shop-a", "id1"),
		heldPod("shop-b", "id1", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/quota"})
		}),
	)
	w := newWaits()
	start(t, cs, w)

	require.Eventually(t, func() bool { return w.count("id1/shop-migrate") == 1 }, 5*time.Second, 5*time.Millisecond,
		"one wait for the migration both pods wait for")
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, []string{ungate.SchedulingGate}, gates(t, cs, "shop-a"), "held while the migration runs")

	w.ch("id1") <- gate.Result{Outcome: gate.Succeeded, Recorded: true}
	require.Eventually(t, func() bool { return len(gates(t, cs, "shop-a")) == 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"example.com/quota"}, gates(t, cs, "shop-b"), "only premigrate's gate is removed")
	assert.Empty(t, events(t, cs), "a success posts no Event")
}

func TestRunKeepsThePodsHeldAndPostsOneEventNamingTheMigrationWhenItFailed(t *testing.T) {
	cs := fake.NewClientset(heldPod("shop-a", "id1"))
	w := newWaits()
	start(t, cs, w)
	failed := gate.Result{Outcome: gate.Failed, Job: "shop-migrate", Summary: "migration Job shop-migrate failed: BackoffLimitExceeded"}
	for range 3 {
		w.ch("id1") <- failed
	}

	require.Eventually(t, func() bool { return w.count("id1/shop-migrate") >= 4 }, 5*time.Second, 5*time.Millisecond,
		"asked again after each failure")
	ev := events(t, cs)
	require.Len(t, ev, 1, "the same failure is told once")
	assert.Equal(t, "MigrationFailed", ev[0].Reason)
	assert.Equal(t, corev1.EventTypeWarning, ev[0].Type)
	assert.Equal(t, "shop-a", ev[0].InvolvedObject.Name)
	assert.Contains(t, ev[0].Message, "migration id1 (Job shop-migrate) failed")
	assert.Contains(t, ev[0].Message, "BackoffLimitExceeded")
	assert.Equal(t, []string{ungate.SchedulingGate}, gates(t, cs, "shop-a"), "a failed migration starts nothing")

	w.ch("id1") <- gate.Result{Outcome: gate.Succeeded, Recorded: true}
	require.Eventually(t, func() bool { return len(gates(t, cs, "shop-a")) == 0 }, 5*time.Second, 5*time.Millisecond,
		"released once a later Job of that name succeeded")
}

func TestRunAsksAgainAfterAWaitThatEndedInAnErrorAndReleasesThePodsOnceTheMigrationSucceeded(t *testing.T) {
	cs := fake.NewClientset(heldPod("shop-a", "id1"))
	w := newWaits()
	start(t, cs, w)
	for range 2 {
		w.errCh("id1") <- errors.New("the database's persistentvolumeclaim data-shop-postgresql-0: not found within 24h0m0s")
	}

	require.Eventually(t, func() bool { return w.count("id1/shop-migrate") >= 3 }, 5*time.Second, 5*time.Millisecond,
		"asked again after each error, not given up until the gate's pod restarts")
	ev := events(t, cs)
	require.Len(t, ev, 1, "the same error is told once")
	assert.Equal(t, "MigrationUnknown", ev[0].Reason)
	assert.Contains(t, ev[0].Message, "not found within 24h0m0s")
	assert.Equal(t, []string{ungate.SchedulingGate}, gates(t, cs, "shop-a"), "an error starts nothing")

	w.ch("id1") <- gate.Result{Outcome: gate.Succeeded, Recorded: true}
	require.Eventually(t, func() bool { return len(gates(t, cs, "shop-a")) == 0 }, 5*time.Second, 5*time.Millisecond,
		"released once a later wait saw the migration succeed")
}

func TestRunReleasesEachPodByItsOwnIdentity(t *testing.T) {
	cs := fake.NewClientset(heldPod("shop-old", "id1"), heldPod("shop-new", "id2"))
	w := newWaits()
	start(t, cs, w)

	w.ch("id2") <- gate.Result{Outcome: gate.Succeeded}
	require.Eventually(t, func() bool { return len(gates(t, cs, "shop-new")) == 0 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, []string{ungate.SchedulingGate}, gates(t, cs, "shop-old"), "another identity's success releases nothing")
}

func TestRunAsksAgainForAPodThatComesAfterEveryPodWasReleased(t *testing.T) {
	cs := fake.NewClientset(heldPod("shop-a", "id1"))
	w := newWaits()
	start(t, cs, w)
	w.ch("id1") <- gate.Result{Outcome: gate.Succeeded}
	require.Eventually(t, func() bool { return len(gates(t, cs, "shop-a")) == 0 }, 5*time.Second, 5*time.Millisecond)

	_, err := cs.CoreV1().Pods(ns).Create(context.Background(), heldPod("shop-b", "id1"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.count("id1/shop-migrate") == 2 }, 5*time.Second, 5*time.Millisecond,
		"the records may have been reset since: a new pod is not released on an old answer")
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, []string{ungate.SchedulingGate}, gates(t, cs, "shop-b"))
	w.ch("id1") <- gate.Result{Outcome: gate.Succeeded}
	require.Eventually(t, func() bool { return len(gates(t, cs, "shop-b")) == 0 }, 5*time.Second, 5*time.Millisecond)
}

func TestRunNeverTouchesPodsOutsideItsSelector(t *testing.T) {
	other := heldPod("other-a", "id1", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} })
	cs := fake.NewClientset(other, heldPod("shop-a", "id1"))
	w := newWaits()
	start(t, cs, w)
	w.ch("id1") <- gate.Result{Outcome: gate.Succeeded}
	require.Eventually(t, func() bool { return len(gates(t, cs, "shop-a")) == 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{ungate.SchedulingGate}, gates(t, cs, "other-a"))
}

func TestRunTellsWhyAHeldPodWithoutItsMigrationsNameIsNeverReleased(t *testing.T) {
	cs := fake.NewClientset(heldPod("shop-a", "", func(p *corev1.Pod) { p.Annotations = nil }))
	w := newWaits()
	start(t, cs, w)
	require.Eventually(t, func() bool { return len(events(t, cs)) == 1 }, 5*time.Second, 5*time.Millisecond)
	ev := events(t, cs)[0]
	assert.Equal(t, "NoMigration", ev.Reason)
	assert.Contains(t, ev.Message, ungate.IdentityAnnotation)
	assert.Equal(t, []string{ungate.SchedulingGate}, gates(t, cs, "shop-a"))
}

func TestRunRefusesToWatchEveryPodOfTheNamespace(t *testing.T) {
	err := ungate.Run(context.Background(), ungate.Config{Selector: labels.Everything(), Wait: newWaits().wait, Pods: fake.NewClientset().CoreV1().Pods(ns)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "selector")
	assert.False(t, errors.Is(err, context.Canceled))
}
