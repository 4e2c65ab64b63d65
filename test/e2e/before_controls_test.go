//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/premigrate/premigrate/internal/demo/migrate"
	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	controlTimeClauseScenario         = scenarios.Declare(framework.Before, framework.CI, "control-time-clause")
	controlJobModeWithoutGateScenario = scenarios.Declare(framework.Before, framework.CI, "control-1")
	controlGateAlwaysLetsGoScenario   = scenarios.Declare(framework.Before, framework.Matrix, "control-2")
)

// Negative controls: the protection removed, the same oracle. The witness (the app's own record of its start
// and the schema it saw, the migration's own record in the database) must report the violation; if it did
// not, the scenarios that pass on it would prove nothing.
func TestTheWitnessCatchesPodsThatStartBeforeTheirMigration(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	slow := []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "8s")}
	cases := []struct {
		name     string
		scenario framework.Scenario
		helm     bool // helm install; else helm template | kubectl apply
		values   map[string]any
	}{
		{
			name:     "job mode without the gate: the pods race the Job",
			scenario: controlJobModeWithoutGateScenario,
			values: map[string]any{
				"migration":  map[string]any{"mode": "job", "env": slow},
				"gate":       map[string]any{"mode": "none"},
				"postgresql": map[string]any{"auth": map[string]any{"password": "control-password"}},
			},
		},
		{
			name:     "a gate that always lets go",
			scenario: controlGateAlwaysLetsGoScenario,
			helm:     true,
			values: map[string]any{
				"migration": map[string]any{"env": slow},
				// the command-mode gate running `demo help`, which exits 0 at once whatever the schema
				"gate": map[string]any{"mode": "command", "args": []any{"help"}},
			},
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			share(t, weightOne, 50*time.Second)
			res := scenario(t, c.scenario, env.Kubectl)
			ctx := context.Background()
			ns := env.NewNamespace(t, fmt.Sprintf("control%d", i+1), restricted)
			values := framework.Merge(framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"}}), c.values)
			r := env.NewRelease(t, ns, "app", "")
			start := time.Now()
			if c.helm {
				r.Helm = env.Helm3
				res.Helm = "helm3"
				r.MustDeploy(values)
			} else {
				r.Apply(r.Template(values))
				r.RolledOut(4 * time.Minute)
			}
			id := r.AppIdentity(ctx)
			framework.WaitUntil(t, "the migration of "+id+" to finish", 3*time.Minute, func(context.Context) (bool, error) {
				_, ok := r.MigrationFinished(id)
				return ok, nil
			})
			res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
			violations := r.WitnessViolations()
			res.Numbers["violationsCaught"] = float64(len(violations))
			if len(violations) == 0 {
				t.Fatalf("the protection was removed, yet the witness saw no pod start before its migration: the oracle is blind")
			}
			t.Logf("caught, as it must be:\n  %s", strings.Join(violations, "\n  "))
		})
	}
}

// The witness flags an app process for one of three reasons: it saw a schema older than its version, its
// identity has no finished migration, or it started before that migration finished. The other controls
// of this file trip the first; this one trips only the third, which is the sole detector when an
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
