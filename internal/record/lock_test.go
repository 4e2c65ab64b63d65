package record_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/premigrate/premigrate/internal/record"
)

func lockOptions(job string) record.LockOptions {
	return record.LockOptions{
		Namespace: ns,
		ConfigMap: name,
		Holder:    record.Holder{Identity: "id-" + job, Job: job, Pod: job + "-pod"},
		Lease:     300 * time.Millisecond,
		Poll:      10 * time.Millisecond,
	}
}

// lockedConfigMap is a ConfigMap whose lock a holder wrote and never renews (its pod was killed).
func lockedConfigMap(t *testing.T, job string, acquired time.Time) *fake.Clientset {
	t.Helper()
	b, err := json.Marshal(record.Holder{Identity: "id-" + job, Job: job, Pod: job + "-pod", Acquired: acquired, Renewed: acquired})
	if err != nil {
		t.Fatal(err)
	}
	cm := configMap(map[string]string{})
	cm.ResourceVersion = "1"
	cm.Annotations = map[string]string{record.LockAnnotation: string(b)}
	cs := fake.NewClientset(cm)
	apiServerUpdates(cs, func(int) {})
	return cs
}

func TestOfTwoMigrationsThatFoundTheLockFreeOnlyTheFirstToWriteHoldsIt(t *testing.T) {
	cm := configMap(map[string]string{})
	cm.ResourceVersion = "1"
	cs := fake.NewClientset(cm)
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	apiServerUpdates(cs, func(n int) {
		if n != 1 {
			return
		}
		// another migration read the free lock too, and wrote itself in after our read, before our update
		b, err := json.Marshal(record.Holder{Identity: "id-other", Job: "other", Pod: "other-pod", Acquired: time.Now(), Renewed: time.Now()})
		if err != nil {
			t.Error(err)
		}
		other := configMap(map[string]string{})
		other.ResourceVersion = "2"
		other.Annotations = map[string]string{record.LockAnnotation: string(b)}
		if err := cs.Tracker().Update(gvr, other, ns); err != nil {
			t.Error(err)
		}
	})
	var said logLines
	o := lockOptions("late")
	o.Log = said.logger()
	start := time.Now()
	l, _, err := record.Acquire(context.Background(), cs.CoreV1().ConfigMaps(ns), o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(context.Background()) }()
	// the other migration never renews (it is simulated): its lock expires after a lease, then ours is taken
	if took := time.Since(start); took < o.Lease || !strings.Contains(said.String(), "Job other") {
		t.Errorf("took the lock after %s although another migration wrote itself in first (the take must carry the resourceVersion "+
			"it read, so that the later writer gets a conflict and waits); said:\n%s", took, said.String())
	}
}

func TestALockIsHeldAsLongAsItsHolderRenewsItAndGivenBackOnRelease(t *testing.T) {
	cm := configMap(map[string]string{"abc": "x"})
	cm.ResourceVersion = "1"
	cs := fake.NewClientset(cm)
	apiServerUpdates(cs, func(int) {})
	first, _, err := record.Acquire(context.Background(), cs.CoreV1().ConfigMaps(ns), lockOptions("first"))
	if err != nil {
		t.Fatal(err)
	}
	var said logLines
	o := lockOptions("second")
	o.Log = said.logger()
	got := make(chan time.Time, 1)
	go func() {
		l, _, err := record.Acquire(context.Background(), cs.CoreV1().ConfigMaps(ns), o)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- time.Now()
		_ = l.Release(context.Background())
	}()
	// three leases: a holder that renews keeps the lock however long it runs
	time.Sleep(900 * time.Millisecond)
	released := time.Now()
	if err := first.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	at, ok := <-got
	if !ok {
		return
	}
	if at.Before(released) {
		t.Errorf("the second migration took the lock %s before the first released it, though the first renewed it", released.Sub(at))
	}
	if !strings.Contains(said.String(), "INFO another migration of this release holds the lock") {
		t.Errorf("the waiter did not say whom it waits for:\n%s", said.String())
	}
	if d := configMapOf(t, cs).Data; d["abc"] != "x" {
		t.Errorf("the records changed under the lock: %v", d)
	}
}

func TestALockWhoseHolderStoppedRenewingItIsTakenOverAfterTheLease(t *testing.T) {
	cs := lockedConfigMap(t, "killed", time.Now().Add(-time.Hour))
	var said logLines
	o := lockOptions("next")
	o.Log = said.logger()
	start := time.Now()
	l, _, err := record.Acquire(context.Background(), cs.CoreV1().ConfigMaps(ns), o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(context.Background()) }()
	// the waiter measures the lease on its own clock from when it first saw the lock, never from the
	// holder's timestamps (the clocks of two nodes differ)
	if took := time.Since(start); took < o.Lease {
		t.Errorf("took over a lock after %s, before a lease of %s without a change", took, o.Lease)
	}
	// taking over from a holder that vanished is worth a warning: its migration may have stopped halfway
	if !strings.Contains(said.String(), "WARN the migration lock in") || !strings.Contains(said.String(), "stopped renewing it; taking it over") {
		t.Errorf("the take-over was not logged at level WARN:\n%s", said.String())
	}
	if h, _ := record.HolderOf(configMapOf(t, cs)); h.Job != "next" {
		t.Errorf("lock holder is %+v, want Job next", h)
	}
}

func TestWaitingForTheLockStopsWhenTheGateIsAskedToStop(t *testing.T) {
	cs := lockedConfigMap(t, "holder", time.Now())
	o := lockOptions("waiter")
	o.Lease = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := record.Acquire(ctx, cs.CoreV1().ConfigMaps(ns), o); err == nil || !strings.Contains(err.Error(), "held by migration id-holder of Job holder") {
		t.Errorf("err = %v, want the wait to end naming the holder", err)
	}
}

func TestTheLockCreatesAMissingStoreWithTheEarlierRecords(t *testing.T) {
	cs := fake.NewClientset()
	o := lockOptions("first")
	o.Create = &record.Metadata{Labels: map[string]string{"app.kubernetes.io/name": "shop"}}
	o.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: "data-db-0", UID: "pvc-uid"}
	o.Seed = map[string]string{"0123456789": `{"completedAt":"2026-03-04T05:06:00Z","job":"j"}`}
	l, cm, err := record.Acquire(context.Background(), cs.CoreV1().ConfigMaps(ns), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Data["0123456789"]; !ok || len(cm.OwnerReferences) != 1 || cm.Labels["app.kubernetes.io/name"] != "shop" {
		t.Errorf("created %+v", cm)
	}
	if h, held := record.HolderOf(cm); !held || h.Job != "first" {
		t.Errorf("created without the lock: %v", cm.Annotations)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Error(err)
	}
}

func configMapOf(t *testing.T, cs *fake.Clientset) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func TestALockLeftByAnEarlierPodOfTheSameJobIsTakenOverAtOnceButNotOneOfAnotherJobOfTheSameName(t *testing.T) {
	for _, tc := range []struct {
		name     string
		uid      string
		takeOver bool
	}{
		{"the same Job (its UID): a retry pod after a kill", "uid-1", true},
		{"a Job of the same name but another UID: a replaced hook Job whose pod may still run", "uid-2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(record.Holder{Identity: "id", Job: "migrate", JobUID: "uid-1", Pod: "migrate-aaaaa", Acquired: time.Now(), Renewed: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			cm := configMap(map[string]string{})
			cm.ResourceVersion = "1"
			cm.Annotations = map[string]string{record.LockAnnotation: string(b)}
			cs := fake.NewClientset(cm)
			apiServerUpdates(cs, func(int) {})
			o := lockOptions("migrate")
			o.Holder = record.Holder{Identity: "id", Job: "migrate", JobUID: tc.uid, Pod: "migrate-bbbbb"}
			o.Lease = time.Hour
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			l, _, err := record.Acquire(ctx, cs.CoreV1().ConfigMaps(ns), o)
			if (err == nil) != tc.takeOver {
				t.Fatalf("took the lock: %v (err %v), want %v", err == nil, err, tc.takeOver)
			}
			if l != nil {
				_ = l.Release(context.Background())
			}
		})
	}
}

func TestAHolderThatCannotRenewItsLockKeepsItAndIsToldOnlyWhenAnotherTookItOver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failure  func(cs *fake.Clientset)
		lost     bool
		saidLine string
	}{
		{"another migration took it over", func(cs *fake.Clientset) {
			cm := configMap(map[string]string{})
			cm.ResourceVersion = "100"
			cm.Annotations = map[string]string{record.LockAnnotation: `{"job":"other"}`}
			if err := cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, cm, ns); err != nil {
				t.Error(err)
			}
		}, true, "is no longer this migration's"},
		{"the API server refuses every renewal (cut off, or the ServiceAccount was deleted)", func(cs *fake.Clientset) {
			cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewUnauthorized("token is not valid")
			})
		}, false, "the command goes on (a lost renewal never stops it)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := configMap(map[string]string{})
			cm.ResourceVersion = "1"
			cs := fake.NewClientset(cm)
			apiServerUpdates(cs, func(int) {})
			var said logLines
			o := lockOptions("holder")
			o.Lease = 600 * time.Millisecond
			o.Log = said.logger()
			l, _, err := record.Acquire(context.Background(), cs.CoreV1().ConfigMaps(ns), o)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Release(context.Background()) }()
			tc.failure(cs)
			select {
			case <-l.Lost():
				if !tc.lost {
					t.Errorf("told the lock was lost although no one else took it: a renewal that fails must not stop a migration halfway")
				}
			case <-time.After(2 * o.Lease):
				if tc.lost {
					t.Errorf("never told the lock was another's")
				}
			}
			if !strings.Contains(said.String(), "ERROR") || !strings.Contains(said.String(), tc.saidLine) {
				t.Errorf("the holder did not say at level ERROR %q:\n%s", tc.saidLine, said.String())
			}
		})
	}
}

func TestALockThatWasNotRenewedIsTakenOverOnlyOnceItsHoldersPodRunsNoMore(t *testing.T) {
	for _, tc := range []struct {
		name     string
		running  bool
		err      error
		takeOver bool
		said     string
	}{
		{"its pod is gone", false, nil, true, "stopped renewing it and its pod killed-pod is gone; taking it over"},
		{"its pod still runs (cut off from the API server)", true, nil, false, "may still be running (its pod killed-pod is Running)"},
		{"its pod cannot be read", false, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "killed-pod", nil), false,
			"may still be running (cannot tell whether its pod killed-pod still runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := lockedConfigMap(t, "killed", time.Now().Add(-time.Hour))
			var said logLines
			o := lockOptions("next")
			o.Log = said.logger()
			o.Running = func(_ context.Context, h record.Holder) (bool, string, error) {
				if h.Pod != "killed-pod" {
					t.Errorf("asked about pod %q, want the holder's, killed-pod", h.Pod)
				}
				if tc.running {
					return true, "its pod " + h.Pod + " is Running", tc.err
				}
				return false, "its pod " + h.Pod + " is gone", tc.err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*o.Lease)
			defer cancel()
			l, _, err := record.Acquire(ctx, cs.CoreV1().ConfigMaps(ns), o)
			if (err == nil) != tc.takeOver {
				t.Fatalf("took the lock: %v (err %v), want %v", err == nil, err, tc.takeOver)
			}
			if l != nil {
				_ = l.Release(context.Background())
			}
			if !strings.Contains(said.String(), tc.said) {
				t.Errorf("the waiter did not say %q:\n%s", tc.said, said.String())
			}
		})
	}
}
