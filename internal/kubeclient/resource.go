package kubeclient

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Object is a Kubernetes object with metadata.
type Object interface {
	runtime.Object
	metav1.Object
}

// Resource is a typed client for one namespaced resource. Its methods have
// the signatures of client-go's typed clients, so code written against
// narrow interfaces of those works with either.
type Resource[T Object, L runtime.Object] struct {
	client    rest.Interface
	params    runtime.ParameterCodec
	namespace string
	resource  string
	newObject func() T
	newList   func() L
}

func timeoutOf(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// Get reads the object called name.
func (r *Resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObject()
	err := r.client.Get().
		Namespace(r.namespace).Resource(r.resource).Name(name).
		VersionedParams(&opts, r.params).
		Do(ctx).Into(out)
	return out, err
}

// List reads the objects that opts select.
func (r *Resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.client.Get().
		Namespace(r.namespace).Resource(r.resource).
		VersionedParams(&opts, r.params).
		Timeout(timeoutOf(opts)).
		Do(ctx).Into(out)
	return out, err
}

// Watch streams the changes to the objects that opts select.
func (r *Resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.client.Get().
		Namespace(r.namespace).Resource(r.resource).
		VersionedParams(&opts, r.params).
		Timeout(timeoutOf(opts)).
		Watch(ctx)
}

// Update replaces obj; the API server rejects it with a conflict when obj's
// resourceVersion is not the current one.
func (r *Resource[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newObject()
	err := r.client.Put().
		Namespace(r.namespace).Resource(r.resource).Name(obj.GetName()).
		VersionedParams(&opts, r.params).
		Body(obj).
		Do(ctx).Into(out)
	return out, err
}

// Create creates obj.
func (r *Resource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObject()
	err := r.client.Post().
		Namespace(r.namespace).Resource(r.resource).
		VersionedParams(&opts, r.params).
		Body(obj).
		Do(ctx).Into(out)
	return out, err
}

// Patch applies a patch of type pt to the object called name.
func (r *Resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.newObject()
	err := r.client.Patch(pt).
		Namespace(r.namespace).Resource(r.resource).Name(name).SubResource(subresources...).
		VersionedParams(&opts, r.params).
		Body(data).
		Do(ctx).Into(out)
	return out, err
}
