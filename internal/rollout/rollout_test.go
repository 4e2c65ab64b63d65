package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const (
	newID = "2222222222"
	oldID = "1111111111"
)

// deployment is a Deployment of 2 replicas on newID whose rollout ended.
func deployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "d", Generation: 3},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{IdentityAnnotation: newID}}},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2, TerminatingReplicas: ptr.To[int32](0)},
	}
}

func replicaSet(name, identity string, replicas int32) appsv1.ReplicaSet {
	return appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), OwnerReferences: []metav1.OwnerReference{{UID: "d"}}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{IdentityAnnotation: identity}}},
		},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas},
	}
}

func pod(name, rs, identity string) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{UID: types.UID(rs)}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if identity != "" {
		p.Annotations = map[string]string{IdentityAnnotation: identity}
	}
	return p
}

func terminating(p corev1.Pod) corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)}
	p.DeletionGracePeriodSeconds = ptr.To[int64](120)
	return p
}

// ended is an observation of a rollout to newID that ended: the new ReplicaSet's two pods, the old one at 0.
func ended() Observation {
	return Observation{
		Deployment:  deployment(),
		ReplicaSets: []appsv1.ReplicaSet{replicaSet("old", oldID, 0), replicaSet("new", newID, 2)},
		Pods:        []corev1.Pod{pod("new-a", "new", newID), pod("new-b", "new", newID)},
	}
}

func TestEvaluateSaysWhereTheRolloutStands(t *testing.T) {
	tests := []struct {
		name   string
		change func(o *Observation)
		want   State
		reason string
	}{
		{name: "a rollout that ended with nothing old left is done", change: func(*Observation) {}, want: Done, reason: "all 2 replicas of 2222222222 available"},
		{name: "a Deployment gone has left", change: func(o *Observation) { o.Deployment = nil }, want: Left, reason: "the Deployment is gone"},
		{name: "a Deployment being deleted has left", change: func(o *Observation) { o.Deployment.DeletionTimestamp = &metav1.Time{} }, want: Left, reason: "being deleted"},
		{name: "a Deployment rolled back to the older identity has left", change: func(o *Observation) {
			o.Deployment.Spec.Template.Annotations[IdentityAnnotation] = oldID
		}, want: Left, reason: "now runs identity 1111111111, not 2222222222"},
		{name: "a Deployment whose template lost the identity has left", change: func(o *Observation) {
			o.Deployment.Spec.Template.Annotations = nil
		}, want: Left, reason: "now runs no identity"},
		{name: "a generation the controller has not observed is pending", change: func(o *Observation) { o.Deployment.Status.ObservedGeneration = 2 }, want: Pending, reason: "generation 3 is not observed yet"},
		{name: "replicas not all updated are pending", change: func(o *Observation) { o.Deployment.Status.UpdatedReplicas = 1 }, want: Pending, reason: "1 of 2 replicas of 2222222222 updated"},
		{name: "replicas of an older template still counted are pending", change: func(o *Observation) { o.Deployment.Status.Replicas = 3 }, want: Pending, reason: "1 replicas of an older pod template"},
		{name: "new replicas not available are pending", change: func(o *Observation) { o.Deployment.Status.AvailableReplicas = 1 }, want: Pending, reason: "1 of 2 replicas of 2222222222 available"},
		{name: "terminating replicas the Deployment counts are pending", change: func(o *Observation) { o.Deployment.Status.TerminatingReplicas = ptr.To[int32](1) }, want: Pending, reason: "status.terminatingReplicas"},
		{name: "an old ReplicaSet with replicas is pending", change: func(o *Observation) { o.ReplicaSets[0] = replicaSet("old", oldID, 1) }, want: Pending, reason: "ReplicaSet old of identity 1111111111 has 1 replicas"},
		{name: "an old ReplicaSet scaled to 0 whose pods the status still counts is pending", change: func(o *Observation) { o.ReplicaSets[0].Status.Replicas = 1 }, want: Pending, reason: "ReplicaSet old"},
		{name: "an old pod still running is pending", change: func(o *Observation) { o.Pods = append(o.Pods, pod("old-a", "old", oldID)) }, want: Pending, reason: "old-a of identity 1111111111 running"},
		{name: "an old pod terminating through its grace period is pending", change: func(o *Observation) {
			o.Pods = append(o.Pods, terminating(pod("old-a", "old", oldID)))
		}, want: Pending, reason: "old-a of identity 1111111111 terminating since 20:00:00 (grace 120s)"},
		{name: "a pod from before premigrate is pending", change: func(o *Observation) {
			o.ReplicaSets = append(o.ReplicaSets, replicaSet("before", "", 0))
			o.Pods = append(o.Pods, terminating(pod("before-a", "before", "")))
		}, want: Pending, reason: "before-a of no identity"},
		{name: "an old pod that finished does not count", change: func(o *Observation) {
			p := pod("old-a", "old", oldID)
			p.Status.Phase = corev1.PodSucceeded
			o.Pods = append(o.Pods, p)
		}, want: Done},
		{name: "a pod another workload owns does not count", change: func(o *Observation) { o.Pods = append(o.Pods, pod("other-a", "other", oldID)) }, want: Done},
		{name: "a ReplicaSet another Deployment owns does not count", change: func(o *Observation) {
			rs := replicaSet("other", oldID, 2)
			rs.OwnerReferences = []metav1.OwnerReference{{UID: "another"}}
			o.ReplicaSets = append(o.ReplicaSets, rs)
		}, want: Done},
		{name: "a cluster without status.terminatingReplicas relies on the pods", change: func(o *Observation) { o.Deployment.Status.TerminatingReplicas = nil }, want: Done},
		{name: "a Deployment without replicas set counts one", change: func(o *Observation) {
			o.Deployment.Spec.Replicas = nil
			o.Deployment.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}
		}, want: Done, reason: "all 1 replicas"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ended()
			tc.change(&o)
			v := Evaluate(o, newID)
			assert.Equal(t, tc.want, v.State, v.Reason)
			assert.Contains(t, v.Reason, tc.reason)
		})
	}
}
