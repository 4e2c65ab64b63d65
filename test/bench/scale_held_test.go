//go:build e2e

package bench

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The waiter pods of kind scheduling-gate (TestBenchmarkWaiterPodsAtScale): held by premigrate's scheduling
// gate, nothing in them runs; one `gate ungate` process, started once per namespace, releases them all.

// heldPod is a waiter of kind scheduling-gate: premigrate's scheduling gate and the annotations gate ungate
// reads, no init container.
func heldPod(name, id, job string) *corev1.Pod {
	p := benchPod(name, id, corev1.Container{})
	p.Spec.InitContainers = nil
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "premigrate.io/migration"}}
	p.Labels["premigrate.io/gated-by"] = "bench-ungate"
	p.Annotations = map[string]string{"premigrate.io/identity": job, "premigrate.io/migration-job": job}
	return p
}

// schedulingGated is true for a pod the scheduler leaves alone because of its scheduling gates.
func schedulingGated(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonSchedulingGated {
			return true
		}
	}
	return false
}

// startedContainers counts the containers of the pods labelled bench=id that the kubelet reports started.
func startedContainers(t *testing.T, ns, id string) int {
	t.Helper()
	pods, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "bench=" + id})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if cs.State.Running != nil || cs.State.Terminated != nil || cs.RestartCount > 0 {
				n++
			}
		}
	}
	return n
}

// startUngate runs `gate ungate` in ns as the pod bench-ungate-0, with a ServiceAccount that may read the Jobs
// and the records, list, watch and patch pods and post Events, and waits until it runs.
func startUngate(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bench-ungate"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bench-ungate"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"bench-migrations"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}}
	if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-ungate"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "bench-ungate"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bench-ungate", Namespace: ns}}}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := benchPod("bench-ungate-0", "bench-ungate", corev1.Container{})
	p.Spec.InitContainers = nil
	p.Spec.ServiceAccountName = "bench-ungate"
	c := &p.Spec.Containers[0]
	c.Name, c.Image, c.ImagePullPolicy = "gate", "ghcr.io/premigrate/gate:"+env.AppVersion, corev1.PullNever
	c.Args = []string{"ungate", "--selector", "premigrate.io/gated-by=bench-ungate", "--records", "bench-migrations", "--progress-interval", "1h"}
	c.Env = []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitUntil(t, "gate ungate to run", 2*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := env.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		return err == nil && len(got.Status.ContainerStatuses) > 0 && got.Status.ContainerStatuses[0].State.Running != nil, err
	})
}
