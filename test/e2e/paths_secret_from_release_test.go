//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenario this file proves (the report lists it; a full run must run it once).
var databaseSecretFromReleaseScenario = scenarios.Declare(framework.EveryPath, framework.CI, "external-database-secret-from-the-release")

// TestAnInstallWhoseDatabaseSecretComesWithTheReleaseMigratesAndStarts installs on an external database whose
// URL Secret the release brings itself (extraObjects here; an ExternalSecret or an operator's cluster do the same),
// with migration.preInstallHook left null. Helm creates the release's objects only after its pre-install hooks,
// so a pre-install hook would wait for that Secret until --timeout and the install could never finish: the chart
// finds no such Secret before the release and migrates the install in the plain Job instead, created beside the
// Secret, with the gate holding the pods. Then an upgrade, whose Secret now exists, runs the pre-upgrade hook.
// Evidence the chart does not write: the API server's creation times of the Secret and the Job, the database's
// demo_migrate_runs, the witness. With the Secret's lookup taken out (the mutant pre-install-hook-without-its-secret,
// the control) the install times out on a hook whose pod cannot start.
func TestAnInstallWhoseDatabaseSecretComesWithTheReleaseMigratesAndStarts(t *testing.T) {
	share(t, weightOne, 80*time.Second)
	res := scenario(t, databaseSecretFromReleaseScenario, env.Helm4)
	ctx := context.Background()
	l := newLedger(t, env.Helm4) // its namespace and a PostgreSQL; the release's own Secret points at it
	r := env.NewRelease(t, l.ns, "app", env.Helm4)
	r.PsqlArgs = []string{"ledger-db", "psql", "-U", "ledger", "-d", "ledger"}
	values := func(tag string) map[string]any {
		return externalValues(tag, map[string]any{
			"database": map[string]any{"existingSecret": "app-db", "existingSecretKey": "url"},
			"extraObjects": []any{map[string]any{
				"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "app-db"},
				"stringData": map[string]any{"url": "postgres://ledger:ledger-pw@ledger-db:5432/ledger?sslmode=disable"},
			}},
		})
	}
	for i, step := range []struct{ tag, hook string }{{"v2", ""}, {"v3", "pre-install,pre-upgrade"}} {
		out, d, err := r.Deploy(values(step.tag), "--timeout", "120s")
		if err != nil {
			t.Fatalf("step %d (%s) with the database's Secret in the release did not finish: %v\n%s", i+1, step.tag, err, out)
		}
		res.DurationsSec = append(res.DurationsSec, d.Seconds())
		if i > 0 {
			res.Upgrades++
		}
		id := r.AppIdentity(ctx)
		r.AssertWitness(ctx, id)
		job := r.MigrationJob(ctx, id)
		if job == nil {
			t.Fatalf("step %d: no migration Job of identity %s", i+1, id)
		}
		if got := job.Annotations["helm.sh/hook"]; got != step.hook {
			t.Errorf("step %d: the migration Job %s has helm.sh/hook %q, want %q", i+1, job.Name, got, step.hook)
		}
		if n := r.PsqlInt(fmt.Sprintf("select count(*) from demo_migrate_runs where identity = '%s'", id)); n != 1 {
			t.Errorf("step %d: identity %s ran %d times, want once", i+1, id, n)
		}
		if i == 0 {
			secret, err := env.Client.CoreV1().Secrets(l.ns).Get(ctx, "app-db", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("reading the release's Secret: %v", err)
			}
			if job.CreationTimestamp.Before(&secret.CreationTimestamp) {
				t.Errorf("the install's migration Job was created at %v, before the Secret it reads (%v)", job.CreationTimestamp, secret.CreationTimestamp)
			}
		}
	}
}
