//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/test/framework"
)

func TestOurImagesRunAsAJobToCompletionAndADeploymentToReady(t *testing.T) {
	share(t, weightOne, 10*time.Second)
	ns := env.NewNamespace(t, "smoke", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	ctx := context.Background()
	start := time.Now()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "gate-version"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: framework.RestrictedPod(corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "gate", Image: "ghcr.io/premigrate/gate:" + env.AppVersion, Args: []string{"version"}}},
			})},
		},
	}
	if _, err := env.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Job: %v", err)
	}
	framework.WaitUntil(t, "Job gate-version to complete", 2*time.Minute, func(ctx context.Context) (bool, error) {
		j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, "gate-version", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return j.Status.Succeeded == 1, nil
	})
	logs := env.Run.Must(t, env.Kubectl, "logs", "-n", ns, "job/gate-version")
	if !strings.Contains(logs, env.AppVersion) {
		t.Errorf("gate version printed %q, want it to name %s", logs, env.AppVersion)
	}
	t.Logf("Job complete after %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	labels := map[string]string{"app": "postgres"}
	spec := framework.RestrictedPod(corev1.PodSpec{Containers: []corev1.Container{{
		Name:  "postgres",
		Image: "ghcr.io/premigrate/postgres:15",
		Env: []corev1.EnvVar{
			{Name: "POSTGRES_PASSWORD", Value: "smoke"},
			{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"pg_isready", "-h", "127.0.0.1", "-U", "postgres"}}},
			PeriodSeconds: 2,
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "data", MountPath: "/var/lib/postgresql/data"},
			{Name: "run", MountPath: "/var/run/postgresql"},
			{Name: "tmp", MountPath: "/tmp"},
		},
	}}})
	spec.SecurityContext.RunAsUser = ptr.To[int64](999)
	spec.SecurityContext.FSGroup = ptr.To[int64](999)
	for _, v := range []string{"data", "run", "tmp"} {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "postgres"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Deployment: %v", err)
	}
	framework.WaitUntil(t, "Deployment postgres to be Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "postgres", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ReadyReplicas == 1, nil
	})
	t.Logf("Deployment Ready after %s", time.Since(start).Round(time.Millisecond))
}
