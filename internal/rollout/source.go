package rollout

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeploymentGetter, ReplicaSetLister and PodLister are the parts of client-go's typed clients (one namespace)
// that Deployment reads with: RBAC grants get on the one Deployment, and list on ReplicaSets and pods.
type DeploymentGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*appsv1.Deployment, error)
}

type ReplicaSetLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*appsv1.ReplicaSetList, error)
}

type PodLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
}

// Deployment is the Source of one Deployment: the Deployment, then the ReplicaSets and pods its selector
// matches.
type Deployment struct {
	Name        string
	Deployments DeploymentGetter
	ReplicaSets ReplicaSetLister
	Pods        PodLister
}

// Observe reads the Deployment, its ReplicaSets and its pods. A Deployment that does not exist is an
// observation without one (Evaluate: Left), not an error.
func (s Deployment) Observe(ctx context.Context) (Observation, error) {
	d, err := s.Deployments.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Observation{}, nil
	}
	if err != nil {
		return Observation{}, fmt.Errorf("get Deployment %s: %w", s.Name, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return Observation{}, fmt.Errorf("the selector of Deployment %s: %w", s.Name, err)
	}
	opts := metav1.ListOptions{LabelSelector: sel.String()}
	rs, err := s.ReplicaSets.List(ctx, opts)
	if err != nil {
		return Observation{}, fmt.Errorf("list the ReplicaSets of Deployment %s: %w", s.Name, err)
	}
	pods, err := s.Pods.List(ctx, opts)
	if err != nil {
		return Observation{}, fmt.Errorf("list the pods of Deployment %s: %w", s.Name, err)
	}
	return Observation{Deployment: d, ReplicaSets: rs.Items, Pods: pods.Items}, nil
}
