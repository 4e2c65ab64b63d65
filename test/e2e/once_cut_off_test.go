//go:build e2e

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

	"github.com/premigrate/premigrate/test/framework"
)

// The scenario this file proves (the report lists it; a full run must run it once).
var lockHolderCutOffScenario = scenarios.Declare(framework.Once, framework.CI, "lock-holder-cut-off")

// A migration whose pod is cut off from the API server while it runs (a network partition, an API server
// restart, a managed control plane's upgrade) cannot renew the release's migration lock. It must neither be
// stopped halfway nor have the next deploy's migration start beside it: the migration goes on, the waiter waits
// for as long as the holder's pod runs, and once the cut heals the first migration is recorded and the second
// runs after it. The cut is real: a packet filter on the node drops everything from that pod to the API server,
// established connections included, for longer than the lock's 30 s lease. The evidence is the database's
// (demo_migrate_starts: each run that began applying; demo_migrate_runs: each run that finished, with the
// database's times), the demo migration's own advisory lock (it logs finding another run holding it) and the
// Jobs' status; the gate's lines only show that the cut took effect.
func TestAMigrationCutOffFromTheAPIServerFinishesAndTheNextWaitsForItsPodToEnd(t *testing.T) {
	share(t, weightOne, 210*time.Second)
	res := scenario(t, lockHolderCutOffScenario, env.Kubectl)
	ctx := context.Background()
	ns := env.NewNamespace(t, "cutoff", restricted)
	r := env.NewRelease(t, ns, "app", "")
	base := framework.Merge(framework.BaseValues(), map[string]any{
		"migration":  map[string]any{"mode": "job"},
		"postgresql": map[string]any{"auth": map[string]any{"password": "cut-off-password"}},
	})
	r.Apply(r.Template(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v1"}})))
	r.RolledOut(4 * time.Minute)

	// the first migration: versions 2 and 3, 40 s each, so that it outlasts the cut
	r.Apply(r.Template(framework.Merge(base, map[string]any{
		"image":     map[string]any{"tag": "v3"},
		"migration": map[string]any{"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "40s")}},
	})))
	first := r.AppIdentity(ctx)
	firstJob := r.MigrationJob(ctx, first)
	if firstJob == nil {
		t.Fatalf("no migration Job for identity %s", first)
	}
	framework.WaitUntil(t, "the first migration to begin applying versions", 3*time.Minute, func(context.Context) (bool, error) {
		return r.PsqlInt("select count(*) from demo_migrate_starts where identity = '"+first+"'") > 0, nil
	})
	holder := jobPod(t, ns, firstJob.Name)
	if holder.Status.PodIP == "" || holder.Spec.NodeName == "" {
		t.Fatalf("the first migration's pod %s has no IP or node yet", holder.Name)
	}

	// the second deploy, while the first migration runs: its migration waits for the release's lock
	r.Apply(r.Template(framework.Merge(base, map[string]any{"image": map[string]any{"tag": "v4"}})))
	second := r.AppIdentity(ctx)
	secondJob := r.MigrationJob(ctx, second)
	if secondJob == nil {
		t.Fatalf("no migration Job for identity %s", second)
	}
	waitForLog(t, ns, secondJob.Name, "another migration of this release holds the lock", 2*time.Minute)

	// the cut: every packet from the holder's pod to the API server (the kubernetes Service is translated to
	// the node's port 6443 before the filter) is dropped, the open connection's too
	rule := []string{"INPUT", "-s", holder.Status.PodIP, "-p", "tcp", "--dport", "6443", "-j", "DROP"}
	if _, err := env.Cluster.OnNode(holder.Spec.NodeName, append([]string{"iptables", "-I"}, rule...)...); err != nil {
		t.Fatalf("cutting pod %s off from the API server: %v", holder.Name, err)
	}
	cut := time.Now()
	healed := false
	heal := func() {
		if healed {
			return
		}
		if _, err := env.Cluster.OnNode(holder.Spec.NodeName, append([]string{"iptables", "-D"}, rule...)...); err != nil {
			t.Errorf("healing the cut of pod %s: %v", holder.Name, err)
		}
		healed = true
	}
	t.Cleanup(heal)
	fmt.Printf("e2e: %s: pod %s (%s) cut off from the API server on node %s\n", t.Name(), holder.Name, holder.Status.PodIP, holder.Spec.NodeName)
	// the cut lasts past the lock's 30 s lease as the waiter measures it (from the last renewal it saw, before
	// the cut): until the waiter says it found the lock unrenewed with its holder's pod still running, or 50 s.
	// What the waiter then did is judged below by the database, not by its words.
	saidRunning := false
	for deadline := time.Now().Add(50 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		log, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", ns, "job/"+secondJob.Name, "-c", "migrate")
		if err == nil && strings.Contains(log, "may still be running (its pod "+holder.Name+" is Running") {
			saidRunning = true
			// a few more polls of the waiter under the cut, and the cut past the lease and a margin: the waiter
			// counts the lease from the last renewal it saw, up to a renewal period before the cut
			time.Sleep(max(5*time.Second, 37*time.Second-time.Since(cut)))
			break
		}
	}
	heal()
	cutFor := time.Since(cut)
	res.Numbers["cutOffSec"] = cutFor.Seconds()
	if cutFor < 35*time.Second {
		t.Fatalf("the cut lasted %s, less than the lock's 30 s lease and a margin: this proves nothing", cutFor.Round(time.Second))
	}
	if still := r.PsqlInt("select count(*) from demo_migrate_runs where identity = '" + first + "'"); still != 0 {
		t.Fatalf("the first migration finished before the cut healed (%d runs): the cut did not last through its run, so this proves nothing", still)
	}

	framework.WaitUntil(t, "both migration Jobs to finish", 4*time.Minute, func(ctx context.Context) (bool, error) {
		for _, name := range []string{firstJob.Name, secondJob.Name} {
			j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if j.Status.Succeeded == 0 && !jobFailed(j) {
				return false, nil
			}
		}
		return true, nil
	})
	r.RolledOut(4 * time.Minute)
	r.AssertWitness(ctx, second)

	// the Jobs, as the API server has them: each succeeded with its first pod
	for _, name := range []string{firstJob.Name, secondJob.Name} {
		j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j.Status.Succeeded != 1 || j.Status.Failed != 0 {
			t.Errorf("Job %s: %d succeeded, %d failed pods, want its first pod to succeed; its log:\n%s", name, j.Status.Succeeded, j.Status.Failed, jobLog(r, name))
		}
	}
	firstLog, secondLog := jobLog(r, firstJob.Name), jobLog(r, secondJob.Name)
	if !saidRunning {
		t.Errorf("the second migration never said it waits for the first's pod, still running, to end; its log:\n%s", secondLog)
	}
	if !strings.Contains(firstLog, "cannot renew the migration lock") {
		t.Errorf("the first migration never said it could not renew the lock: the cut did not reach it, so this proves nothing; its log:\n%s", firstLog)
	}
	// the demo migration's own advisory lock: held by another run only when two migrations ran at once
	for name, log := range map[string]string{firstJob.Name: firstLog, secondJob.Name: secondLog} {
		if strings.Contains(log, "another migration run holds the lock") {
			t.Errorf("the migration of Job %s found another migration running on the database: the second took the lock over "+
				"while the first still ran; its log:\n%s", name, log)
		}
	}
	// the database: the first migration began once and finished once (never stopped and run again), the second
	// began after it finished
	if n := r.PsqlInt("select count(*) from demo_migrate_starts where identity = '" + first + "'"); n != 1 {
		t.Errorf("the first migration began applying %d times, want once (stopped halfway and run again?): %s", n,
			r.Psql("select string_agg(identity || ' ' || array_to_string(pending, ',') || ' at ' || started_at, '; ' order by id) from demo_migrate_starts"))
	}
	if n := r.PsqlInt("select count(*) from demo_migrate_runs where identity = '" + first + "'"); n != 1 {
		t.Errorf("the first migration finished %d times, want once", n)
	}
	if n := r.PsqlInt("select count(*) from demo_migrate_runs r, demo_migrate_starts s where r.identity = '" + first +
		"' and s.identity = '" + second + "' and s.started_at >= r.finished_at"); n != 1 {
		t.Errorf("the second migration did not begin after the first finished (database times): starts %s; runs %s",
			r.Psql("select string_agg(identity || ' at ' || started_at, '; ' order by id) from demo_migrate_starts"),
			r.Psql("select string_agg(identity || ' ' || started_at || ' to ' || finished_at, '; ') from demo_migrate_runs"))
	}
	if got := r.Psql("select string_agg(version::text, ',' order by version) from schema_migrations"); got != "1,2,3,4" {
		t.Errorf("schema_migrations holds %q, want 1..4 once each", got)
	}
	if !t.Failed() {
		t.Logf("the first migration's pod was cut off from the API server for %s; it finished and was recorded, and the second waited for it",
			cutFor.Round(time.Second))
	}
}

// jobPod is the running pod of Job job.
func jobPod(t *testing.T, ns, job string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	framework.WaitUntil(t, "a running pod of Job "+job, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				pod = p
				return true, nil
			}
		}
		return false, nil
	})
	return pod
}

// waitForLog waits until the log of Job job's migrate container says want.
func waitForLog(t *testing.T, ns, job, want string, within time.Duration) {
	t.Helper()
	framework.WaitUntil(t, fmt.Sprintf("Job %s to log %q", job, want), within, func(context.Context) (bool, error) {
		log, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", ns, "job/"+job, "-c", "migrate")
		return err == nil && strings.Contains(log, want), nil
	})
}
