//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenario this file proves (the report lists it; a full run must run it once).
var jobSpecOnlyScenario = scenarios.Declare(framework.Once, framework.CI, "job-spec-change-migrates-nothing")

// A change of how the migration Job runs, not of what it runs (the gate's resources, the Job's retries and
// deadline: what a new gate image or a chart upgrade changes), applied with `helm template | kubectl apply` in
// job mode with a contract step, the path with no hook to delete the previous Job: a new migration Job and a new
// contract Job of the same identity, never a patch of an immutable pod template, neither of which runs its
// command again, and the app's new pods start on the schema they find. The embedded database has no password in
// the values: the render, the same every time, leaves it to the cluster, and the new Job that fills the Secret
// (the gate's resources changed it too) keeps the password the database was created with. Evidence the gate
// does not write: the database's own count of migration runs and contract steps, the API server's Jobs, the
// database accepting the new pods (the witness).
func TestAChangeOfTheJobAloneIsANewJobThatMigratesNothingAgain(t *testing.T) {
	share(t, weightOne, 90*time.Second)
	res := scenario(t, jobSpecOnlyScenario, env.Kubectl)
	ctx := context.Background()
	ns := env.NewNamespace(t, "jobspec", restricted)
	r := env.NewRelease(t, ns, "app", "")
	base := framework.Merge(framework.BaseValues(), map[string]any{
		"image":     map[string]any{"tag": "v2"},
		"migration": map[string]any{"mode": "job", "contract": map[string]any{"command": []any{"/demo", "contract"}}},
	})
	// apply renders values, applies them and waits for the rollout and for every Job of the identity (the
	// migration and the contract) to complete; it returns the identity and the migration Job's name.
	apply := func(values map[string]any) (id, job string) {
		start := time.Now()
		r.Apply(r.Template(values))
		r.RolledOut(4 * time.Minute)
		id = r.AppIdentity(ctx)
		env.Run.Must(t, env.Kubectl, "wait", "-n", ns, "--for=condition=Complete", "job", "--timeout=4m",
			"-l", "app.kubernetes.io/instance="+r.Name+",premigrate.io/identity="+id)
		res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
		return id, appMigrationJob(ctx, r)
	}
	first := r.Template(base)
	if second := r.Template(base); string(first) != string(second) {
		t.Fatal("two renders of the same values without a cluster differ (the embedded database's password?)")
	}
	id, job := apply(base)
	password := func() string {
		s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, r.Fullname()+"-postgresql", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading the database's Secret: %v", err)
		}
		return string(s.Data["password"])
	}
	made := password()
	if len(made) != 24 {
		t.Fatalf("the database's Secret holds a password of %d characters, want the 24 made in the cluster", len(made))
	}
	runs := r.PsqlInt("select count(*) from demo_migrate_runs")
	contracts := r.PsqlInt("select count(*) from demo_contracts")
	if runs != 1 || contracts != 1 {
		t.Fatalf("the first apply ran the migration %d times and the contract %d times, want once each", runs, contracts)
	}

	mechanics := framework.Merge(base, map[string]any{
		"migration": map[string]any{"backoffLimit": 4, "activeDeadlineSeconds": 600},
		"gate":      map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "15m"}}},
	})
	id2, job2 := apply(mechanics)
	res.Upgrades = 1
	if id2 != id {
		t.Errorf("a change of the Job alone moved the identity from %s to %s", id, id2)
	}
	if job2 == job {
		t.Errorf("a change of the Job's pod template kept its name %s: a patch of an immutable Job", job)
	}
	if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
		t.Errorf("the migration ran %d times, was %d: the new Job %s of the recorded identity %s ran it again", got, runs, job2, id)
	}
	if got := r.PsqlInt("select count(*) from demo_contracts"); got != contracts {
		t.Errorf("the contract step ran %d times, was %d: it ran again for the same identity %s", got, contracts, id)
	}
	jobs, err := env.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "premigrate.io/identity=" + id})
	if err != nil {
		t.Fatalf("listing the Jobs of %s: %v", id, err)
	}
	byComponent := map[string][]batchv1.Job{}
	for _, j := range jobs.Items {
		c := j.Labels["app.kubernetes.io/component"]
		byComponent[c] = append(byComponent[c], j)
		if j.Status.Succeeded != 1 || j.Status.Failed != 0 {
			t.Errorf("Job %s: %d succeeded, %d failed pods, want 1 and 0", j.Name, j.Status.Succeeded, j.Status.Failed)
		}
	}
	for _, c := range []string{"migration", "contract"} {
		if n := len(byComponent[c]); n != 2 {
			t.Errorf("%d %s Jobs of identity %s after two applies of different Job specs, want 2 (kubectl apply keeps the first)", n, c, id)
		}
	}
	if got := password(); got != made {
		t.Errorf("the new Job that fills the database's Secret replaced the password the database was created with")
	}
	passwordJobs, err := env.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=database-password"})
	if err != nil {
		t.Fatalf("listing the Jobs that fill the database's Secret: %v", err)
	}
	if n := len(passwordJobs.Items); n != 2 {
		t.Errorf("%d Jobs filled the database's Secret, want 2: one per gate's pod template", n)
	}
	for _, j := range passwordJobs.Items {
		if j.Status.Succeeded != 1 {
			t.Errorf("Job %s: %d succeeded, %d failed pods, want 1 and 0", j.Name, j.Status.Succeeded, j.Status.Failed)
		}
	}
	r.AssertWitness(ctx, id)
	t.Logf("identity %s: Jobs %s then %s, %d migration run and %d contract step in the database", id, job, job2, runs, contracts)
}
