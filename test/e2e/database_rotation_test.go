//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var databasePasswordRotatedScenario = scenarios.Declare(framework.ThisDatabase, framework.CI, "database-password-rotated")

// A database's credentials are rotated the way a zero-downtime rotation does it (Vault's dynamic credentials,
// an ExternalSecrets refresh, a second user made beside the first): a new user with its own password on the
// same server and database, the Secret's URL rewritten to it, with other options, and the app restarted to
// read it. The database did not change, so its records still describe it: the restarted pods start at once,
// under load, with no migration run again and none of them held. The records are bound to the database's
// server, port and name (package dbid), never its user, password or options; bound to the whole URL (the
// mutant binding-hashes-the-whole-url), every restarted pod waits for an upgrade that would migrate nothing.
// The evidence is the database's: demo_migrate_runs and the app's own starts (the witness).
func TestAPasswordRotationHoldsNoPodAndRunsNoMigration(t *testing.T) {
	share(t, weightOne, 90*time.Second)
	res := scenario(t, databasePasswordRotatedScenario, env.Helm4)
	ctx := context.Background()
	l := newLedger(t, env.Helm4) // its namespace, and a PostgreSQL with the Secret ledger-db
	r := env.NewRelease(t, l.ns, "app", env.Helm4)
	r.PsqlArgs = []string{"ledger-db", "psql", "-U", "ledger", "-d", "ledger"}
	values := framework.Merge(framework.BaseValues(), map[string]any{
		"image":      map[string]any{"tag": "v2"},
		"postgresql": map[string]any{"enabled": false},
		"database":   map[string]any{"existingSecret": "ledger-db", "existingSecretKey": "url"},
	})
	r.MustDeploy(values)
	id := r.AppIdentity(ctx)
	load := env.StartLoad(t, l.ns, r.Fullname())

	// the new credential: another user, a member of the first (it reaches the same tables), another password
	l.psql("CREATE ROLE ledger_rotated LOGIN PASSWORD 'rotated-pw' IN ROLE ledger")
	env.Run.Must(t, env.Kubectl, "patch", "secret", "ledger-db", "-n", l.ns, "--type", "merge", "-p",
		`{"stringData":{"url":"postgresql://ledger_rotated:rotated-pw@ledger-db/ledger?sslmode=disable&application_name=rotated"}}`)
	start := time.Now()
	env.Run.Must(t, env.Kubectl, "rollout", "restart", "-n", l.ns, "deployment/"+r.Fullname())
	if out, err := env.Run.Run(t, env.Kubectl, "rollout", "status", "-n", l.ns, "deployment/"+r.Fullname(), "--timeout=150s"); err != nil {
		t.Errorf("the restart after the rotation did not complete: %v\n%s", err, out)
	}
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	restarted := 0
	for _, p := range r.AppPods(ctx, id) {
		if p.CreationTimestamp.Time.Before(start.Truncate(time.Second)) { // the API server's times are whole seconds
			continue
		}
		restarted++
		logs, _ := env.Run.Stdout(t, env.Kubectl, "logs", "-n", l.ns, p.Name, "-c", "wait-for-migration")
		if strings.Contains(logs, "the database changed") {
			t.Errorf("pod %s was held after the rotation, as if the database had changed:\n%s", p.Name, logs)
		}
	}
	if restarted == 0 {
		t.Errorf("no pod was made after the restart: the rotation proved nothing")
	}
	// the app's own record: its new pods connected as the new user (the rotation took effect)
	if n := l.psqlInt("select count(*) from pg_stat_activity where usename = 'ledger_rotated'"); n == 0 {
		t.Errorf("no session of the rotated user: the restarted pods did not use the new credential")
	}
	if n := r.PsqlInt(fmt.Sprintf("select count(*) from demo_migrate_runs where identity = '%s'", id)); n != 1 {
		t.Errorf("identity %s ran %d times, want once: a rotation is no reason to migrate again", id, n)
	}
	onlyCurrentPods(ctx, r, id, 2)
	r.AssertWitness(ctx, id)
	rep := load.Stop()
	recordLoad(res, rep)
	rep.Check(t, "while the credentials were rotated")
	t.Logf("after the rotation, %d restarted pods started in %.0f s with no migration run", restarted, res.DurationsSec[0])
}
