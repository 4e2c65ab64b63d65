// Package rollout decides, from a Deployment, its ReplicaSets and its pods, whether the rollout to one migration
// identity has ended with nothing of another identity left: no ReplicaSet of another identity with replicas, no
// pod of another identity running or terminating, every replica of the identity available. That is the moment a
// contract step (which drops what older versions still read or write) may run, and only while it holds.
package rollout

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// IdentityAnnotation is the annotation of the pod template (and so of each pod) that names its migration
// identity (the library's premigrate-lib.podAnnotations).
const IdentityAnnotation = "premigrate.io/identity"

// Observation is what Evaluate reads: the Deployment, and the ReplicaSets and pods of its namespace that match
// its selector (Evaluate keeps only those the Deployment owns, and the pods those ReplicaSets own).
type Observation struct {
	Deployment  *appsv1.Deployment
	ReplicaSets []appsv1.ReplicaSet
	Pods        []corev1.Pod
}

// State is where a rollout stands for an identity.
type State int

const (
	// Pending: the rollout to the identity has not ended, or something of another identity still runs.
	Pending State = iota
	// Done: every fact holds.
	Done
	// Left: the Deployment no longer runs the identity (a rollback, a revert, a newer upgrade) or is being
	// deleted; the contract of the identity must not run.
	Left
)

func (s State) String() string {
	switch s {
	case Done:
		return "done"
	case Left:
		return "left"
	default:
		return "pending"
	}
}

// Verdict is Evaluate's answer; Reason says in one line why (what is still missing, or where the Deployment
// went).
type Verdict struct {
	State  State
	Reason string
}

// Evaluate checks the rollout facts of identity on o. The Deployment must carry identity on its pod
// template (else Left), the controller must have observed its generation, every replica must be updated and
// available and none of another template counted, no ReplicaSet of another identity may have replicas, and no
// pod of another identity (or of none: a pod from before premigrate) may run or terminate. A terminating pod
// still serves through its grace period, with its connections to the database.
func Evaluate(o Observation, identity string) Verdict {
	d := o.Deployment
	if d == nil {
		return Verdict{Left, "the Deployment is gone"}
	}
	if d.DeletionTimestamp != nil {
		return Verdict{Left, fmt.Sprintf("the Deployment %s is being deleted", d.Name)}
	}
	if got := d.Spec.Template.Annotations[IdentityAnnotation]; got != identity {
		return Verdict{Left, fmt.Sprintf("the Deployment %s now runs %s, not %s", d.Name, describe(got), identity)}
	}
	if d.Status.ObservedGeneration < d.Generation {
		return Verdict{Pending, fmt.Sprintf("the Deployment %s's generation %d is not observed yet (observed %d)", d.Name, d.Generation, d.Status.ObservedGeneration)}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.UpdatedReplicas < want:
		return Verdict{Pending, fmt.Sprintf("%d of %d replicas of %s updated", st.UpdatedReplicas, want, identity)}
	case st.Replicas > st.UpdatedReplicas:
		return Verdict{Pending, fmt.Sprintf("%d replicas of an older pod template still counted", st.Replicas-st.UpdatedReplicas)}
	case st.AvailableReplicas < want:
		return Verdict{Pending, fmt.Sprintf("%d of %d replicas of %s available", st.AvailableReplicas, want, identity)}
	case st.TerminatingReplicas != nil && *st.TerminatingReplicas > 0:
		return Verdict{Pending, fmt.Sprintf("%d pods of the Deployment terminating (status.terminatingReplicas)", *st.TerminatingReplicas)}
	}
	owned := map[types.UID]string{} // ReplicaSet UID -> its identity
	for _, rs := range o.ReplicaSets {
		if !ownedBy(rs.OwnerReferences, d.UID) {
			continue
		}
		id := rs.Spec.Template.Annotations[IdentityAnnotation]
		owned[rs.UID] = id
		if id == identity {
			continue
		}
		if n := max(replicas(rs.Spec.Replicas), rs.Status.Replicas); n > 0 {
			return Verdict{Pending, fmt.Sprintf("ReplicaSet %s of %s has %d replicas", rs.Name, describe(id), n)}
		}
	}
	var others []string
	for _, p := range o.Pods {
		rsID, mine := ownerIn(p.OwnerReferences, owned)
		if !mine || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		id := p.Annotations[IdentityAnnotation]
		if id == "" {
			id = rsID
		}
		if id == identity {
			continue
		}
		what := "running"
		if p.DeletionTimestamp != nil {
			what = "terminating since " + p.DeletionTimestamp.UTC().Format("15:04:05")
			if g := p.DeletionGracePeriodSeconds; g != nil {
				what += fmt.Sprintf(" (grace %ds)", *g)
			}
		}
		others = append(others, fmt.Sprintf("%s of %s %s", p.Name, describe(id), what))
	}
	if len(others) > 0 {
		slices.Sort(others)
		return Verdict{Pending, fmt.Sprintf("%d pods of another identity: %s", len(others), strings.Join(others, ", "))}
	}
	return Verdict{Done, fmt.Sprintf("all %d replicas of %s available, nothing of another identity left", want, identity)}
}

func describe(identity string) string {
	if identity == "" {
		return "no identity (a pod template without premigrate.io/identity)"
	}
	return "identity " + identity
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == uid })
}

// ownerIn returns the identity of the ReplicaSet of owned that owns the pod, and whether one does.
func ownerIn(refs []metav1.OwnerReference, owned map[types.UID]string) (string, bool) {
	for _, r := range refs {
		if id, ok := owned[r.UID]; ok {
			return id, true
		}
	}
	return "", false
}
