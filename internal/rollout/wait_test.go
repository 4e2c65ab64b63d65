package rollout

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// script is a Source that returns its observations one by one (the last one again once they run out), on a
// clock that moves by the wait's interval between two of them.
type script struct {
	steps []func() (Observation, error)
	n     int
}

func (s *script) Observe(context.Context) (Observation, error) {
	i := min(s.n, len(s.steps)-1)
	s.n++
	return s.steps[i]()
}

func observe(change func(*Observation)) func() (Observation, error) {
	return func() (Observation, error) {
		o := ended()
		change(&o)
		return o, nil
	}
}

var (
	isDone   = observe(func(*Observation) {})
	oldPod   = observe(func(o *Observation) { o.Pods = append(o.Pods, terminating(pod("old-a", "old", oldID))) })
	rolledTo = observe(func(o *Observation) { o.Deployment.Spec.Template.Annotations[IdentityAnnotation] = oldID })
	apiAway  = func() (Observation, error) { return Observation{}, errors.New("connection refused") }
)

// fakeClock advances by the interval at each wait between observations.
func fakeClock(cfg *WaitConfig) {
	now := time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)
	cfg.now = func() time.Time { return now }
	cfg.after = func(d time.Duration) <-chan time.Time {
		now = now.Add(d)
		c := make(chan time.Time, 1)
		c <- now
		return c
	}
}

func TestWaitReturnsOnlyOnceTheFactsHeldForTheSoakWithoutABreak(t *testing.T) {
	tests := []struct {
		name         string
		steps        []func() (Observation, error)
		soak         time.Duration
		timeout      time.Duration
		want         State
		err          error
		observations int
	}{
		{name: "without a soak at the first observation where they hold", steps: []func() (Observation, error){oldPod, oldPod, isDone}, want: Done, observations: 3},
		{name: "with a soak once they held that long", steps: []func() (Observation, error){isDone}, soak: 6 * time.Second, want: Done, observations: 4},
		{name: "an old pod back during the soak starts it over", steps: []func() (Observation, error){isDone, isDone, oldPod, isDone}, soak: 4 * time.Second, want: Done, observations: 6},
		{name: "an observation that fails during the soak starts it over", steps: []func() (Observation, error){isDone, apiAway, isDone}, soak: 2 * time.Second, want: Done, observations: 4},
		{name: "a rollback during the wait leaves at once", steps: []func() (Observation, error){oldPod, rolledTo}, want: Left, observations: 2},
		{name: "a rollback during the soak leaves at once", steps: []func() (Observation, error){isDone, rolledTo}, soak: time.Minute, want: Left, observations: 2},
		{name: "facts that never hold time out", steps: []func() (Observation, error){oldPod}, timeout: 10 * time.Second, err: ErrTimeout, observations: 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &script{steps: tc.steps}
			cfg := WaitConfig{Identity: newID, Soak: tc.soak, Timeout: tc.timeout}
			fakeClock(&cfg)
			v, err := Wait(context.Background(), cfg, src)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.Contains(t, err.Error(), "old-a of identity 1111111111 terminating", "the timeout says what was still missing")
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, v.State, v.Reason)
			}
			assert.Equal(t, tc.observations, src.n, "observations")
		})
	}
}

func TestWaitStopsWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("SIGTERM"))
	_, err := Wait(ctx, WaitConfig{Identity: newID}, &script{steps: []func() (Observation, error){oldPod}})
	assert.ErrorContains(t, err, "SIGTERM")
}

func TestWaitRefusesAConfigurationThatCannotWork(t *testing.T) {
	for name, cfg := range map[string]WaitConfig{
		"no identity":    {},
		"negative soak":  {Identity: newID, Soak: -time.Second},
		"negative delay": {Identity: newID, Interval: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Wait(context.Background(), cfg, &script{steps: []func() (Observation, error){isDone}})
			assert.Error(t, err)
		})
	}
}

// A pod of the new identity that failed does not block: only what can still serve old code counts.
func TestAFailedPodOfAnotherIdentityDoesNotHoldTheContract(t *testing.T) {
	o := ended()
	p := pod("old-a", "old", oldID)
	p.Status.Phase = corev1.PodFailed
	o.Pods = append(o.Pods, p)
	assert.Equal(t, Done, Evaluate(o, newID).State)
}

func TestDeploymentObservesWhatItsSelectorMatchesAndAGoneDeploymentHasLeft(t *testing.T) {
	d := deployment()
	d.Namespace = "shop"
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}
	mine, other := replicaSet("new", newID, 2), replicaSet("x", oldID, 1)
	mine.Namespace, other.Namespace = "shop", "shop"
	mine.Labels, other.Labels = map[string]string{"app": "shop"}, map[string]string{"app": "other"}
	p := pod("new-a", "new", newID)
	p.Namespace, p.Labels = "shop", map[string]string{"app": "shop"}
	cs := fake.NewClientset(d, &mine, &other, &p)
	src := Deployment{Name: "app", Deployments: cs.AppsV1().Deployments("shop"), ReplicaSets: cs.AppsV1().ReplicaSets("shop"), Pods: cs.CoreV1().Pods("shop")}
	o, err := src.Observe(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "app", o.Deployment.Name)
	require.Len(t, o.ReplicaSets, 1)
	assert.Equal(t, "new", o.ReplicaSets[0].Name)
	require.Len(t, o.Pods, 1)

	src.Name = "gone"
	o, err = src.Observe(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Left, Evaluate(o, newID).State)
}
