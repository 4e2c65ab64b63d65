package framework

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"
)

// NewNamespace creates a namespace for one scenario, with the given labels, and deletes it when the test
// ends (unless KEEP_CLUSTER=1, so a failure can be looked at).
func (e *Env) NewNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s-*: %v", prefix, err)
	}
	t.Cleanup(func() {
		if labels["pod-security.kubernetes.io/enforce"] == "restricted" {
			e.AssertNoPodSecurityRejections(t, ns.Name)
		}
		if t.Failed() {
			e.DumpNamespace(t, ns.Name)
			// a failure the run expects (a mutant's scenario) says KEEP_FAILED_NAMESPACES=0: kept, the namespaces
			// of one mutant after another pile up on the cluster and slow every later scenario
			if os.Getenv("KEEP_CLUSTER") == "1" && os.Getenv("KEEP_FAILED_NAMESPACES") != "0" {
				t.Logf("KEEP_CLUSTER=1: namespace %s kept", ns.Name)
				return
			}
		}
		err := e.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// DumpNamespace logs what a failed scenario left behind.
func (e *Env) DumpNamespace(t *testing.T, ns string) {
	out, _ := e.Run.Run(t, e.Kubectl, "get", "all,events", "-n", ns, "-o", "wide")
	t.Logf("namespace %s at failure:\n%s", ns, out)
}

// AssertNoPodSecurityRejections fails the test when the restricted namespace refused any pod.
func (e *Env) AssertNoPodSecurityRejections(t *testing.T, ns string) {
	t.Helper()
	evs, err := e.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
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

// RestrictedPod is spec under the restricted Pod Security Standard, with images never pulled.
func RestrictedPod(spec corev1.PodSpec) corev1.PodSpec {
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for i := range spec.Containers {
		spec.Containers[i].ImagePullPolicy = corev1.PullNever
		spec.Containers[i].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
	return spec
}

// Restricted are the labels of a namespace that enforces the restricted Pod Security Standard.
func Restricted() map[string]string {
	return map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
}
