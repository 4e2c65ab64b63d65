//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/premigrate/premigrate/test/framework"
)

// requiringValues is v4 declaring that its expand must not run before the contract of the version deployed
// before it (migration.requirePreviousContract).
func requiringValues() map[string]any {
	return framework.Merge(contractValues("v4", false), map[string]any{"migration": map[string]any{"requirePreviousContract": true}})
}

// anExpandThatRequiresAPendingContractIsRefused upgrades the release, whose identity pending (v3) has not run
// its contract, to v4, which declares that its expand must follow that contract: the upgrade fails on its
// pre-upgrade check, whose log names pending and the plan, before anything changed: the database has no
// migration of v4 (schema_migrations and demo_migrate_runs as before), the Deployment still runs pending's two
// pods. It returns the tool's output.
func anExpandThatRequiresAPendingContractIsRefused(t *testing.T, res *scenarioResult, r *framework.Release, pending string) string {
	t.Helper()
	ctx := context.Background()
	schema := r.PsqlInt("select max(version) from schema_migrations")
	runs := r.PsqlInt("select count(*) from demo_migrate_runs")
	out, d, err := r.Deploy(requiringValues())
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	if err == nil {
		t.Fatalf("the upgrade to v4, which requires the contract of %s, succeeded while that contract had not run:\n%s", pending, out)
	}
	if !strings.Contains(out, "pre-upgrade") {
		t.Errorf("the refused upgrade does not say its pre-upgrade hook failed:\n%s", out)
	}
	logs, err := env.Run.Run(t, env.Kubectl, "logs", "-n", r.Namespace, "-l", "app.kubernetes.io/component=require-contract", "--tail=20")
	if err != nil || !strings.Contains(logs, "refusing the migration of") || !strings.Contains(logs, "the identity deployed before it, "+pending) ||
		!strings.Contains(logs, "Deploy "+pending+" again until its contract ran") {
		t.Errorf("the check's log does not name %s and the plan (%v):\n%s", pending, err, logs)
	}
	if got := r.AppIdentity(ctx); got != pending {
		t.Errorf("the refused upgrade moved the Deployment from %s to %s", pending, got)
	}
	if got := r.PsqlInt("select max(version) from schema_migrations"); got != schema {
		t.Errorf("the refused upgrade migrated the database: schema version %d, was %d", got, schema)
	}
	if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
		t.Errorf("demo_migrate_runs has %d runs after the refused upgrade, had %d: v4's migration ran", got, runs)
	}
	ready := 0
	for _, p := range r.AppPods(ctx, pending) {
		if p.DeletionTimestamp == nil && podReady(p) {
			ready++
		}
	}
	if ready != 2 {
		t.Errorf("%d pods of %s Ready after the refused upgrade, want 2", ready, pending)
	}
	t.Logf("the upgrade to v4 was refused in %s; the check said: %s", d.Round(time.Second), lastLine(logs))
	return out
}

// theExpandThatRequiredTheContractRunsAfterIt upgrades to v4 again, once contracted (v3) ran its contract: the
// check lets it through, and the database shows the order: v3's contract started before v4's migration.
func theExpandThatRequiredTheContractRunsAfterIt(t *testing.T, res *scenarioResult, r *framework.Release, contracted string) {
	t.Helper()
	ctx := context.Background()
	_, d := r.MustDeploy(requiringValues())
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	v4 := r.AppIdentity(ctx)
	if v4 == contracted {
		t.Fatalf("the upgrade to v4 left the Deployment at %s", contracted)
	}
	var contractStart time.Time
	for _, row := range contractRows(t, r) {
		if row.appVersion == 3 {
			contractStart = row.startedAt
		}
	}
	out := r.Psql("select to_char(min(started_at) at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') from demo_migrate_runs where identity = '" + v4 + "'")
	migrated, err := time.Parse(time.RFC3339Nano, out)
	switch {
	case contractStart.IsZero():
		t.Errorf("demo_contracts has no row of %s (v3)", contracted)
	case err != nil:
		t.Errorf("demo_migrate_runs has no start of v4's migration (%s): %q: %v", v4, out, err)
	case !contractStart.Before(migrated):
		t.Errorf("v4's migration started at %s, not after v3's contract (%s)", migrated.UTC().Format("15:04:05.000"), contractStart.UTC().Format("15:04:05.000"))
	default:
		t.Logf("the database's order: v3's contract started %s, v4's migration (which requires it) started %s",
			contractStart.UTC().Format("15:04:05.000"), migrated.UTC().Format("15:04:05.000"))
	}
	r.AssertWitness(ctx, v4)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
