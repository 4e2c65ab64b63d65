package gate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/gate"
)

func TestWaitDecidesFromTheStateItFinds(t *testing.T) {
	tests := []struct {
		name     string
		objects  []runtime.Object
		want     gate.Outcome
		recorded bool
		reason   string
	}{
		{
			name:    "succeeds when the Job for this identity is Complete",
			objects: []runtime.Object{migrationJob(pods(0, 0), complete), recordsConfigMap()},
			want:    gate.Succeeded,
		},
		{
			name:     "succeeds from the record when the succeeded Job was deleted",
			objects:  []runtime.Object{recordsConfigMap("0000000000", identity)},
			want:     gate.Succeeded,
			recorded: true,
		},
		{
			name:     "succeeds from the record even when a later Job of the same identity failed",
			objects:  []runtime.Object{migrationJob(backoffFailed), recordsConfigMap(identity)},
			want:     gate.Succeeded,
			recorded: true,
		},
		{
			name:    "fails with the Job's reason when the backoff limit was reached",
			objects: []runtime.Object{migrationJob(pods(0, 3), backoffFailed), recordsConfigMap()},
			want:    gate.Failed,
			reason:  "BackoffLimitExceeded",
		},
		{
			name: "fails with the Job's reason when the deadline was exceeded",
			objects: []runtime.Object{
				migrationJob(pods(0, 1), condition(batchv1.JobFailed, "DeadlineExceeded", "Job was active longer than specified deadline")),
			},
			want:   gate.Failed,
			reason: "DeadlineExceeded",
		},
		{
			name: "fails when an identity deployed after it contracted the schema (a rollback after the contract)",
			objects: []runtime.Object{withRecord(recordsConfigMap(identity), "2222222222",
				`{"completedAt":"2026-01-02T04:00:00Z","job":"shop-app-migrate","jobCreated":"2026-01-02T03:59:00Z","contractedAt":"2026-01-02T04:05:00.000Z","contractJob":"shop-app-contract-x"}`)},
			want:   gate.Failed,
			reason: "SchemaContracted",
		},
		{
			name: "succeeds when an identity deployed after it is recorded but its contract has not run",
			objects: []runtime.Object{withRecord(recordsConfigMap(identity), "2222222222",
				`{"completedAt":"2026-01-02T04:00:00Z","job":"shop-app-migrate","jobCreated":"2026-01-02T03:59:00Z"}`)},
			want:     gate.Succeeded,
			recorded: true,
		},
		{
			name: "succeeds when only an identity deployed before it contracted the schema",
			objects: []runtime.Object{withRecord(recordsConfigMap(identity), "0000000000",
				`{"completedAt":"2026-01-01T04:00:00Z","job":"shop-app-migrate","jobCreated":"2026-01-01T03:59:00Z","contractedAt":"2026-01-01T04:05:00.000Z","contractJob":"c"}`)},
			want:     gate.Succeeded,
			recorded: true,
		},
		{
			name:    "waits while the Job is pending",
			objects: []runtime.Object{migrationJob(), recordsConfigMap()},
			want:    gate.TimedOut,
		},
		{
			name:    "waits while the Job is running",
			objects: []runtime.Object{migrationJob(pods(1, 0)), recordsConfigMap()},
			want:    gate.TimedOut,
		},
		{
			name:    "waits while a retry runs after a first pod failed",
			objects: []runtime.Object{migrationJob(pods(1, 1)), recordsConfigMap()},
			want:    gate.TimedOut,
		},
		{
			name:    "waits when the Job has not been created yet",
			objects: []runtime.Object{recordsConfigMap()},
			want:    gate.TimedOut,
		},
		{
			name:    "waits when the failed Job was deleted, as there is no record",
			objects: []runtime.Object{recordsConfigMap("0000000000")},
			want:    gate.TimedOut,
		},
		{
			name:    "waits when neither the Job nor the records ConfigMap exist yet",
			objects: nil,
			want:    gate.TimedOut,
		},
		{
			name: "ignores Jobs of other identities",
			objects: []runtime.Object{
				migrationJob(named("shop-app-migrate-other"), ofIdentity("other"), complete),
				migrationJob(named("shop-app-migrate-another"), ofIdentity("another"), backoffFailed),
				recordsConfigMap(),
			},
			want: gate.TimedOut,
		},
		{
			name: "ignores a Complete Job of this identity under another name (a hook Job left by an earlier install)",
			objects: []runtime.Object{
				migrationJob(named("shop-app-migrate"), complete),
				recordsConfigMap(),
			},
			want: gate.TimedOut,
		},
		{
			name: "ignores a Complete Job of this name that carries another identity",
			objects: []runtime.Object{
				migrationJob(ofIdentity("other"), complete),
				recordsConfigMap(),
			},
			want: gate.TimedOut,
		},
		{
			name: "a stale Failed Job of this identity under another name does not beat the running one",
			objects: []runtime.Object{
				migrationJob(named("shop-app-migrate"), pods(0, 3), backoffFailed),
				migrationJob(pods(1, 0)),
				recordsConfigMap(),
			},
			want: gate.TimedOut,
		},
		{
			name:    "ignores records of other identities",
			objects: []runtime.Object{recordsConfigMap("0000000000", "1111111111")},
			want:    gate.TimedOut,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l logs
			cfg := config(&l)
			if tt.want == gate.TimedOut {
				cfg.Timeout = 300 * time.Millisecond
			}
			cs := fake.NewClientset(tt.objects...)
			r := await(t, startWait(context.Background(), cs, cfg))
			if r.res.Outcome != tt.want {
				t.Fatalf("outcome = %v, want %v; logs:\n%s", r.res.Outcome, tt.want, &l)
			}
			if r.res.Recorded != tt.recorded {
				t.Errorf("recorded = %v, want %v", r.res.Recorded, tt.recorded)
			}
			if r.res.Reason != tt.reason {
				t.Errorf("reason = %q, want %q", r.res.Reason, tt.reason)
			}
			if tt.want == gate.Failed {
				wants := []string{tt.reason, "kubectl logs -n shop job/" + jobName + " -c migrate"}
				if tt.reason == "SchemaContracted" { // no Job failed: the summary names both identities and what to do
					wants = []string{"identity 2222222222, deployed after it, contracted the schema", "deploy 2222222222 or a later version"}
				}
				for _, want := range wants {
					if !strings.Contains(l.String(), want) {
						t.Errorf("logs do not mention %q:\n%s", want, &l)
					}
				}
			}
		})
	}
}

func TestWaitReturnsWithinASecondWhenTheJobCompletesDuringTheWait(t *testing.T) {
	var l logs
	cs := fake.NewClientset(migrationJob(pods(1, 0)), recordsConfigMap())
	done := startWait(context.Background(), cs, config(&l))
	watching(t, cs)
	assertNotDone(t, done)

	completedAt := time.Now()
	if _, err := cs.BatchV1().Jobs(ns).Update(context.Background(), migrationJob(pods(0, 0), complete), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := await(t, done)
	if r.res.Outcome != gate.Succeeded || r.res.Job != jobName {
		t.Fatalf("result = %+v, want success by Job %s", r.res, jobName)
	}
	if took := r.at.Sub(completedAt); took >= time.Second {
		t.Errorf("returned %s after the Job completed, want under 1s", took)
	}
	if n := actions(cs, "list", "jobs"); n != 1 {
		t.Errorf("listed Jobs %d times, want once: the completion must arrive through the watch", n)
	}
}

func TestWaitKeepsWaitingWhileAFailedPodIsRetriedAndReportsProgress(t *testing.T) {
	var l logs
	cfg := config(&l)
	cfg.ProgressInterval = 20 * time.Millisecond
	cs := fake.NewClientset(migrationJob(pods(1, 1)), recordsConfigMap())
	done := startWait(context.Background(), cs, cfg)

	progress := "Job " + jobName + " retrying (active=1 failed=1)"
	eventually(t, "two progress lines were logged", func() bool { return l.count(progress) >= 2 })
	assertNotDone(t, done)
	for _, want := range []string{"waiting for migration " + identity, "elapsed", "no record in ConfigMap " + records} {
		if !strings.Contains(l.String(), want) {
			t.Errorf("progress lines do not mention %q:\n%s", want, &l)
		}
	}

	if _, err := cs.BatchV1().Jobs(ns).Update(context.Background(), migrationJob(pods(0, 1), complete), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, done); r.res.Outcome != gate.Succeeded {
		t.Fatalf("outcome = %v, want succeeded", r.res.Outcome)
	}
}

func TestWaitFailsWhenTheJobFailsWhileWaiting(t *testing.T) {
	var l logs
	cs := fake.NewClientset(migrationJob(pods(1, 2)), recordsConfigMap())
	done := startWait(context.Background(), cs, config(&l))
	watching(t, cs)
	assertNotDone(t, done)

	if _, err := cs.BatchV1().Jobs(ns).Update(context.Background(), migrationJob(pods(0, 3), backoffFailed), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := await(t, done)
	want := gate.Result{Outcome: gate.Failed, Job: jobName, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}
	r.res.Summary = ""
	if r.res != want {
		t.Fatalf("result = %+v, want %+v", r.res, want)
	}
	if !strings.Contains(l.String(), "read the migration's logs with: kubectl logs -n shop job/"+jobName+" -c migrate") {
		t.Errorf("logs do not tell how to read the migration's logs:\n%s", &l)
	}
	// an alert or a filter on the level must see the failure
	if l.count("ERROR migration "+identity+" failed: Job shop/"+jobName+" is Failed") != 1 || l.count("ERROR read the migration's logs") != 1 {
		t.Errorf("the failure is not logged at level ERROR:\n%s", &l)
	}
}

func TestWaitSucceedsWhenTheJobIsCreatedAfterTheGateStarted(t *testing.T) {
	var l logs
	cs := fake.NewClientset()
	done := startWait(context.Background(), cs, config(&l))
	watching(t, cs)
	assertNotDone(t, done)

	if _, err := cs.BatchV1().Jobs(ns).Create(context.Background(), migrationJob(complete), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, done); r.res.Outcome != gate.Succeeded {
		t.Fatalf("outcome = %v, want succeeded", r.res.Outcome)
	}
}

func TestWaitSucceedsWhenTheRecordIsWrittenWhileWaiting(t *testing.T) {
	var l logs
	cs := fake.NewClientset(recordsConfigMap())
	done := startWait(context.Background(), cs, config(&l))
	watching(t, cs)
	assertNotDone(t, done)

	if _, err := cs.CoreV1().ConfigMaps(ns).Update(context.Background(), recordsConfigMap(identity), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := await(t, done)
	if r.res.Outcome != gate.Succeeded || !r.res.Recorded {
		t.Fatalf("result = %+v, want success from the record", r.res)
	}
}

func TestWaitListsAgainWhenTheWatchEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(w *watch.FakeWatcher)
	}{
		{"after the API server closed the watch", func(w *watch.FakeWatcher) { w.Stop() }},
		{"after the watch reported an expired resourceVersion", func(w *watch.FakeWatcher) {
			w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l logs
			cs := fake.NewClientset(migrationJob(pods(1, 0)), recordsConfigMap())
			first := watch.NewFake()
			var calls atomic.Int32
			cs.PrependWatchReactor("jobs", func(k8stesting.Action) (bool, watch.Interface, error) {
				if calls.Add(1) == 1 {
					return true, first, nil
				}
				return false, nil, nil
			})
			// an hour of backoff: an ordinary end of a watch must be followed by a new list at once, not after one
			cfg := config(&l)
			cfg.MinBackoff, cfg.MaxBackoff = time.Hour, time.Hour
			done := startWait(context.Background(), cs, cfg)
			watching(t, cs)

			// The first watch never sees this update: only a new list can.
			if _, err := cs.BatchV1().Jobs(ns).Update(context.Background(), migrationJob(complete), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			assertNotDone(t, done)
			tt.end(first)

			if r := await(t, done); r.res.Outcome != gate.Succeeded {
				t.Fatalf("outcome = %v, want succeeded; logs:\n%s", r.res.Outcome, &l)
			}
			if n := actions(cs, "list", "jobs"); n != 2 {
				t.Errorf("listed Jobs %d times, want 2", n)
			}
			if strings.Contains(l.String(), "retrying") || l.count("WARN") > 0 || l.count("ERROR") > 0 {
				t.Errorf("an ordinary end of a watch was logged as an error:\n%s", &l)
			}
			if l.count("INFO migration "+identity+" succeeded") != 1 {
				t.Errorf("the success is not one line at level INFO:\n%s", &l)
			}
		})
	}
}

// transientErrors are errors the gate must retry, never give up on.
var transientErrors = map[string]error{
	"service unavailable": apierrors.NewServiceUnavailable("apiserver is shutting down"),
	"internal error":      apierrors.NewInternalError(errors.New("etcd timeout")),
	"connection refused":  errors.New("dial tcp 10.96.0.1:443: connect: connection refused"),
	"too many requests":   apierrors.NewTooManyRequests("slow down", 1),
	"server timeout":      apierrors.NewServerTimeout(schema.GroupResource{Group: "batch", Resource: "jobs"}, "list", 1),
}

// successFrom returns objects that make the gate succeed through resource.
func successFrom(resource string) []runtime.Object {
	if resource == "configmaps" {
		return []runtime.Object{recordsConfigMap(identity)}
	}
	return []runtime.Object{migrationJob(complete)}
}

func TestWaitRetriesWhenListingFails(t *testing.T) {
	for _, resource := range []string{"jobs", "configmaps"} {
		for errName, listErr := range transientErrors {
			t.Run("listing "+resource+" fails three times with "+errName, func(t *testing.T) {
				var l logs
				cs := fake.NewClientset(successFrom(resource)...)
				var calls atomic.Int32
				cs.PrependReactor("list", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
					return calls.Add(1) <= 3, nil, listErr
				})
				r := await(t, startWait(context.Background(), cs, config(&l)))
				if r.res.Outcome != gate.Succeeded {
					t.Fatalf("outcome = %v, want succeeded; logs:\n%s", r.res.Outcome, &l)
				}
				if n := calls.Load(); n != 4 {
					t.Errorf("listed %s %d times, want 4", resource, n)
				}
				if !strings.Contains(l.String(), "(retrying)") {
					t.Errorf("logs do not report the error:\n%s", &l)
				}
			})
		}
	}
}

func TestWaitRetriesWhenWatchingFails(t *testing.T) {
	for _, resource := range []string{"jobs", "configmaps"} {
		for errName, watchErr := range transientErrors {
			t.Run("watching "+resource+" fails three times with "+errName, func(t *testing.T) {
				var l logs
				cs := fake.NewClientset()
				var calls atomic.Int32
				cs.PrependWatchReactor(resource, func(k8stesting.Action) (bool, watch.Interface, error) {
					return calls.Add(1) <= 3, nil, watchErr
				})
				done := startWait(context.Background(), cs, config(&l))
				eventually(t, "three failed watches", func() bool { return calls.Load() >= 3 })
				assertNotDone(t, done)
				for _, o := range successFrom(resource) {
					if err := cs.Tracker().Add(o); err != nil {
						t.Fatal(err)
					}
				}
				if r := await(t, done); r.res.Outcome != gate.Succeeded {
					t.Fatalf("outcome = %v, want succeeded; logs:\n%s", r.res.Outcome, &l)
				}
				if n := actions(cs, "list", resource); n < 4 {
					t.Errorf("listed %s %d times, want at least 4 (once per watch)", resource, n)
				}
			})
		}
	}
}

func TestWaitReportsForbiddenAsAnRBACProblemAndKeepsRetrying(t *testing.T) {
	for _, resource := range []string{"jobs", "configmaps"} {
		t.Run("listing "+resource+" is forbidden", func(t *testing.T) {
			var l logs
			cfg := config(&l)
			cfg.Timeout = 500 * time.Millisecond
			cfg.ProgressInterval = 50 * time.Millisecond
			// A failed Job must not fail the gate while the records
			// cannot be read: a record would override it.
			cs := fake.NewClientset(migrationJob(backoffFailed))
			cs.PrependReactor("list", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "",
					errors.New(`User "system:serviceaccount:shop:default" cannot list resource`))
			})
			r := await(t, startWait(context.Background(), cs, cfg))
			if r.res.Outcome != gate.TimedOut {
				t.Fatalf("outcome = %v, want timed out; logs:\n%s", r.res.Outcome, &l)
			}
			if n := l.count("forbidden, RBAC misconfiguration?"); n < 3 {
				t.Errorf("%d log lines report the RBAC problem, want it at once and in progress lines:\n%s", n, &l)
			}
			if n := l.count("WARN forbidden, RBAC misconfiguration?"); n != 1 {
				t.Errorf("%d lines report the RBAC problem at level WARN, want the first one:\n%s", n, &l)
			}
			if n := l.count("ERROR timed out after"); n != 1 {
				t.Errorf("the time-out is not one line at level ERROR:\n%s", &l)
			}
			if n := actions(cs, "list", resource); n < 3 {
				t.Errorf("listed %s %d times, want retries", resource, n)
			}
		})
	}
}

func TestWaitTreatsAMissingConfigMapAsNoRecord(t *testing.T) {
	var l logs
	cs := fake.NewClientset(migrationJob(backoffFailed))
	cs.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, records)
	})
	r := await(t, startWait(context.Background(), cs, config(&l)))
	if r.res.Outcome != gate.Failed {
		t.Fatalf("outcome = %v, want failed; logs:\n%s", r.res.Outcome, &l)
	}
	if strings.Contains(l.String(), "retrying") {
		t.Errorf("a missing ConfigMap was reported as an error:\n%s", &l)
	}
}

func TestWaitTimesOutNamingWhatItWaitedFor(t *testing.T) {
	var l logs
	cfg := config(&l)
	cfg.Timeout = 200 * time.Millisecond
	start := time.Now()
	r := await(t, startWait(context.Background(), fake.NewClientset(), cfg))
	if r.res.Outcome != gate.TimedOut {
		t.Fatalf("outcome = %v, want timed out", r.res.Outcome)
	}
	if took := r.at.Sub(start); took < cfg.Timeout {
		t.Errorf("timed out after %s, before the %s timeout", took, cfg.Timeout)
	}
	for _, want := range []string{"timed out after 200ms", identity, jobName, "ConfigMap " + records, "namespace " + ns} {
		if !strings.Contains(r.res.Summary, want) {
			t.Errorf("summary %q does not mention %q", r.res.Summary, want)
		}
	}
}

func TestWaitWithoutTimeoutKeepsWaitingUntilCancelled(t *testing.T) {
	var l logs
	cfg := config(&l)
	cfg.Timeout = 0
	ctx, cancel := context.WithCancel(context.Background())
	done := startWait(ctx, fake.NewClientset(), cfg)
	time.Sleep(100 * time.Millisecond)
	assertNotDone(t, done)
	cancel()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after cancel")
	}
}

func TestWaitRejectsAnInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*gate.Config)
	}{
		{"an empty identity", func(c *gate.Config) { c.Identity = "" }},
		{"an empty records name", func(c *gate.Config) { c.Records = "" }},
		{"an empty Job name", func(c *gate.Config) { c.Job = "" }},
		{"a negative timeout", func(c *gate.Config) { c.Timeout = -time.Second }},
	}
	for _, tt := range tests {
		t.Run("rejects "+tt.name, func(t *testing.T) {
			var l logs
			cfg := config(&l)
			tt.mod(&cfg)
			cs := fake.NewClientset()
			_, err := gate.Wait(context.Background(), cfg, cs.BatchV1().Jobs(ns), cs.CoreV1().ConfigMaps(ns))
			if !errors.Is(err, gate.ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestWaitIgnoresAWatchEventOfItsJobNameCarryingAnotherIdentity(t *testing.T) {
	var l logs
	cs := fake.NewClientset(recordsConfigMap())
	done := startWait(context.Background(), cs, config(&l))
	watching(t, cs)

	// The hook Job's name is the same for every identity: a Complete Job of another identity under that name
	// (an earlier upgrade's, or one Helm runs while these pods wait) reaches the gate through the watch.
	other := migrationJob(ofIdentity("ffffffffff"), complete)
	if _, err := cs.BatchV1().Jobs(ns).Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other.Status.Active = 0 // a MODIFIED event too, as the TTL controller's foreground deletion sends
	if _, err := cs.BatchV1().Jobs(ns).UpdateStatus(context.Background(), other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	assertNotDone(t, done)

	if err := cs.BatchV1().Jobs(ns).Delete(context.Background(), jobName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(context.Background(), recordsConfigMap(identity), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, done); r.res.Outcome != gate.Succeeded || !r.res.Recorded {
		t.Fatalf("result = %+v, want success from this identity's record, not from the Job of identity ffffffffff", r.res)
	}
}

func TestWaitFailsAtOnceNamingKeepRecordsWhenItsRecordWasPrunedAndNoJobIsLeft(t *testing.T) {
	var l logs
	cm := recordsConfigMap("0000000000")
	cm.Data["pruned"] = "1111111111 " + identity
	r := await(t, startWait(context.Background(), fake.NewClientset(cm), config(&l)))
	if r.res.Outcome != gate.Failed || r.res.Reason != "RecordPruned" {
		t.Fatalf("result %+v, want failed with reason RecordPruned", r.res)
	}
	if !strings.Contains(r.res.Summary, "migration.keepRecords") {
		t.Errorf("the summary does not name the value to raise:\n%s", r.res.Summary)
	}
	// a Complete Job of the identity is still evidence of its migration
	cs := fake.NewClientset(cm, migrationJob(complete))
	if r := await(t, startWait(context.Background(), cs, config(&l))); r.res.Outcome != gate.Succeeded {
		t.Errorf("with its Complete Job: result %+v, want succeeded", r.res)
	}
}

func TestWaitReleasesOnlyOnEvidenceMadeOnTheDatabaseThePodWillUse(t *testing.T) {
	since := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC) // the database's data was created after the records of recordsConfigMap
	here := dbid.ID{Value: "pod/db-0@new", Since: since}
	recordOn := func(database, at string) *corev1.ConfigMap {
		cm := recordsConfigMap()
		cm.Data[identity] = fmt.Sprintf(`{"completedAt":%q,"job":%q,"database":%q}`, at, jobName, database)
		return cm
	}
	completedAt := func(at time.Time) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.Status.CompletionTime = &metav1.Time{Time: at}
			complete(j)
		}
	}
	tests := []struct {
		name     string
		database dbid.ID
		objects  []runtime.Object
		want     gate.Outcome
		logs     string
	}{
		{name: "a record made on this database releases", database: here,
			objects: []runtime.Object{recordOn(here.Value, "2026-01-02T05:00:00Z")}, want: gate.Succeeded},
		{name: "a record made on the database before it was made again holds the pod, naming why", database: here,
			objects: []runtime.Object{recordOn("pod/db-0@old", "2026-01-02T03:00:00Z")}, want: gate.TimedOut,
			logs: "the database changed since identity " + identity + " was recorded"},
		{name: "the old run's Complete Job does not release beside a record of another database", database: here,
			objects: []runtime.Object{recordOn("pod/db-0@old", "2026-01-02T03:00:00Z"), migrationJob(completedAt(since.Add(time.Hour)))},
			want:    gate.TimedOut},
		{name: "a record of no database made before this database holds the pod", database: here,
			objects: []runtime.Object{recordsConfigMap(identity)}, want: gate.TimedOut, logs: "before the database's pod/db-0 was created"},
		{name: "a Job that completed before this database was created holds the pod, naming why", database: here,
			objects: []runtime.Object{recordsConfigMap(), migrationJob(completedAt(since.Add(-time.Minute)))}, want: gate.TimedOut,
			logs: "the database changed since identity " + identity + "'s migration ran (Job " + jobName + " completed at 2026-01-02T03:59:00Z, before the database's pod/db-0 was created"},
		{name: "a Job that completed on this database releases", database: here,
			objects: []runtime.Object{recordsConfigMap(), migrationJob(completedAt(since.Add(time.Minute)))}, want: gate.Succeeded},
		{name: "a gate given no database accepts a record of another", database: dbid.ID{},
			objects: []runtime.Object{recordOn("pod/db-0@old", "2026-01-02T03:00:00Z")}, want: gate.Succeeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waitCase(t, tt.objects, tt.want, tt.logs, func(cfg *gate.Config) {
				cfg.Database = tt.database
				cfg.ProgressInterval = 50 * time.Millisecond
			})
		})
	}
}

func TestWaitTakesTheRecordsFromTheStoreOnceItExistsAndFromTheReleasesConfigMapUntilThen(t *testing.T) {
	const store = "shop-app-migration-records"
	inStore := func(identities ...string) *corev1.ConfigMap {
		cm := recordsConfigMap(identities...)
		cm.Name = store
		return cm
	}
	tests := []struct {
		name    string
		objects []runtime.Object
		want    gate.Outcome
		logs    string
	}{
		{name: "a record in the store releases", objects: []runtime.Object{recordsConfigMap(), inStore(identity)},
			want: gate.Succeeded, logs: "recorded in ConfigMap " + store},
		{name: "a record left in the release's ConfigMap releases while no store exists",
			objects: []runtime.Object{recordsConfigMap(identity)}, want: gate.Succeeded, logs: "recorded in ConfigMap " + records},
		{name: "a record left in the release's ConfigMap counts no more once the store exists",
			objects: []runtime.Object{recordsConfigMap(identity), inStore("0ther1dent1ty")}, want: gate.TimedOut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waitCase(t, tt.objects, tt.want, tt.logs, func(cfg *gate.Config) { cfg.Store = store })
		})
	}
}

// waitCase runs a wait on objects with the config set changes and checks its outcome (a time-out comes after
// 300 ms) and that its logs say logs.
func waitCase(t *testing.T, objects []runtime.Object, want gate.Outcome, says string, set func(*gate.Config)) {
	t.Helper()
	var l logs
	cfg := config(&l)
	set(&cfg)
	if want == gate.TimedOut {
		cfg.Timeout = 300 * time.Millisecond
	}
	r := await(t, startWait(context.Background(), fake.NewClientset(objects...), cfg))
	if r.res.Outcome != want {
		t.Fatalf("outcome = %v, want %v; logs:\n%s", r.res.Outcome, want, &l)
	}
	if !strings.Contains(l.String(), says) {
		t.Errorf("logs do not say %q:\n%s", says, &l)
	}
}
