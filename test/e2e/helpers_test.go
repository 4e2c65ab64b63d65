//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NewNamespace creates a namespace for one scenario, with the given labels, and deletes it when the test
// ends (unless KEEP_CLUSTER=1, so a failure can be looked at).
func NewNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := env.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s-*: %v", prefix, err)
	}
	t.Cleanup(func() {
		if labels["pod-security.kubernetes.io/enforce"] == "restricted" {
			AssertNoPodSecurityRejections(t, ns.Name)
		}
		if t.Failed() {
			DumpNamespace(t, ns.Name)
			if os.Getenv("KEEP_CLUSTER") == "1" {
				t.Logf("KEEP_CLUSTER=1: namespace %s kept", ns.Name)
				return
			}
		}
		err := env.client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// DumpNamespace logs what a failed scenario left behind.
func DumpNamespace(t *testing.T, ns string) {
	out, _ := env.run.Run(t, env.kubectl, "get", "all,events", "-n", ns, "-o", "wide")
	t.Logf("namespace %s at failure:\n%s", ns, out)
}

// WaitUntil polls cond until it returns true, an error, or timeout passes. Between two polls it waits
// pollInterval of what the last poll took: a client-go read polls every 500 ms, a `kubectl exec psql` about
// every 2 s, so that no condition spends the machine's cores on being asked (development.md).
func WaitUntil(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		start := time.Now()
		done, err := cond(ctx)
		if err == nil && done {
			return
		}
		if err == nil {
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(PollInterval(time.Since(start))):
				continue
			}
		}
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// PollInterval is the wait after a poll that took took: four times as long, within [500 ms, 5 s].
func PollInterval(took time.Duration) time.Duration {
	return min(max(4*took, 500*time.Millisecond), 5*time.Second)
}

// AssertNoPodSecurityRejections fails the test when the restricted namespace refused any pod.
func AssertNoPodSecurityRejections(t *testing.T, ns string) {
	t.Helper()
	evs, err := env.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing events of %s: %v", ns, err)
		return
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, "violates PodSecurity") {
			t.Errorf("the restricted namespace refused a pod of %s/%s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
}
