package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestTwoMigrationsStartedAtOnceAreSerializedByTheLock(t *testing.T) {
	share(t, weightOne, 40*time.Second)
	res := scenario(t, "concurrent-migrations", env.helm3)
	ctx := context.Background()
	ns := newNamespace(t, "lock", restricted)
	r := newRelease(t, ns, "app", env.helm3)
	r.mustDeploy(baseValues())
	dep, err := env.client.AppsV1().Deployments(ns).Get(ctx, r.fullname(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the app Deployment: %v", err)
	}
	app := dep.Spec.Template.Spec.Containers[0]
	// the app's env without its PREMIGRATE_IDENTITY (from the pod annotation): each racer names its own
	var appEnv []corev1.EnvVar
	for _, e := range app.Env {
		if e.Name != "PREMIGRATE_IDENTITY" {
			appEnv = append(appEnv, e)
		}
	}
	for i := 1; i <= 2; i++ {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("racer-%d", i)},
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{Spec: restrictedPod(corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "migrate", Image: "premigrate/demo:v5", Args: []string{"migrate"},
						// each version sleeps 4 s inside its transaction: whichever run takes the lock first holds it
						// for about 16 s, so the two runs overlap and the second must wait
						Env: append(append([]corev1.EnvVar{}, appEnv...),
							corev1.EnvVar{Name: "PREMIGRATE_IDENTITY", Value: fmt.Sprintf("racer-%d", i)},
							corev1.EnvVar{Name: "DEMO_MIGRATION_DELAY", Value: "4s"}),
					}},
				})},
			},
		}
		job.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](65532)
		if _, err := env.client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", job.Name, err)
		}
	}
	start := time.Now()
	waitUntil(t, "both racing migrations to finish", 3*time.Minute, func(ctx context.Context) (bool, error) {
		done := 0
		for i := 1; i <= 2; i++ {
			j, err := env.client.BatchV1().Jobs(ns).Get(ctx, fmt.Sprintf("racer-%d", i), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if j.Status.Failed > 0 {
				return false, fmt.Errorf("%s failed", j.Name)
			}
			done += int(j.Status.Succeeded)
		}
		return done == 2, nil
	})
	res.Numbers["bothDoneSec"] = time.Since(start).Seconds()
	if got := r.psql("select string_agg(version::text, ',' order by version) from schema_migrations"); got != "1,2,3,4,5" {
		t.Errorf("schema_migrations holds versions %q, want each of 1..5 once", got)
	}
	applied := r.psqlInt("select coalesce(sum(cardinality(applied)), 0) from demo_migrate_runs where identity like 'racer-%'")
	if applied != 4 {
		t.Errorf("the two racing runs applied %d versions between them, want 4 (2..5, each once)", applied)
	}
	waited := 0
	for i := 1; i <= 2; i++ {
		log, err := runStdout(env.kubectl, "logs", "-n", ns, fmt.Sprintf("job/racer-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(log, "another migration run holds the lock; waiting for it") {
			waited++
		}
	}
	if waited != 1 {
		t.Errorf("%d of the two racing runs logged that they waited for the lock, want exactly 1: the runs did not overlap", waited)
	}
}
