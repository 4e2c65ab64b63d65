//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/premigrate/premigrate/internal/demo/migrate"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	controlTimeClauseScenario = scenarios.Declare(framework.Before, "control-time-clause")
	noHooksUpgradeScenario    = scenarios.Declare(framework.EveryPath, "no-hooks-upgrade")
)

// The witness flags an app process for one of three reasons: it saw a schema older than its version, its
// identity has no finished migration, or it started before that migration finished. The controls of
// controls_test.go trip the first; this one trips only the third, which is the sole detector when an
// identity changes without a schema change (an env-only change: half of the upgrade steps).
func TestTheWitnessCatchesPodsThatStartBeforeAMigrationThatChangesNoSchema(t *testing.T) {
	share(t, weightOne, 50*time.Second)
	res := scenario(t, controlTimeClauseScenario, env.Kubectl)
	ctx := context.Background()
	ns := env.NewNamespace(t, "controltime", restricted)
	values := framework.Merge(framework.BaseValues(), map[string]any{
		"image":      map[string]any{"tag": "v2"},
		"migration":  map[string]any{"mode": "job"},
		"gate":       map[string]any{"mode": "none"},
		"postgresql": map[string]any{"auth": map[string]any{"password": "control-password"}},
	})
	r := env.NewRelease(t, ns, "app", "")
	r.Apply(r.Template(values))
	r.RolledOut(4 * time.Minute)
	first := r.AppIdentity(ctx)
	framework.WaitUntil(t, "the migration of "+first+" to finish", 3*time.Minute, func(context.Context) (bool, error) {
		_, ok := r.MigrationFinished(first)
		return ok, nil
	})

	// The next migration changes no schema; a session holding the migrations' advisory lock makes it
	// finish 25 s late, as a slow data migration would, while the ungated pods start at once.
	held := make(chan error, 1)
	go func() {
		_, err := env.PodExec(ns, r.Fullname()+"-postgresql-0", "psql", "-U", "premigrate", "-d", "premigrate", "-Atc", fmt.Sprintf("select pg_advisory_lock(%d); select pg_sleep(25)", migrate.LockKey))
		held <- err
	}()
	framework.WaitUntil(t, "the migration lock to be held", time.Minute, func(context.Context) (bool, error) {
		key := migrate.LockKey // a bigint key shows in pg_locks as its high and low 32 bits
		return r.PsqlInt(fmt.Sprintf("select count(*) from pg_locks where locktype = 'advisory' and granted and classid = %d and objid = %d",
			uint32(key>>32), uint32(key))) > 0, nil
	})
	start := time.Now()
	next := framework.Merge(values, map[string]any{"migration": map[string]any{"mode": "job",
		"env": []any{framework.EnvVar("CONTROL_ENV_ONLY_CHANGE", "1")}}})
	r.Apply(r.Template(next))
	r.RolledOut(4 * time.Minute)
	second := r.AppIdentity(ctx)
	if second == first {
		t.Fatalf("an env-only change of the migration kept identity %s", first)
	}
	framework.WaitUntil(t, "the migration of "+second+" to finish", 3*time.Minute, func(context.Context) (bool, error) {
		_, ok := r.MigrationFinished(second)
		return ok, nil
	})
	if err := <-held; err != nil {
		t.Fatalf("holding the migration lock: %v", err)
	}
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())

	violations := r.WitnessViolations()
	res.Numbers["violationsCaught"] = float64(len(violations))
	ofSecond := 0
	for _, v := range violations {
		if strings.Contains(v, "identity "+second+")") {
			ofSecond++
		}
	}
	if ofSecond == 0 {
		t.Fatalf("the pods of %s started before their migration finished, yet the witness saw none: the time clause is blind; it saw:\n  %s",
			second, strings.Join(violations, "\n  "))
	}
	// each of them saw a schema at least its version: only the time clause can have flagged them
	bySchema := r.PsqlInt(fmt.Sprintf("select count(*) from demo_pod_starts where identity = '%s' and schema_seen < app_version", second))
	if bySchema != 0 {
		t.Fatalf("%d pods of %s saw an older schema: this control must trip the time clause alone", bySchema, second)
	}
	t.Logf("caught by the time clause alone, as it must be:\n  %s", strings.Join(violations, "\n  "))
}

// `helm upgrade --no-hooks` in hook mode runs no migration: the Deployment gets the new identity's pods
// and only the gate stands between them and the old schema. The next upgrade with hooks migrates and
// releases them.
func TestHelmUpgradeWithoutHooksHoldsThePodsUntilAnUpgradeRunsTheMigration(t *testing.T) {
	share(t, weightOne, 60*time.Second)
	res := scenario(t, noHooksUpgradeScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "nohooks", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	r.MustDeploy(framework.BaseValues())
	first := r.AppIdentity(ctx)

	v2 := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"}})
	start := time.Now()
	env.Run.Must(t, env.Helm3, "upgrade", r.Name, env.Chart, "-n", ns, "--no-hooks", "--values", r.ValuesFile(v2))
	second := r.AppIdentity(ctx)
	if second == first {
		t.Fatalf("the upgrade to v2 kept identity %s", first)
	}
	framework.WaitUntil(t, "a pod of "+second+" to wait in wait-for-migration", 2*time.Minute, func(context.Context) (bool, error) {
		for _, p := range r.AppPods(ctx, second) {
			if waitingInGate(p) {
				return true, nil
			}
		}
		return false, nil
	})
	// held: for 30 s no pod of the new identity gets past the gate, and the old pods keep serving
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range r.AppPods(ctx, second) {
			if _, started := framework.AppStart(p); started {
				t.Fatalf("pod %s of %s started its app container though no migration ran (--no-hooks)", p.Name, second)
			}
		}
		if n := r.PsqlInt(fmt.Sprintf("select count(*) from demo_pod_starts where identity = '%s'", second)); n != 0 {
			t.Fatalf("the witness has %d app processes of %s, whose migration never ran", n, second)
		}
		time.Sleep(3 * time.Second)
	}
	if len(r.AppPods(ctx, first)) == 0 {
		t.Fatalf("no pod of %s is left serving while the new ones wait", first)
	}

	// the same values with hooks: the pre-upgrade hook migrates, and the waiting pods start
	r.MustDeploy(v2)
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if id := r.AppIdentity(ctx); id != second {
		t.Fatalf("the upgrade with hooks changed the identity from %s to %s", second, id)
	}
	r.AssertWitness(ctx, second)
}

// waitingInGate is true when the pod's wait-for-migration init container is running.
func waitingInGate(p corev1.Pod) bool {
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name == "wait-for-migration" && s.State.Running != nil {
			return true
		}
	}
	return false
}
