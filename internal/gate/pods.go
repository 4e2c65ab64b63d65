package gate

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
)

// PodClient is the part of client-go's typed Pod client (for one namespace) that FollowPods uses.
type PodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// FollowPods keeps the set of pods that match selector current, as the gate keeps its Job and ConfigMaps: a
// list, then a watch from its resourceVersion, listed again when the watch ends. It calls publish with the
// whole set (by name) after every change and fail with every error (then backs off, from minBackoff to
// maxBackoff), until ctx is cancelled.
func FollowPods(ctx context.Context, pods PodClient, selector labels.Selector, minBackoff, maxBackoff time.Duration,
	publish func(context.Context, map[string]*corev1.Pod), fail func(context.Context, error),
) {
	s := &source[*corev1.Pod]{
		what: "pods " + selector.String(),
		list: func(ctx context.Context, opts metav1.ListOptions) ([]*corev1.Pod, string, error) {
			l, err := pods.List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			out := make([]*corev1.Pod, len(l.Items))
			for i := range l.Items {
				out[i] = &l.Items[i]
			}
			return out, l.ResourceVersion, nil
		},
		watch:   pods.Watch,
		opts:    metav1.ListOptions{LabelSelector: selector.String()},
		match:   func(p *corev1.Pod) bool { return selector.Matches(labels.Set(p.Labels)) },
		publish: publish,
		fail:    fail,
		backoff: backoff{min: minBackoff, max: max(maxBackoff, minBackoff)},
	}
	s.run(ctx)
}
