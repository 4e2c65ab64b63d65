package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/internal/rollout"
)

const olderIdentity = "0000000001"

// rolledOut is the Deployment "shop-app" whose rollout to templateIdentity ended: two replicas available, its
// ReplicaSet "new" with them, the ReplicaSet "old" of olderIdentity at 0.
func rolledOut(templateIdentity string) []runtime.Object {
	labels := map[string]string{"app": "shop"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-app", Namespace: "shop", UID: "d", Generation: 2},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{rollout.IdentityAnnotation: templateIdentity}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2},
	}
	rs := func(name, id string, n int32) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: k8stypes.UID("rs-" + name), Labels: labels, OwnerReferences: []metav1.OwnerReference{{UID: "d"}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(n),
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{rollout.IdentityAnnotation: id}}}},
			Status: appsv1.ReplicaSetStatus{Replicas: n},
		}
	}
	return []runtime.Object{d, rs("old", olderIdentity, 0), rs("new", templateIdentity, 2)}
}

// oldPodTerminating is a pod of the old ReplicaSet in its grace period.
func oldPodTerminating() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "old-a", Namespace: "shop", Labels: map[string]string{"app": "shop"},
			Annotations:       map[string]string{rollout.IdentityAnnotation: olderIdentity},
			OwnerReferences:   []metav1.OwnerReference{{UID: "rs-old"}},
			DeletionTimestamp: &metav1.Time{Time: time.Now()}, DeletionGracePeriodSeconds: ptr.To[int64](120)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// records is the records ConfigMap with identity's migration recorded (contracted when contractedAt is set).
func records(t *testing.T, contractedAt time.Time) *corev1.ConfigMap {
	t.Helper()
	v, err := record.Entry{CompletedAt: time.Now().Add(-time.Minute), Job: "shop-app-migrate-" + identity}.Encode()
	require.NoError(t, err)
	if !contractedAt.IsZero() {
		v = v[:len(v)-1] + `,"contractedAt":"` + contractedAt.UTC().Format(time.RFC3339) + `","contractJob":"earlier"}`
	}
	cm := recordsConfigMap()
	cm.Data = map[string]string{identity: v}
	return cm
}

func contractArgs(script string) []string {
	return []string{"contract", "--identity", identity, "--records", "shop-app-migrations", "--job", "shop-app-contract-" + identity,
		"--deployment", "shop-app", "--interval", "10ms", "--rollout-timeout", "300ms", "--", "/bin/sh", "-c", script}
}

func TestContractRunsTheCommandOnlyOnceTheRolloutLeftNothingOlderAndRecordsIt(t *testing.T) {
	cases := []struct {
		name         string
		objects      func(t *testing.T) []runtime.Object
		script       string
		wantCode     int
		wantRan      bool
		wantRecorded bool
		wantStarted  bool // the contract's start recorded: the older identities' pods refused from then on
		wantLog      string
		wantEvent    string // the reason of the one Event on the Deployment, if any
	}{
		{name: "a rollout that ended runs the contract and records it",
			objects: func(t *testing.T) []runtime.Object { return append(rolledOut(identity), records(t, time.Time{})) },
			script:  "echo dropped column source", wantRan: true, wantRecorded: true, wantStarted: true, wantLog: "contract command", wantEvent: "Normal ContractCompleted"},
		{name: "an old pod terminating holds it until the timeout",
			objects: func(t *testing.T) []runtime.Object {
				return append(rolledOut(identity), records(t, time.Time{}), oldPodTerminating())
			},
			script: "echo dropped column source", wantCode: exitcode.Timeout, wantLog: "old-a of identity 0000000001 terminating"},
		{name: "a Deployment rolled back to another identity never runs it and exits 0",
			objects: func(t *testing.T) []runtime.Object { return append(rolledOut(olderIdentity), records(t, time.Time{})) },
			script:  "echo dropped column source", wantLog: "now runs identity 0000000001"},
		{name: "a contract that starts before its migration is recorded waits for the rollout, not refused",
			objects: func(t *testing.T) []runtime.Object {
				return append(rolledOut(identity), recordsConfigMap(), oldPodTerminating())
			},
			script: "echo dropped column source", wantCode: exitcode.Timeout, wantLog: "old-a of identity 0000000001 terminating"},
		{name: "an identity whose migration is not recorded once its rollout ended is refused",
			objects: func(t *testing.T) []runtime.Object { return append(rolledOut(identity), recordsConfigMap()) },
			script:  "echo dropped column source", wantCode: exitcode.Refused, wantLog: "its migration is not recorded"},
		{name: "a contract that already ran never runs again",
			objects: func(t *testing.T) []runtime.Object {
				return append(rolledOut(identity), records(t, time.Now().Add(-time.Second)))
			},
			script: "echo dropped column source", wantRecorded: true, wantStarted: true, wantLog: "already ran"},
		{name: "a contract command that fails records no success, keeps its start and its exit code",
			objects: func(t *testing.T) []runtime.Object { return append(rolledOut(identity), records(t, time.Time{})) },
			script:  "echo dropped column source; exit 4", wantCode: 4, wantRan: true, wantStarted: true, wantLog: "nothing recorded", wantEvent: "Warning ContractFailed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(tc.objects(t)...)
			got := h.run(contractArgs(tc.script)...)
			out := h.stdout.String() + h.stderr.String()
			require.Equal(t, tc.wantCode, got, out)
			assert.Equal(t, tc.wantRan, strings.Contains(h.stdout.String(), "dropped column source"), "the command ran:\n%s", out)
			assert.Contains(t, out, logged(tc.wantLog))
			cm, err := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migrations", metav1.GetOptions{})
			require.NoError(t, err)
			_, recorded := record.ContractOf(cm.Data[identity])
			assert.Equal(t, tc.wantRecorded, recorded, "contract recorded: %v", cm.Data)
			_, started := record.ContractBegan(cm.Data[identity])
			assert.Equal(t, tc.wantStarted, started, "contract's start recorded: %v", cm.Data)
			events, err := h.cs.CoreV1().Events("shop").List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			var posted []string
			for _, ev := range events.Items {
				assert.Equal(t, "Deployment/shop-app", ev.InvolvedObject.Kind+"/"+ev.InvolvedObject.Name)
				assert.Contains(t, ev.Message, identity, "the Event names the identity")
				posted = append(posted, ev.Type+" "+ev.Reason)
			}
			if tc.wantEvent == "" {
				assert.Empty(t, posted, "Events on the Deployment")
			} else {
				assert.Equal(t, []string{tc.wantEvent}, posted, "Events on the Deployment")
			}
		})
	}
}

func TestContractNeedsACommandAndADeployment(t *testing.T) {
	for name, args := range map[string][]string{
		"no command":    {"contract", "--identity", identity, "--records", "r", "--job", "j", "--deployment", "d"},
		"no Deployment": {"contract", "--identity", identity, "--records", "r", "--job", "j", "--", "true"},
		"negative soak": {"contract", "--identity", identity, "--records", "r", "--job", "j", "--deployment", "d", "--soak", "-1s", "--", "true"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, exitcode.Usage, newHarness().run(args...))
		})
	}
}
