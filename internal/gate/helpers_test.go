package gate_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/premigrate/premigrate/internal/gate"
)

const (
	ns       = "shop"
	identity = "abc123def0"
	records  = "shop-app-migrations"
	jobName  = "shop-app-migrate-" + identity
)

// migrationJob is the Job the gate waits for (its name, this identity), changed by mods.
func migrationJob(mods ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      jobName,
			Namespace: ns,
			Labels: map[string]string{
				"app.kubernetes.io/instance":  "shop",
				"app.kubernetes.io/component": "migration",
				"premigrate.io/identity":      identity,
			},
		},
	}
	for _, m := range mods {
		m(j)
	}
	return j
}

func named(name string) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Name = name }
}

func ofIdentity(id string) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Labels["premigrate.io/identity"] = id }
}

func pods(active, failed int32) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Status.Active, j.Status.Failed = active, failed }
}

func condition(t batchv1.JobConditionType, reason, message string) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
			Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		})
	}
}

var (
	complete      = condition(batchv1.JobComplete, "", "")
	backoffFailed = condition(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
)

// recordsConfigMap holds records for the given identities.
func recordsConfigMap(identities ...string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: records, Namespace: ns},
		Data:       map[string]string{},
	}
	for _, id := range identities {
		cm.Data[id] = fmt.Sprintf(`{"completedAt":"2026-01-02T03:04:05Z","job":"shop-app-migrate-%s"}`, id)
	}
	return cm
}

// withRecord adds the record value of identity to cm.
func withRecord(cm *corev1.ConfigMap, identity, value string) *corev1.ConfigMap {
	cm.Data[identity] = value
	return cm
}

// logs collects log lines as "LEVEL message"; safe for concurrent use. It is the slog.Handler of the
// gate's logger in these tests.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }

func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Level.String()+" "+r.Message)
	return nil
}

func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

// logger is a logger that writes into l.
func (l *logs) logger() *slog.Logger { return slog.New(l) }

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func (l *logs) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

func config(l *logs) gate.Config {
	return gate.Config{
		Namespace:        ns,
		Identity:         identity,
		Records:          records,
		Job:              jobName,
		Timeout:          10 * time.Second,
		ProgressInterval: time.Hour,
		MinBackoff:       5 * time.Millisecond,
		MaxBackoff:       20 * time.Millisecond,
		Log:              l.logger(),
	}
}

type waitResult struct {
	res gate.Result
	err error
	at  time.Time
}

// startWait runs gate.Wait in the background.
func startWait(ctx context.Context, cs *fake.Clientset, cfg gate.Config) <-chan waitResult {
	done := make(chan waitResult, 1)
	go func() {
		res, err := gate.Wait(ctx, cfg, cs.BatchV1().Jobs(ns), cs.CoreV1().ConfigMaps(ns))
		done <- waitResult{res: res, err: err, at: time.Now()}
	}()
	return done
}

// await returns the wait's result, failing the test after a generous bound.
func await(t *testing.T, done <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Wait returned error: %v", r.err)
		}
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return")
		return waitResult{}
	}
}

// actions counts the client's calls with verb on resource.
func actions(cs *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds, failing the test after a while.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// watching waits until the gate watches both resources.
func watching(t *testing.T, cs *fake.Clientset) {
	t.Helper()
	eventually(t, "the gate watches Jobs and the ConfigMap", func() bool {
		return actions(cs, "watch", "jobs") > 0 && actions(cs, "watch", "configmaps") > 0
	})
}

func assertNotDone(t *testing.T, done <-chan waitResult) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("Wait returned early: %+v, %v", r.res, r.err)
	default:
	}
}
