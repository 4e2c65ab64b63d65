package status

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/policy"
	"github.com/premigrate/premigrate/internal/record"
)

var t0 = time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)

func entry(db string) string {
	v, err := record.Entry{CompletedAt: t0, Job: "app-migrate", Database: db}.Encode()
	if err != nil {
		panic(err)
	}
	return v
}

// waiting is a pod of identity id whose gate container has not ended.
func waiting(name, id string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{IdentityAnnotation: id}},
		Spec:       corev1.PodSpec{InitContainers: []corev1.Container{{Name: GateContainer, Args: []string{"wait", "--records", "app-premigrate-migrations"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: GateContainer,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
}

func job(name, id, component string, cond batchv1.JobConditionType) batchv1.Job {
	j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{IdentityAnnotation: id, componentLabel: component}}}
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "failed"}}
	}
	return j
}

func TestStatusSaysWhatEachWaitingPodWaitsForAndWhatToDo(t *testing.T) {
	here := dbid.ID{Value: "pod/db@u2"}
	store := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-premigrate-migration-records"},
		Data: map[string]string{"aaaaaaaaaa": entry(here.Value), "cccccccccc": entry("pod/db@u1")}}
	sets := []Set{{Fullname: "app-premigrate", Store: store}}
	for _, c := range []struct {
		name   string
		pod    corev1.Pod
		jobs   []batchv1.Job
		reason policy.Reason
		next   string
		code   int
	}{
		{name: "recorded on this database: released at the next check", pod: waiting("p", "aaaaaaaaaa"), reason: policy.RecordedHere, next: "releases it", code: Waiting},
		{name: "its migration running", pod: waiting("p", "bbbbbbbbbb"), jobs: []batchv1.Job{job("app-migrate", "bbbbbbbbbb", "migration", "")},
			reason: policy.NotRecorded, next: "kubectl logs -n ns job/app-migrate -c migrate -f", code: Waiting},
		{name: "its migration failed", pod: waiting("p", "bbbbbbbbbb"), jobs: []batchv1.Job{job("app-migrate", "bbbbbbbbbb", "migration", batchv1.JobFailed)},
			reason: policy.JobFailed, next: "kubectl logs -n ns job/app-migrate -c migrate`, fix the cause", code: NeedsYou},
		{name: "no migration of its identity", pod: waiting("p", "bbbbbbbbbb"), jobs: []batchv1.Job{job("app-contract", "bbbbbbbbbb", "contract", "")},
			reason: policy.NotRecorded, next: "runs it", code: NeedsYou},
		{name: "recorded on another database", pod: waiting("p", "cccccccccc"), reason: policy.RecordedElsewhere, next: "runs it on this database", code: NeedsYou},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Build(Snapshot{Release: "app", Namespace: "ns", Sets: sets, Jobs: c.jobs, Pods: []corev1.Pod{c.pod},
				Databases: map[string]dbid.ID{"p": here}})
			if assert.Len(t, r.Pods, 1) {
				assert.False(t, r.Pods[0].Started)
				assert.Equal(t, c.reason, r.Pods[0].Decision.Reason, r.Pods[0].Decision.String())
				assert.Contains(t, r.Pods[0].Next, c.next)
			}
			assert.Equal(t, c.code, r.Code)
			var out bytes.Buffer
			assert.NoError(t, r.Write(&out))
			assert.Contains(t, out.String(), "next: "+r.Pods[0].Next)
		})
	}
}

func TestAPodWhoseGateEndedHasStartedAndNothingWaits(t *testing.T) {
	p := waiting("p", "aaaaaaaaaa")
	p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	r := Build(Snapshot{Release: "app", Namespace: "ns", Pods: []corev1.Pod{p}})
	assert.True(t, r.Pods[0].Started)
	assert.Equal(t, OK, r.Code)
	var out bytes.Buffer
	assert.NoError(t, r.Write(&out))
	assert.Contains(t, out.String(), "verdict: no pod waits (exit 0)")
}

func TestAContractNotRunYetIsShownPendingWithItsJob(t *testing.T) {
	store := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-premigrate-migration-records"}, Data: map[string]string{"aaaaaaaaaa": entry("")}}
	r := Build(Snapshot{Release: "app", Namespace: "ns", Sets: []Set{{Fullname: "app-premigrate", Store: store}},
		Jobs: []batchv1.Job{job("app-contract-1", "aaaaaaaaaa", "contract", "")}})
	var out bytes.Buffer
	assert.NoError(t, r.Write(&out))
	assert.Contains(t, out.String(), "pending: Job app-contract-1 running")
}
