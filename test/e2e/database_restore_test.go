//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	databaseRestoredFromDumpScenario        = scenarios.Declare(framework.ThisDatabase, framework.CI, "database-restored-from-dump")
	databaseRestoredFromDumpControlScenario = scenarios.Declare(framework.ThisDatabase, framework.Matrix, "database-restored-from-dump-control")
)

// An external database restored from a dump taken before the last upgrade (issue: the records tell the truth
// about the database): the same URL, so the records, bound to a hash of it, still say the upgrade's migration
// ran there, and they are right about the past and wrong about the present. migration.check asks the
// database itself (`demo migrate check`: is the schema at this build's version?) before gate run believes a
// record, and gate.mode command asks it for the app pods. Restarted pods wait, their gate's log naming the
// schema; the next upgrade with the same values runs the migration again; the pods start. The evidence is the
// database's own: schema_migrations, demo_migrate_runs and the app's starts (the witness), all written by the
// demo in that database.

// restoreValues are the chart's values on the external database of ledgerDBManifest, the app pods gated by
// `demo migrate check`, and the migration's check when check is set.
func restoreValues(tag string, check bool) map[string]any {
	v := framework.Merge(framework.BaseValues(), map[string]any{
		"image":      map[string]any{"tag": tag},
		"postgresql": map[string]any{"enabled": false},
		"database":   map[string]any{"existingSecret": "ledger-db", "existingSecretKey": "url"},
		"gate":       map[string]any{"mode": "command", "args": []any{"migrate", "check"}},
	})
	if check {
		v = framework.Merge(v, map[string]any{"migration": map[string]any{"check": []any{"/demo", "migrate", "check"}}})
	}
	return v
}

// restoredRelease installs v2 on an external database, dumps it, upgrades to v3, restores the dump (the schema
// is back at 2 under the same URL) and restarts the app pods, which must wait: it returns the release, v3's
// identity and the database's time of the restore.
func restoredRelease(t *testing.T, check bool) (*framework.Release, string, string) {
	t.Helper()
	ctx := context.Background()
	l := newLedger(t, env.Helm4) // its namespace, and a PostgreSQL with the Secret ledger-db
	r := env.NewRelease(t, l.ns, "app", env.Helm4)
	r.PsqlArgs = []string{"ledger-db", "psql", "-U", "ledger", "-d", "ledger"}
	r.MustDeploy(restoreValues("v2", check))
	if _, err := env.PodExec(r.Namespace, "ledger-db", "pg_dump", "-U", "ledger", "-d", "ledger", "--clean", "--if-exists", "-f", "/tmp/before-v3.sql"); err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	r.MustDeploy(restoreValues("v3", check))
	id := r.AppIdentity(ctx)
	if v := r.PsqlInt("select max(version) from schema_migrations"); v != 3 {
		t.Fatalf("schema at version %d after the upgrade to v3, want 3", v)
	}
	if out, err := env.PodExec(r.Namespace, "ledger-db", "psql", "-U", "ledger", "-d", "ledger", "-v", "ON_ERROR_STOP=1", "-q", "-f", "/tmp/before-v3.sql"); err != nil {
		t.Fatalf("restoring the dump: %v\n%s", err, out)
	}
	restoredAt := r.Psql("select now()")
	if v := r.PsqlInt("select max(version) from schema_migrations"); v != 2 {
		t.Fatalf("schema at version %d after the restore, want 2", v)
	}
	start := time.Now()
	env.Run.Must(t, env.Kubectl, "rollout", "restart", "-n", r.Namespace, "deployment/"+r.Fullname())
	// the pod's status names the reason: the failed check's last log line, as its termination message
	framework.WaitUntil(t, "a restarted pod's status to name the schema its gate found", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, p := range r.AppPods(ctx, id) {
			if p.CreationTimestamp.Time.Before(start.Truncate(time.Second)) { // the API server's times are whole seconds
				continue
			}
			for _, cs := range p.Status.InitContainerStatuses {
				for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
					if cs.Name == "wait-for-migration" && term != nil && term.ExitCode != 0 &&
						strings.Contains(term.Message, "schema version 2 is older than this build's 3") {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	return r, id, restoredAt
}

func TestADatabaseRestoredFromADumpGetsItsMigrationAgainBeforeAnyPodStartsOnIt(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, databaseRestoredFromDumpScenario, env.Helm4)
	ctx := context.Background()
	r, id, restoredAt := restoredRelease(t, true)
	start := time.Now()
	r.MustDeploy(restoreValues("v3", true)) // the same values: only the database changed
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	res.Upgrades = 3
	if n := r.PsqlInt("select count(*) from schema_migrations where version = 3 and applied_at > '" + restoredAt + "'"); n != 1 {
		t.Errorf("version 3 was applied %d times after the restore, want once", n)
	}
	if n := r.PsqlInt("select count(*) from demo_migrate_runs where identity = '" + id + "'"); n != 1 {
		t.Errorf("%d runs of identity %s in the restored database, want 1 (the dump had none)", n, id)
	}
	log := jobLog(r, r.Fullname()+"-migrate")
	if !strings.Contains(log, "but the database does not have it") {
		t.Errorf("the upgrade's migration does not say why it ran a recorded identity again:\n%s", log)
	}
	// the pods from before the restart have no witness rows any more (the restore took them back): wait until
	// they are gone, and judge the pods the upgrade released
	framework.WaitUntil(t, "the pods from before the restore to be gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods := r.AppPods(ctx, id)
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
		}
		return len(pods) == 2, nil
	})
	r.AssertWitness(ctx, id)
	pods := r.AppPods(ctx, id)
	for _, p := range pods {
		if _, started := framework.AppStart(p); !started {
			t.Errorf("pod %s has not started after the migration ran again", p.Name)
		}
	}
	entry, ok := r.Records(ctx)[id]
	if !ok {
		t.Fatalf("identity %s is not recorded", id)
	}
	t.Logf("after the restore, the upgrade with the same values ran %s again (%d pods started); its record: %+v", id, len(pods), entry)
}

// The control: the same restore without migration.check. The app pods still wait (gate.mode command asks the
// database), but the next upgrade believes the record ("already recorded") and never migrates: it times out,
// and the schema stays at 2. The check is what repairs the database.
func TestWithoutTheCheckARestoredDatabaseIsNeverMigratedAgain(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	scenario(t, databaseRestoredFromDumpControlScenario, env.Helm4)
	r, _, _ := restoredRelease(t, false)
	if out, _, err := r.Deploy(restoreValues("v3", false), "--timeout", "75s"); err == nil {
		t.Fatalf("without the check the upgrade succeeded on the restored database:\n%s", out)
	}
	if log := jobLog(r, r.Fullname()+"-migrate"); !strings.Contains(log, "already recorded") {
		t.Errorf("the upgrade's migration did not skip the recorded identity; its log:\n%s", log)
	}
	if v := r.PsqlInt("select max(version) from schema_migrations"); v != 2 {
		t.Errorf("schema at version %d, want 2: without the check nothing migrates the restored database", v)
	}
}
