//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/internal/gate"
	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	recordsAndWatchOnARealAPIServerScenario = scenarios.Declare(framework.Before, framework.CI, "records-and-watch-on-a-real-api-server")
)

// The gate's record writes and its watch, against the real API server: the fake clientset of the unit tests
// ignores resourceVersions on update and field selectors, the two things these protections rest on.
func TestTheRecordsAndTheWatchHoldOnARealAPIServer(t *testing.T) {
	share(t, weightOne, 20*time.Second)
	scenario(t, recordsAndWatchOnARealAPIServerScenario, "")
	ns := env.NewNamespace(t, "apiserver", restricted)
	ctx := context.Background()
	const records = "app-migrations"
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: records}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := func(id string) record.Options {
		return record.Options{Namespace: ns, ConfigMap: records, Identity: id, Job: "app-migrate-" + id, Keep: 20,
			WaitForConfigMap: 30 * time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	}

	t.Run("a record written between another writer's read and its update is kept", func(t *testing.T) {
		cms := env.Client.CoreV1().ConfigMaps(ns)
		interleaved := &interleavingClient{ConfigMapClient: cms, between: func() {
			// another migration records itself after our read, before our update
			if err := record.Write(ctx, cms, opts("bbbbbbbbbb")); err != nil {
				t.Errorf("the other writer: %v", err)
			}
		}}
		if err := record.Write(ctx, interleaved, opts("aaaaaaaaaa")); err != nil {
			t.Fatal(err)
		}
		if n := interleaved.updates.Load(); n < 2 {
			t.Fatalf("%d updates: the first, made on a stale read, must have been refused with a conflict and retried", n)
		}
		cm, err := cms.Get(ctx, records, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"aaaaaaaaaa", "bbbbbbbbbb"} {
			if _, ok := cm.Data[id]; !ok {
				t.Errorf("record %s was lost: data %v", id, cm.Data)
			}
		}
	})

	t.Run("of two migrations that found the release's lock free, only the first to write holds it", func(t *testing.T) {
		cms := env.Client.CoreV1().ConfigMaps(ns)
		lockOpts := func(job string) record.LockOptions {
			return record.LockOptions{Namespace: ns, ConfigMap: records, Holder: record.Holder{Identity: job, Job: job, Pod: job + "-pod"},
				Lease: time.Minute, Poll: 50 * time.Millisecond, Log: slog.New(slog.NewTextHandler(t.Output(), nil))}
		}
		var first *record.Lock
		interleaved := &interleavingClient{ConfigMapClient: cms, between: func() {
			// another migration takes the lock after our read, before our update
			l, _, err := record.Acquire(ctx, cms, lockOpts("first"))
			if err != nil {
				t.Errorf("the other migration: %v", err)
			}
			first = l
		}}
		got := make(chan time.Time, 1)
		go func() {
			l, _, err := record.Acquire(ctx, interleaved, lockOpts("second"))
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			got <- time.Now()
			_ = l.Release(ctx)
		}()
		time.Sleep(2 * time.Second)
		if first == nil {
			t.Fatal("the other migration never took the lock")
		}
		released := time.Now()
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		at, ok := <-got
		if ok && at.Before(released) {
			t.Errorf("the second migration took the lock %s before the first released it: its update, made on a stale read, "+
				"must have been refused with a conflict", released.Sub(at))
		}
	})

	t.Run("a Complete Job of the gate's Job name but another identity releases nothing", func(t *testing.T) {
		const name = "app-migrate"
		cfg := gate.Config{Namespace: ns, Identity: "cccccccccc", Records: records, Job: name, Timeout: 3 * time.Minute,
			ProgressInterval: time.Hour, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
			Log: nil} // none: it may log after the test ended
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type outcome struct {
			res gate.Result
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := gate.Wait(wctx, cfg, env.Client.BatchV1().Jobs(ns), env.Client.CoreV1().ConfigMaps(ns))
			done <- outcome{res, err}
		}()
		// a Complete Job of identity dddddddddd under the gate's Job name (an earlier hook's), and a Complete
		// Job of the gate's identity under another name (a stale one): the watch sees the first, the name's
		// field selector hides the second
		runToCompletion(t, ns, name, "dddddddddd")
		runToCompletion(t, ns, "app-migrate-other", "cccccccccc")
		select {
		case o := <-done:
			t.Fatalf("the gate let go on Jobs that are no evidence for its identity: %+v, %v", o.res, o.err)
		case <-time.After(3 * time.Second):
		}
		if err := record.Write(ctx, env.Client.CoreV1().ConfigMaps(ns), opts("cccccccccc")); err != nil {
			t.Fatal(err)
		}
		select {
		case o := <-done:
			if o.err != nil || o.res.Outcome != gate.Succeeded || !o.res.Recorded {
				t.Fatalf("result %+v, %v: want success from the record of cccccccccc", o.res, o.err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the gate did not let go within a minute of its record")
		}
	})
}

// interleavingClient runs between once, after the first Get and before the first Update, and counts updates.
type interleavingClient struct {
	record.ConfigMapClient
	between func()
	gets    atomic.Int32
	updates atomic.Int32
}

func (c *interleavingClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error) {
	c.gets.Add(1)
	return c.ConfigMapClient.Get(ctx, name, opts)
}

func (c *interleavingClient) Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	if c.updates.Add(1) == 1 {
		c.between()
	}
	return c.ConfigMapClient.Update(ctx, cm, opts)
}

// runToCompletion runs a Job named name, labelled with identity id, whose pod exits 0 at once, and waits
// until it is Complete.
func runToCompletion(t *testing.T, ns, name, id string) {
	t.Helper()
	ctx := context.Background()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"premigrate.io/identity": id}},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: framework.RestrictedPod(corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "migrate", Image: "ghcr.io/premigrate/demo:v1", Args: []string{"--help"}}},
			})},
		},
	}
	job.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](65532)
	if _, err := env.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Job %s: %v", name, err)
	}
	framework.WaitUntil(t, fmt.Sprintf("Job %s to be Complete", name), 2*time.Minute, func(ctx context.Context) (bool, error) {
		j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, nil
			}
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("job %s failed: %s", name, strings.TrimSpace(c.Message))
			}
		}
		return false, nil
	})
}
