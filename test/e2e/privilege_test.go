//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	gateRBACScenario          = scenarios.Declare(framework.LeastPrivilege, framework.CI, "gate-rbac")
	recordsUnreadableScenario = scenarios.Declare(framework.LeastPrivilege, framework.CI, "records-unreadable")
)

func TestTheGateServiceAccountMayReadExactlyWhatItNeeds(t *testing.T) {
	share(t, weightOne, 55*time.Second)
	scenario(t, gateRBACScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "rbac", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	r.MustDeploy(framework.BaseValues())
	r.MustDeploy(framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"}}))
	job := "jobs.batch/" + r.Fullname() + "-migrate"
	records := "configmaps/" + r.AnchorName()
	store := "configmaps/" + r.StoreName()
	type check struct {
		verb, resource, subresource string
		want                        string
	}
	canI := func(as string, cases []check) {
		t.Helper()
		for _, c := range cases {
			args := []string{"auth", "can-i", c.verb, c.resource, "-n", ns, "--as", as}
			if c.subresource != "" {
				args = append(args, "--subresource", c.subresource)
			}
			out, _ := env.Run.Stdout(t, env.Kubectl, args...)
			if got := strings.TrimSpace(out); got != c.want {
				t.Errorf("%s may %s %s %s: kubectl auth can-i answered %q, want %q", as, c.verb, c.resource, c.subresource, got, c.want)
			}
		}
	}
	// the app pods' gate: its migration Job and the records ConfigMap, read-only, by name
	claim := "persistentvolumeclaims/data-" + r.Fullname() + "-postgresql-0"
	canI("system:serviceaccount:"+ns+":"+r.Fullname(), []check{
		{"get", job, "", "yes"}, {"list", job, "", "yes"}, {"watch", job, "", "yes"},
		{"get", records, "", "yes"}, {"list", records, "", "yes"}, {"watch", records, "", "yes"},
		{"get", "jobs.batch/other", "", "no"}, {"list", "jobs.batch", "", "no"}, {"watch", "jobs.batch", "", "no"},
		{"create", "jobs.batch", "", "no"}, {"delete", job, "", "no"}, {"update", job, "", "no"}, {"patch", job, "", "no"},
		{"update", records, "", "no"}, {"delete", records, "", "no"}, {"get", "configmaps/other", "", "no"},
		{"list", "configmaps", "", "no"}, {"get", "secrets", "", "no"}, {"list", "pods", "", "no"},
		{"get", "pods", "log", "no"}, {"create", "pods", "", "no"},
		// the embedded database's claim, by name: its UID names the database the records are bound to
		{"get", claim, "", "yes"}, {"list", "persistentvolumeclaims", "", "no"}, {"get", "persistentvolumeclaims/other", "", "no"},
		{"delete", claim, "", "no"}, {"update", claim, "", "no"},
		// the store that keeps the records, read-only, by name
		{"get", store, "", "yes"}, {"watch", store, "", "yes"}, {"update", store, "", "no"}, {"delete", store, "", "no"},
	})
	// the migration's ServiceAccount outlives the hooks either as a hook the records ConfigMap owns or as a
	// release object (the install's, which the upgrades keep): helm uninstall takes it either way
	if sa, err := env.Client.CoreV1().ServiceAccounts(ns).Get(ctx, r.Fullname()+"-migrate", metav1.GetOptions{}); err == nil {
		hook, o := sa.Annotations["helm.sh/hook"], sa.OwnerReferences
		owned := len(o) == 1 && o[0].Name == r.AnchorName()
		release := hook == "" && len(o) == 0 && sa.Annotations["meta.helm.sh/release-name"] == r.Name
		if !owned && !release {
			t.Errorf("the migration's ServiceAccount outlived the hooks as hook %q owned by %v, want a hook the records ConfigMap %s owns or a release object", hook, o, r.AnchorName())
		}
	} else if !apierrors.IsNotFound(err) {
		t.Errorf("reading the migration's ServiceAccount: %v", err)
	}
	// its Role, as the job-mode release renders it: the records ConfigMap by name, create (which RBAC cannot
	// limit to a name), nothing else
	jr := env.NewRelease(t, ns, "jobs", env.Helm3)
	jr.MustDeploy(framework.Merge(framework.BaseValues(), map[string]any{"migration": map[string]any{"mode": "job"},
		"postgresql": map[string]any{"auth": map[string]any{"password": "rbac-test-password"}}}))
	jrecords := "configmaps/" + jr.AnchorName()
	jstore := "configmaps/" + jr.StoreName()
	canI("system:serviceaccount:"+ns+":"+jr.Fullname()+"-migrate", []check{
		{"get", jrecords, "", "yes"}, {"update", jrecords, "", "yes"}, {"create", "configmaps", "", "yes"},
		{"get", jstore, "", "yes"}, {"update", jstore, "", "yes"}, {"delete", jstore, "", "no"},
		{"update", "configmaps/other", "", "no"}, {"get", "configmaps/other", "", "no"}, {"delete", jrecords, "", "no"},
		{"get", "secrets", "", "no"}, {"get", "jobs.batch", "", "no"}, {"patch", "jobs.batch", "", "no"},
		{"get", "pods", "log", "no"},
	})
	// never the namespace's default ServiceAccount
	canI("system:serviceaccount:"+ns+":default", []check{{"get", job, "", "no"}, {"get", records, "", "no"}})
	// the token is in the gate's container only: the admitted pods, as the API server stores them
	for _, p := range r.AppPods(ctx, r.AppIdentity(ctx)) {
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			var tokenAt []string
			for _, m := range c.VolumeMounts {
				if strings.HasPrefix(m.MountPath, "/var/run/secrets") {
					tokenAt = append(tokenAt, m.Name+" at "+m.MountPath)
				}
			}
			if want := c.Name == "wait-for-migration"; (len(tokenAt) > 0) != want {
				t.Errorf("pod %s container %s mounts %v under /var/run/secrets; want a token only in wait-for-migration", p.Name, c.Name, tokenAt)
			}
		}
	}
}

// When `gate run` cannot read the records (here its Role no longer names the store that keeps them; the
// release's ConfigMap it still may read and write), it cannot tell whether its
// identity already ran, so it must run nothing: a re-created Job of a recorded identity (a rollback, a revert,
// a TTL) would otherwise run an older migration against a newer schema.
func TestAMigrationJobThatCannotReadTheRecordsRunsNothing(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, recordsUnreadableScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "unreadable", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	values := framework.Merge(framework.BaseValues(), map[string]any{
		"image":      map[string]any{"tag": "v2"},
		"migration":  map[string]any{"mode": "job", "backoffLimit": 0},
		"postgresql": map[string]any{"auth": map[string]any{"password": "unreadable-test-password"}},
	})
	r.MustDeploy(values)
	id := r.AppIdentity(ctx)
	job := appMigrationJob(ctx, r)
	runs := r.PsqlInt("select count(*) from demo_migrate_runs")

	// the Job's manifest as Helm applied it, to re-create it as a revert or a TTL's re-apply would
	var manifest string
	for _, doc := range strings.Split(env.Run.Must(t, env.Helm3, "get", "manifest", r.Name, "-n", ns), "\n---") {
		if strings.Contains(doc, "\nkind: Job\n") {
			manifest = doc
		}
	}
	if manifest == "" {
		t.Fatal("no Job in the release's manifest")
	}
	env.Run.Must(t, env.Kubectl, "patch", "role", job, "-n", ns, "--type", "json",
		"-p", `[{"op":"test","path":"/rules/0/resourceNames/1","value":"`+r.StoreName()+`"},`+
			`{"op":"replace","path":"/rules/0/resourceNames","value":["`+r.AnchorName()+`"]}]`)
	if err := env.Client.BatchV1().Jobs(ns).Delete(ctx, job, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	framework.WaitUntil(t, "Job "+job+" to be gone", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.Client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	start := time.Now()
	if _, err := env.Run.Input(t, []byte(manifest), env.Kubectl, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("re-creating Job %s: %v", job, err)
	}
	// gate run retries the records for --wait-for-configmap (2m), then gives up
	framework.WaitUntil(t, "the re-created Job "+job+" to fail", 4*time.Minute, func(ctx context.Context) (bool, error) {
		j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		return err == nil && jobFailed(j), nil
	})
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
		t.Errorf("%d migration runs, was %d: the Job ran its migration without knowing whether it was recorded", got, runs)
	}
	log := jobLog(r, job)
	if !strings.Contains(log, "cannot tell whether identity "+id+" is already recorded") {
		t.Errorf("the Job's log does not say why it ran nothing:\n%s", log)
	}
	if pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job}); err == nil {
		for _, p := range pods.Items {
			for _, s := range p.Status.ContainerStatuses {
				if s.Name == "migrate" && s.State.Terminated != nil && s.State.Terminated.ExitCode != 1 {
					t.Errorf("the migration container exited %d, want 1", s.State.Terminated.ExitCode)
				}
			}
		}
	}
}
