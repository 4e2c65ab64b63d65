package dbid

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/cli"
)

// PodGetter and ClaimGetter read the object that holds the database's data (one namespace).
type PodGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
}

type ClaimGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.PersistentVolumeClaim, error)
}

// FromAPI is a Getter that reads the database's pod or claim from the API server.
func FromAPI(pods PodGetter, claims ClaimGetter) Getter {
	return func(ctx context.Context, kind, name string) (Object, error) {
		var (
			m   metav1.Object
			err error
		)
		switch kind {
		case KindPod:
			m, err = pods.Get(ctx, name, metav1.GetOptions{})
		default:
			m, err = claims.Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return Object{}, err
		}
		return Object{UID: string(m.GetUID()), Created: m.GetCreationTimestamp().Time}, nil
	}
}

// ResolveWithin names the database, retrying up to timeout while its object does not exist yet (a first
// install creates the database beside the migration and the app) or the API server fails.
func ResolveWithin(ctx context.Context, spec Spec, get Getter, timeout time.Duration, log *slog.Logger) (ID, error) {
	if spec.Empty() {
		return ID{}, nil
	}
	logf := cli.Logf(log)
	deadline := time.Now().Add(timeout)
	for delay := 500 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		id, err := Resolve(ctx, spec, get)
		if err == nil {
			if id.Note != "" {
				logf("note: %s", id.Note)
			}
			return id, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return ID{}, fmt.Errorf("naming the database the records are bound to (waited %s): %w", timeout, err)
		}
		hint := ""
		if apierrors.IsForbidden(err) {
			hint = " (the ServiceAccount's Role must allow get on it)"
		}
		logf("naming the database (retrying in %s): %v%s", delay, err, hint)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}
