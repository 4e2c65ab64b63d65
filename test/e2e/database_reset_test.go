//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	databaseResetEmbeddedScenario        = scenarios.Declare(framework.ThisDatabase, framework.CI, "database-reset-embedded")
	databaseResetEmbeddedControlScenario = scenarios.Declare(framework.ThisDatabase, framework.Matrix, "database-reset-embedded-control")
	databaseReplacedExternalScenario     = scenarios.Declare(framework.ThisDatabase, framework.CI, "database-replaced-external")
)

// The embedded PostgreSQL without persistence keeps its data in its pod's emptyDir: when the pod is made again
// (a drain, an eviction, a node lost) the database restarts empty under the release, and the records still say
// every identity was migrated. Bound to the database (the pod's UID), a record of the old pod is no evidence:
// app pods that start afterwards wait, naming the reason, and the next `helm upgrade` with the same values runs
// the migration again on the new database. The control is the same steps with the binding switched off: the
// witness (the app's own row in the new database) must see a pod start on the empty schema.
func TestAnEmbeddedDatabaseThatRestartsEmptyHoldsNewPodsUntilTheNextUpgradeMigratesIt(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, c := range []struct {
		name     string
		scenario framework.Scenario
		bound    bool
	}{
		{name: "records bound to the database", scenario: databaseResetEmbeddedScenario, bound: true},
		{name: "records not bound: the control", scenario: databaseResetEmbeddedControlScenario, bound: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			share(t, weightOne, 90*time.Second)
			res := scenario(t, c.scenario, env.Helm3)
			ctx := context.Background()
			ns := env.NewNamespace(t, "dbreset", restricted)
			r := env.NewRelease(t, ns, "app", env.Helm3)
			values := framework.Merge(framework.BaseValues(), map[string]any{
				"replicaCount": 1,
				"postgresql":   map[string]any{"persistence": map[string]any{"enabled": false}},
				"migration":    map[string]any{"bindRecordsToDatabase": c.bound},
			})
			r.MustDeploy(values)
			v2 := framework.Merge(values, map[string]any{"image": map[string]any{"tag": "v2"}})
			r.MustDeploy(v2) // the pre-upgrade hook migrates to v2
			id := r.AppIdentity(ctx)
			r.AssertWitness(ctx, id)

			start := time.Now()
			restartDatabaseEmpty(ctx, r)
			env.Run.Must(t, env.Kubectl, "rollout", "restart", "-n", ns, "deployment/"+r.Fullname())
			// an app process on the new database writes its row there (the app creates the witness's table itself)
			early := fmt.Sprintf("select count(*) from demo_pod_starts where identity = '%s' and schema_seen < app_version", id)
			if !c.bound {
				framework.WaitUntil(t, "the witness to see an app process start on the empty database", 3*time.Minute, func(context.Context) (bool, error) {
					return countIfTable(r, "demo_pod_starts", early) > 0, nil
				})
				n := countIfTable(r, "demo_pod_starts", early)
				res.Numbers["violationsCaught"] = float64(n)
				t.Logf("caught, as it must be: %d app processes of %s started on the empty database (schema older than their version)", n, id)
				return
			}

			// the new pod waits, and its gate says why (its records went with the old database's pod: the Job that
			// completed before the database was made again names the change)
			var held corev1.Pod
			framework.WaitUntil(t, "a restarted pod's gate to name the changed database", 2*time.Minute, func(ctx context.Context) (bool, error) {
				for _, p := range r.AppPods(ctx, id) {
					if p.CreationTimestamp.Time.Before(start.Truncate(time.Second)) { // the API server's times are whole seconds
						continue
					}
					logs, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", ns, p.Name, "-c", "wait-for-migration")
					if err == nil && strings.Contains(logs, "the database changed since identity "+id) {
						held = p
						return true, nil
					}
				}
				return false, nil
			})
			if _, started := framework.AppStart(held); started {
				t.Errorf("pod %s started its app on the empty database", held.Name)
			}
			// the pod that kept running lost its schema: its readiness probe (the app's /readyz, as the kubelet
			// reports it) takes it out of the Service
			framework.WaitUntil(t, "the running app pod to go unready on the empty database", time.Minute, func(ctx context.Context) (bool, error) {
				for _, p := range r.AppPods(ctx, id) {
					if p.CreationTimestamp.Time.Before(start.Truncate(time.Second)) && p.DeletionTimestamp == nil && !podReady(p) {
						return true, nil
					}
				}
				return false, nil
			})
			if n := countIfTable(r, "demo_pod_starts", fmt.Sprintf("select count(*) from demo_pod_starts where identity = '%s'", id)); n != 0 {
				t.Errorf("the witness has %d app processes of %s on the new database before its migration ran there", n, id)
			}
			// the next upgrade with the same values migrates the new database, and the pod starts
			_, d := r.MustDeploy(v2)
			res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds(), d.Seconds())
			if got := r.PsqlInt(fmt.Sprintf("select count(*) from demo_migrate_runs where identity = '%s'", id)); got != 1 {
				t.Errorf("identity %s migrated the new database %d times, want once", id, got)
			}
			if v := r.PsqlInt("select coalesce(max(version), 0) from schema_migrations"); v != 2 {
				t.Errorf("the new database's schema is at version %d after the upgrade, want 2", v)
			}
			onlyCurrentPods(ctx, r, id, 1)
			r.AssertWitness(ctx, id)
		})
	}
}

// restartDatabaseEmpty deletes the embedded PostgreSQL's pod (its data is in the pod's emptyDir) and waits
// until the StatefulSet made it again, ready and empty.
func restartDatabaseEmpty(ctx context.Context, r *framework.Release) {
	r.T.Helper()
	name := r.Fullname() + "-postgresql-0"
	pods := env.Client.CoreV1().Pods(r.Namespace)
	old, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		r.T.Fatalf("the database pod: %v", err)
	}
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		r.T.Fatalf("deleting the database pod: %v", err)
	}
	framework.WaitUntil(r.T, "the database pod to be made again and ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID == old.UID) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if n := r.PsqlInt("select count(*) from information_schema.tables where table_name = 'schema_migrations'"); n != 0 {
		r.T.Fatalf("the database pod was made again but its database is not empty")
	}
}

// countIfTable runs a count query, or answers 0 while table does not exist (a new, empty database).
func countIfTable(r *framework.Release, table, query string) int {
	r.T.Helper()
	if r.PsqlInt(fmt.Sprintf("select count(*) from information_schema.tables where table_name = '%s'", table)) == 0 {
		return 0
	}
	return r.PsqlInt(query)
}

// onlyCurrentPods waits until the pods of identity id are exactly n, none terminating: the witness then checks
// the pods that serve, not one on its way out.
func onlyCurrentPods(ctx context.Context, r *framework.Release, id string, n int) {
	r.T.Helper()
	framework.WaitUntil(r.T, fmt.Sprintf("%d pods of identity %s, none terminating", n, id), 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods := r.AppPods(ctx, id)
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
		}
		return len(pods) == n, nil
	})
}

// An external database's URL in the Secret the chart reads is pointed at a fresh database (a new server, a
// restored copy under another name, a mistake): the records, bound to a hash of that URL, no longer describe
// the database the app pods will use. Restarted pods wait, naming the reason, and the next upgrade with the same
// values migrates the fresh database; the app's own evidence (ledger_schema, ledger_pod_starts, written by the
// ledger in the fresh database) shows no start before its schema. The example chart binds its records to the
// URL through the library's database.urlSecretName; the embedded scenario above is the control of the rule.
func TestAnExternalDatabaseURLPointedElsewhereHoldsNewPodsUntilTheNextUpgradeMigratesIt(t *testing.T) {
	share(t, weightOne, 50*time.Second)
	res := scenario(t, databaseReplacedExternalScenario, env.Helm4)
	l := newLedger(t, env.Helm4)
	values := map[string]any{"schemaVersion": 2}
	if out, err := l.deploy(values, true); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	l.assertSchema(2, 2)
	l.psql("CREATE DATABASE fresh OWNER ledger")
	env.Run.Must(t, env.Kubectl, "patch", "secret", "ledger-db", "-n", l.ns, "--type", "merge",
		"-p", `{"stringData":{"url":"postgres://ledger:ledger-pw@ledger-db:5432/fresh?sslmode=disable"}}`)
	start := time.Now()
	deployment := l.name + "-ledger"
	env.Run.Must(t, env.Kubectl, "rollout", "restart", "-n", l.ns, "deployment/"+deployment)
	framework.WaitUntil(t, "a restarted pod's gate to name the changed database", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.Client.CoreV1().Pods(l.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.CreationTimestamp.Time.Before(start.Truncate(time.Second)) { // the API server's times are whole seconds
				continue
			}
			logs, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", l.ns, p.Name, "-c", "wait-for-migration")
			if err == nil && strings.Contains(logs, "the database changed since identity") {
				return true, nil
			}
		}
		return false, nil
	})
	l.db = "fresh"
	if n := l.psqlInt("select count(*) from information_schema.tables where table_name = 'ledger_pod_starts'"); n != 0 {
		if starts := l.psqlInt("select count(*) from ledger_pod_starts"); starts != 0 {
			t.Errorf("%d app processes reached the fresh database before its migration ran there", starts)
		}
	}
	if out, err := l.deploy(values, true); err != nil {
		t.Fatalf("the upgrade with the same values: %v\n%s", err, out)
	}
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	l.assertSchema(2, 2)
}
