package gate

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

type object interface {
	runtime.Object
	metav1.Object
}

// source keeps the set of objects matching opts current: list, then watch
// from the list's resourceVersion. When the watch ends as watches do (the
// server's timeout, an expired resourceVersion) it lists again at once, without
// a log line; when a request fails it reports the error and backs off first.
// Every change is published as a whole snapshot.
type source[T object] struct {
	what  string
	list  func(ctx context.Context, opts metav1.ListOptions) (items []T, resourceVersion string, err error)
	watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	opts  metav1.ListOptions
	// match filters on the client side too: a fake or a proxy may not
	// apply the selectors to watch events.
	match   func(T) bool
	publish func(ctx context.Context, items map[string]T)
	fail    func(ctx context.Context, err error)
	backoff backoff
}

// newJobSource follows the one Job called name. RBAC may grant it by name
// only, so list and watch select it with a metadata.name field selector; a
// Job of that name that carries another identity (a hook Job of an earlier
// revision) is not part of the set.
func newJobSource(jobs JobClient, name, identity string,
	publish func(context.Context, map[string]*batchv1.Job), fail func(context.Context, error),
) *source[*batchv1.Job] {
	return &source[*batchv1.Job]{
		what: "Job " + name,
		list: func(ctx context.Context, opts metav1.ListOptions) ([]*batchv1.Job, string, error) {
			l, err := jobs.List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			out := make([]*batchv1.Job, len(l.Items))
			for i := range l.Items {
				out[i] = &l.Items[i]
			}
			return out, l.ResourceVersion, nil
		},
		watch:   jobs.Watch,
		opts:    metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()},
		match:   func(j *batchv1.Job) bool { return j.Name == name && j.Labels[IdentityLabel] == identity },
		publish: publish,
		fail:    fail,
	}
}

func newConfigMapSource(configMaps ConfigMapClient, name string,
	publish func(context.Context, map[string]*corev1.ConfigMap), fail func(context.Context, error),
) *source[*corev1.ConfigMap] {
	return &source[*corev1.ConfigMap]{
		what: "ConfigMap " + name,
		list: func(ctx context.Context, opts metav1.ListOptions) ([]*corev1.ConfigMap, string, error) {
			l, err := configMaps.List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			out := make([]*corev1.ConfigMap, len(l.Items))
			for i := range l.Items {
				out[i] = &l.Items[i]
			}
			return out, l.ResourceVersion, nil
		},
		watch: configMaps.Watch,
		// RBAC grants the ConfigMap by name only: list and watch must
		// select it by name.
		opts:    metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()},
		match:   func(cm *corev1.ConfigMap) bool { return cm.Name == name },
		publish: publish,
		fail:    fail,
	}
}

func (s *source[T]) run(ctx context.Context) {
	var lastEnd time.Time
	for {
		watched, err := s.listAndWatch(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.fail(ctx, err)
		}
		// A watch that ended as watches do is followed by a new list at once. Two such ends within a second
		// (a proxy that closes every watch) back off like an error, quietly, so a fast loop never forms.
		if err == nil && watched {
			quick := time.Since(lastEnd) < time.Second
			lastEnd = time.Now()
			if !quick {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.backoff.next()):
		}
	}
}

// listAndWatch lists, publishes and watches until the watch ends. watched is true when a watch ran and ended
// as watches do (the server closed it, or its resourceVersion expired): the caller lists again at once. A
// NotFound list (nothing to watch yet) returns false and no error: the caller lists again after a backoff.
func (s *source[T]) listAndWatch(ctx context.Context) (watched bool, err error) {
	items, rv, err := s.list(ctx, s.opts)
	if apierrors.IsNotFound(err) {
		s.publish(ctx, map[string]T{})
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("list %s: %w", s.what, err)
	}
	state := make(map[string]T, len(items))
	for _, it := range items {
		if s.match(it) {
			state[it.GetName()] = it
		}
	}
	s.publish(ctx, maps.Clone(state))

	// No bookmarks: a watch that ends is followed by a new list, never resumed from a resourceVersion.
	opts := s.opts
	opts.ResourceVersion = rv
	// Ask the server to end the watch after a while, so a connection that
	// silently died is noticed and replaced.
	timeout := int64(240 + rand.IntN(120))
	opts.TimeoutSeconds = &timeout
	w, err := s.watch(ctx, opts)
	if err != nil {
		return false, fmt.Errorf("watch %s: %w", s.what, err)
	}
	defer w.Stop()
	started := time.Now()
	defer func() {
		// A watch that lived long means the API server is healthy again.
		if time.Since(started) >= s.backoff.max {
			s.backoff.reset()
		}
	}()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return false, nil
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return true, nil
		}
		switch ev.Type {
		case watch.Bookmark:
			continue
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return true, nil // the resourceVersion is too old: an ordinary end of a watch, list again
			}
			return false, fmt.Errorf("watch %s: %w", s.what, err)
		}
		obj, isT := ev.Object.(T)
		if !isT {
			return false, fmt.Errorf("watch %s: unexpected %T in a %s event", s.what, ev.Object, ev.Type)
		}
		if ev.Type == watch.Deleted || !s.match(obj) {
			delete(state, obj.GetName())
		} else {
			state[obj.GetName()] = obj
		}
		s.publish(ctx, maps.Clone(state))
	}
}

// backoff doubles a delay from min up to max, with a little jitter.
type backoff struct {
	min, max time.Duration
	cur      time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur < b.min {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur + time.Duration(rand.Int64N(int64(b.cur)/5+1))
}

func (b *backoff) reset() { b.cur = 0 }
