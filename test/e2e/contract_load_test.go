//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/test/framework"
)

// The demo's expand/contract pair under load: v7 writes records.body, v8 records.content; migration 8 (the
// expand) adds content and keeps both in step, v8's contract step (demo contract) drops body.
var expandContractScenarios = scenarios.DeclareEach(framework.Contract, "expand-contract-under-load",
	framework.In(framework.Matrix, "helm4-grace-120s"), framework.In(framework.Matrix, "helm3-rollback-first"),
	framework.In(framework.Matrix, "control-drop-before-rollout"))

// pairValues are the values of demo version tag with its contract step (contract), the app's pods keeping
// their process shutdown after SIGTERM inside a grace period of grace seconds; migrationEnv is the migration's
// own environment (what the operator says for that deploy).
func pairValues(tag string, contract bool, shutdown time.Duration, grace int, migrationEnv ...any) map[string]any {
	// a nil list would be `env: null` in the values file, which Helm reads as "remove the chart's default"
	migration := map[string]any{"env": append([]any{}, migrationEnv...)}
	if contract {
		migration["contract"] = map[string]any{"command": []any{"/demo", "contract"}}
	}
	return framework.Merge(framework.BaseValues(), map[string]any{
		"image":                         map[string]any{"tag": tag},
		"env":                           []any{framework.EnvVar("SHUTDOWN_DELAY", shutdown.String())},
		"terminationGracePeriodSeconds": grace,
		"migration":                     migration,
	})
}

// acceptDataLoss is what the operator says for the install of v7 on an empty database: migration 6 drops
// records.source.
var acceptDataLoss = framework.EnvVar("SCHEMA_ACCEPT_DATA_LOSS", "true")

// contractRowsOf returns the rows of demo_contracts of an app version: when each started and what it dropped.
func contractRowsOf(t *testing.T, r *framework.Release, appVersion int) (rows []contractRow, dropped []string) {
	t.Helper()
	for _, row := range contractRows(t, r) {
		if row.appVersion == appVersion {
			rows = append(rows, row)
		}
	}
	out := r.Psql(fmt.Sprintf("select array_to_string(dropped, ', ') from demo_contracts where app_version = %d order by id", appVersion))
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			dropped = append(dropped, line)
		}
	}
	return rows, dropped
}

// bodyColumns counts records.body (1 before the contract, 0 after).
func bodyColumns(r *framework.Release) int {
	return r.PsqlInt("select count(*) from information_schema.columns where table_name = 'records' and column_name = 'body'")
}

// lastRecordOf is when the last record a version's pods stored was written (database clock): the last request
// that version served (every version from 4 on tags its records "v<version>").
func lastRecordOf(r *framework.Release, version int) string {
	return r.Psql(fmt.Sprintf("select coalesce(to_char(max(r.created_at) at time zone 'UTC', 'HH24:MI:SS.MS'), '?') from records r join tags t on t.record_id = r.id where t.name = 'v%d'", version))
}

// TestAnExpandContractPairServesEveryRequestUnderLoad rolls the demo from v7 to v8 (records.body renamed
// records.content) with requests flowing through the Service all along, three releases side by side:
//
//   - helm4-grace-120s: helm upgrade --wait (Helm 4), the contract a post-upgrade hook; v7's pods have a 120 s
//     grace period and keep their process 100 s after SIGTERM. No request fails across the expand, the rollout,
//     the contract and a `helm rollback` to v7 after it (v7's pod refused by its gate, v8's serving); the
//     contract starts after every v7 pod's app exited, with no v7 session in the database, once, and drops body.
//   - helm3-rollback-first: job mode (Helm 3): v8 is rolled out, and `helm rollback` to v7 comes while v8's
//     contract Job waits for the v7 pods to leave. The contract never runs (nothing dropped, nothing recorded),
//     no request fails, v7 serves again; the next upgrade to v8 runs it once, after the v7 pods left.
//   - control-drop-before-rollout: the same drop run by the migration, before the rollout (the demo's
//     DEMO_CONTRACT_IN_MIGRATION: what a chart without a contract phase does). The v7 pods, still serving, fail
//     requests: the load sees a drop done too early.
//
// They take the whole cluster: their loads count every failed request (share_test.go).
func TestAnExpandContractPairServesEveryRequestUnderLoad(t *testing.T) {
	share(t, weightAll(), 240*time.Second)
	t.Run("helm4-grace-120s", func(t *testing.T) {
		t.Parallel()
		aPodWithALongGraceHoldsTheContractUnderLoad(t, scenario(t, expandContractScenarios["helm4-grace-120s"], env.Helm4))
	})
	t.Run("helm3-rollback-first", func(t *testing.T) {
		t.Parallel()
		aRollbackBeforeTheContractUnderLoadKeepsItFromRunning(t, scenario(t, expandContractScenarios["helm3-rollback-first"], env.Helm3))
	})
	t.Run("control-drop-before-rollout", func(t *testing.T) {
		t.Parallel()
		theDropBeforeTheRolloutFailsTheOldPodsRequests(t, scenario(t, expandContractScenarios["control-drop-before-rollout"], env.Helm3))
	})
}

// installV7UnderLoad installs v7 (contract or not) and starts the load once it serves.
func installV7UnderLoad(t *testing.T, res *scenarioResult, r *framework.Release, v7 map[string]any) *framework.Load {
	t.Helper()
	_, d := r.MustDeploy(v7)
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	return env.StartLoad(t, r.Namespace, r.Fullname())
}

// checkBothVersionsServed checks the load: no request failed, and both v7 and v8 answered some.
func checkBothVersionsServed(t *testing.T, res *scenarioResult, rep framework.LoadReport, what string) {
	t.Helper()
	recordLoad(res, rep)
	t.Logf("load %s: %d sent, %d failed, longest gap %d ms, slowest request %d ms, by app version %+v",
		what, rep.Sent, rep.Failed, rep.LongestGapMs, rep.SlowestMs, rep.ByVersion)
	rep.Check(t, what)
	for _, v := range []string{"7", "8"} {
		if rep.ByVersion[v].Sent == 0 {
			t.Errorf("no request of the load was answered by v%s %s: %+v", v, what, rep.ByVersion)
		}
	}
}

func aPodWithALongGraceHoldsTheContractUnderLoad(t *testing.T, res *scenarioResult) {
	ctx := context.Background()
	ns := env.NewNamespace(t, "pair-grace", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	const shutdown, grace = 100 * time.Second, 120
	load := installV7UnderLoad(t, res, r, pairValues("v7", true, shutdown, grace, acceptDataLoss))
	v7 := r.AppIdentity(ctx)
	old := r.AppPods(ctx, v7)
	ends := watchPodEnds(ctx, t, ns, "app.kubernetes.io/instance="+r.Name+",app.kubernetes.io/component=app")

	_, d := r.MustDeploy(pairValues("v8", true, shutdown, grace))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 1
	res.Numbers["upgradeWithContractSec"] = d.Seconds()
	id := r.AppIdentity(ctx)
	// a rollback after the contract, the load still on: v7's new pod is refused by its gate (it would fail every
	// request on the contracted schema), v8's pods keep serving
	rollbackPastTheContractIsRefused(t, r, env.Helm4, v7, id, 7)
	rep := load.Stop()
	checkBothVersionsServed(t, res, rep, "across v8's expand, rollout and contract, and a rollback to v7 after it")

	oldEnds, missing := ends.of(old)
	if len(missing) > 0 {
		t.Fatalf("the v7 pods %v were still there, or their app container's exit unseen, when helm upgrade with the contract returned (%s)", missing, d.Round(time.Second))
	}
	rows, dropped := contractRowsOf(t, r, 8)
	if len(rows) != 1 {
		t.Fatalf("v8's contract ran %d times, want once: %+v", len(rows), rows)
	}
	c := rows[0]
	if len(dropped) != 1 || !strings.Contains(dropped[0], "column records.body") || bodyColumns(r) != 0 {
		t.Errorf("v8's contract dropped %q and records.body is there %d times, want it dropped", dropped, bodyColumns(r))
	}
	if c.otherSessions != "" {
		t.Errorf("v8's contract started while the database had sessions of other versions: %s", c.otherSessions)
	}
	clock := func(at time.Time) string { return at.UTC().Format("15:04:05.000") }
	migrated, _ := r.MigrationFinished(id)
	expandStarted := r.Psql("select coalesce(to_char(min(started_at) at time zone 'UTC', 'HH24:MI:SS.MS'), '?') from demo_migrate_runs where identity = '" + id + "'")
	timeline := []string{fmt.Sprintf("v8's migration (expand) started %s, finished %s (database)", expandStarted, clock(migrated)),
		fmt.Sprintf("the last record a v7 pod stored: %s (database)", lastRecordOf(r, 7))}
	for name, end := range oldEnds {
		timeline = append(timeline, fmt.Sprintf("v7 pod %s (grace %ds): deletion %s (API server), app exited %s (kubelet, to the second), gone %s (watch)",
			name, grace, clock(end.deleted), end.finished.UTC().Format("15:04:05"), clock(end.gone)))
		if c.startedAt.Before(end.finished) {
			t.Errorf("v8's contract started at %s, before the v7 pod %s's app exited at %s", clock(c.startedAt), name, end.finished.UTC().Format("15:04:05"))
		}
		// the pod held its process through most of its grace period, and the contract waited for it
		if held := c.startedAt.Sub(end.deleted); held < shutdown {
			t.Errorf("v8's contract started %s after the v7 pod %s's deletion, less than the %s it kept its process", held.Round(time.Millisecond), name, shutdown)
		}
		res.Numbers["contractAfterDeletionSec"] = max(res.Numbers["contractAfterDeletionSec"], c.startedAt.Sub(end.deleted).Seconds())
	}
	contractEnd := "?"
	if jobs, err := env.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=contract,premigrate.io/identity=" + id}); err == nil {
		for _, j := range jobs.Items {
			if j.Status.CompletionTime != nil {
				contractEnd = j.Status.CompletionTime.UTC().Format("15:04:05") + " (API server, its Job complete, to the second)"
			}
		}
	}
	timeline = append(timeline, fmt.Sprintf("v8's contract started %s (database), dropped %s, ended %s; helm upgrade took %s",
		clock(c.startedAt), dropped, contractEnd, d.Round(time.Second)))
	t.Logf("timeline of the upgrade v7 -> v8 under load:\n  %s", strings.Join(timeline, "\n  "))
	if _, ok := record.ContractOf(r.Records(ctx)[id]); !ok {
		t.Errorf("the records hold no contract of v8")
	}
	r.AssertWitness(ctx, id)
}

func aRollbackBeforeTheContractUnderLoadKeepsItFromRunning(t *testing.T, res *scenarioResult) {
	ctx := context.Background()
	ns := env.NewNamespace(t, "pair-rollback", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	const shutdown, grace = 40 * time.Second, 60
	jobMode := map[string]any{
		"migration":  map[string]any{"mode": "job"},
		"postgresql": map[string]any{"auth": map[string]any{"password": "pair-pw"}},
	}
	values := func(tag string, migrationEnv ...any) map[string]any {
		return framework.Merge(pairValues(tag, true, shutdown, grace, migrationEnv...), jobMode)
	}
	load := installV7UnderLoad(t, res, r, values("v7", acceptDataLoss))
	v7 := r.AppIdentity(ctx)

	// v8 rolled out (helm's --wait does not wait for Jobs), its contract Job waiting for the v7 pods to leave;
	// then the rollback, while they still keep their process
	_, d := r.MustDeploy(values("v8"))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	v8 := r.AppIdentity(ctx)
	if v8 == v7 {
		t.Fatalf("the upgrade to v8 kept v7's identity %s", v7)
	}
	if n := len(contractRowsOfQuiet(t, r, 8)); n != 0 {
		t.Fatalf("v8's contract ran before the rollback could come (%d rows): the v7 pods keep their process %s, the rollback came %s after the upgrade began",
			n, shutdown, d.Round(time.Second))
	}
	start := time.Now()
	env.Run.Must(t, env.Helm3, "rollback", r.Name, "1", "-n", ns, "--wait", "--timeout", "4m")
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if id := r.AppIdentity(ctx); id != v7 {
		t.Fatalf("after the rollback the Deployment runs identity %s, want v7's %s", id, v7)
	}
	// v8's contract Job is gone with the rollback (or ends without running): wait for its pods to leave
	framework.WaitUntil(t, "v8's contract pods to leave after the rollback", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=contract,premigrate.io/identity=" + v8})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == "Pending" || p.Status.Phase == "Running" {
				return false, nil
			}
		}
		return true, nil
	})
	if rows := contractRowsOfQuiet(t, r, 8); len(rows) != 0 || bodyColumns(r) != 1 {
		t.Errorf("after the rollback before the contract: %d rows of v8's contract, records.body there %d times; want none and once", len(rows), bodyColumns(r))
	}
	if _, ok := record.ContractOf(r.Records(ctx)[v8]); ok {
		t.Errorf("the records hold a contract of v8, rolled back before it")
	}
	t.Logf("rolled back to v7 before v8's contract: nothing dropped, nothing recorded")

	// the next upgrade to v8 runs the contract once the v7 pods left
	v7Pods := r.AppPods(ctx, v7)
	ends := watchPodEnds(ctx, t, ns, "app.kubernetes.io/instance="+r.Name+",app.kubernetes.io/component=app")
	start = time.Now()
	r.MustDeploy(values("v8"))
	env.Run.Must(t, env.Kubectl, "wait", "-n", ns, "--for=condition=Complete", "--timeout=4m", "job", "-l", "app.kubernetes.io/component=contract,premigrate.io/identity="+v8)
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	res.Upgrades = 3
	checkBothVersionsServed(t, res, load.Stop(), "across v8's expand, its rollout, the rollback to v7, the upgrade to v8 again and its contract")
	rows, dropped := contractRowsOf(t, r, 8)
	if len(rows) != 1 || len(dropped) != 1 || !strings.Contains(dropped[0], "column records.body") || bodyColumns(r) != 0 {
		t.Fatalf("after the upgrade to v8 again: v8's contract ran %d times and dropped %q, records.body there %d times; want once, body dropped", len(rows), dropped, bodyColumns(r))
	}
	oldEnds, missing := ends.of(v7Pods)
	if len(missing) > 0 {
		t.Fatalf("the v7 pods %v were still there, or their exit unseen, when v8's contract Job completed", missing)
	}
	for name, end := range oldEnds {
		if rows[0].startedAt.Before(end.finished) {
			t.Errorf("v8's contract started at %s, before the v7 pod %s's app exited at %s", rows[0].startedAt.UTC().Format("15:04:05.000"), name, end.finished.UTC().Format("15:04:05"))
		}
	}
	if rows[0].otherSessions != "" {
		t.Errorf("v8's contract started while the database had sessions of other versions: %s", rows[0].otherSessions)
	}
	r.AssertWitness(ctx, v8)
	assertNoContractPodFailed(t, ns)
}

// contractRowsOfQuiet is contractRowsOf without what they dropped, and no rows while demo_contracts does not
// exist (no contract ran on this database yet).
func contractRowsOfQuiet(t *testing.T, r *framework.Release, appVersion int) []contractRow {
	t.Helper()
	if r.PsqlInt("select count(*) from pg_tables where tablename = 'demo_contracts'") == 0 {
		return nil
	}
	rows, _ := contractRowsOf(t, r, appVersion)
	return rows
}

func theDropBeforeTheRolloutFailsTheOldPodsRequests(t *testing.T, res *scenarioResult) {
	ns := env.NewNamespace(t, "pair-control", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	const shutdown, grace = 15 * time.Second, 30
	load := installV7UnderLoad(t, res, r, pairValues("v7", false, shutdown, grace, acceptDataLoss))
	_, d := r.MustDeploy(pairValues("v8", false, shutdown, grace, framework.EnvVar("DEMO_CONTRACT_IN_MIGRATION", "true")))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 1
	rep := load.Stop()
	recordLoad(res, rep)
	t.Logf("control: load %d sent, %d failed (%d on the schema), by app version %+v; first errors %v",
		rep.Sent, rep.Failed, rep.SchemaFailed, rep.ByVersion, rep.Errors)
	if bodyColumns(r) != 0 {
		t.Fatalf("control: the migration with DEMO_CONTRACT_IN_MIGRATION left records.body")
	}
	if rep.ByVersion["7"].Failed == 0 || rep.SchemaFailed == 0 {
		t.Errorf("control: with body dropped before the rollout no request of the v7 pods failed on the schema (%+v, %d on the schema): the load cannot tell a contract run too early",
			rep.ByVersion, rep.SchemaFailed)
	}
}
