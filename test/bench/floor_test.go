//go:build e2e

package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/test/framework"
)

// The floor of a migration before a rollout: what Kubernetes itself costs to run a Job that does nothing, on
// the same node, in the same run as the upgrades it is subtracted from.

// bareJob creates a Job of the demo image whose command exits 0 at once (`demo --help`), in the same
// restricted pod shape as the migration, and returns the seconds from its creation to its Complete condition
// on the harness's clock (a watch), and the same span by the API server's timestamps (whole seconds).
func bareJob(t *testing.T, ns string, n int) (harness, apiServer float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("bare-%d", n)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: framework.RestrictedPod(corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "migrate", Image: "ghcr.io/premigrate/demo:v1", Args: []string{"--help"}}},
			})},
		},
	}
	job.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](65532)
	w, err := env.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatalf("watching Job %s: %v", name, err)
	}
	defer w.Stop()
	start := time.Now()
	if _, err := env.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Job %s: %v", name, err)
	}
	defer func() {
		_ = env.Client.BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of Job %s ended", name)
			}
			j, isJob := ev.Object.(*batchv1.Job)
			if !isJob {
				continue
			}
			for _, c := range j.Status.Conditions {
				if c.Status != corev1.ConditionTrue {
					continue
				}
				switch c.Type {
				case batchv1.JobComplete:
					return time.Since(start).Seconds(), c.LastTransitionTime.Sub(j.CreationTimestamp.Time).Seconds()
				case batchv1.JobFailed:
					t.Fatalf("the bare Job %s failed: %s", name, c.Message)
				}
			}
		case <-ctx.Done():
			t.Fatalf("the bare Job %s did not complete in 2 minutes", name)
		}
	}
}
