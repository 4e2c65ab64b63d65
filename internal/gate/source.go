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
// from the list's resourceVersion; when the watch ends or fails it backs off
// and lists again. Every change is published as a whole snapshot.
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
	for {
		err := s.listAndWatch(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.fail(ctx, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.backoff.next()):
		}
	}
}

// listAndWatch returns nil when the watch closed normally.
func (s *source[T]) listAndWatch(ctx context.Context) error {
	items, rv, err := s.list(ctx, s.opts)
	if apierrors.IsNotFound(err) {
		s.publish(ctx, map[string]T{})
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", s.what, err)
	}
	state := make(map[string]T, len(items))
	for _, it := range items {
		if s.match(it) {
			state[it.GetName()] = it
		}
	}
	s.publish(ctx, maps.Clone(state))

	opts := s.opts
	opts.ResourceVersion = rv
	opts.AllowWatchBookmarks = true
	// Ask the server to end the watch after a while, so a connection that
	// silently died is noticed and replaced.
	timeout := int64(240 + rand.IntN(120))
	opts.TimeoutSeconds = &timeout
	w, err := s.watch(ctx, opts)
	if err != nil {
		return fmt.Errorf("watch %s: %w", s.what, err)
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
			return nil
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return nil
		}
		switch ev.Type {
		case watch.Bookmark:
			continue
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return nil // the resourceVersion is too old: an ordinary end of a watch, list again
			}
			return fmt.Errorf("watch %s: %w", s.what, err)
		}
		obj, isT := ev.Object.(T)
		if !isT {
			return fmt.Errorf("watch %s: unexpected %T in a %s event", s.what, ev.Object, ev.Type)
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
