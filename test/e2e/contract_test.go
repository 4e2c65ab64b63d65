//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/test/framework"
)

var contractAfterOldPodsScenario = scenarios.Declare(framework.Contract, framework.CI, "contract-after-old-pods")

// contractShutdownDelay is how long an old pod keeps its process (and its database sessions) after SIGTERM: the
// demo's SHUTDOWN_DELAY, inside a grace period longer than it. Helm's --wait ends long before: terminating pods
// no longer count as replicas.
const contractShutdownDelay = 40 * time.Second

// contractRow is a row of demo_contracts: the contract step as the database saw it start.
type contractRow struct {
	appVersion    int
	identity      string
	startedAt     time.Time
	otherSessions string
}

func contractRows(t *testing.T, r *framework.Release) []contractRow {
	t.Helper()
	out := r.Psql(`select app_version || '|' || coalesce(identity, '') || '|' || (extract(epoch from started_at) * 1000)::bigint || '|' || array_to_string(other_sessions, ', ') from demo_contracts order by id`)
	var rows []contractRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, "|", 4)
		if len(f) != 4 {
			continue
		}
		v, _ := strconv.Atoi(f[0])
		ms, _ := strconv.ParseInt(f[2], 10, 64)
		rows = append(rows, contractRow{appVersion: v, identity: f[1], startedAt: time.UnixMilli(ms), otherSessions: f[3]})
	}
	return rows
}

// podEnd is how one app pod ended, from the API server: when its deletion was asked (deletionTimestamp less the
// grace period, to the second), when
// its app container exited (finishedAt, as the kubelet reported it, to the second) and when the watch saw the
// object go.
type podEnd struct {
	deleted, finished, gone time.Time
}

// podEnds records how each pod of the release's app ended, by name (a watch from now on).
type podEnds struct {
	mu   sync.Mutex
	ends map[string]*podEnd
}

func watchPodEnds(ctx context.Context, t *testing.T, ns, selector string) *podEnds {
	t.Helper()
	w, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("watching the app's pods: %v", err)
	}
	e := &podEnds{ends: map[string]*podEnd{}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			e.mu.Lock()
			end := e.ends[p.Name]
			if end == nil {
				end = &podEnd{}
				e.ends[p.Name] = end
			}
			if p.DeletionTimestamp != nil && end.deleted.IsZero() {
				// the deletionTimestamp of a graceful deletion is when the grace period ends: the request is
				// that much earlier
				end.deleted = p.DeletionTimestamp.Time
				if g := p.DeletionGracePeriodSeconds; g != nil {
					end.deleted = end.deleted.Add(-time.Duration(*g) * time.Second)
				}
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.Name == "app" && c.State.Terminated != nil {
					end.finished = c.State.Terminated.FinishedAt.Time
				}
			}
			if ev.Type == watch.Deleted {
				end.gone = time.Now()
			}
			e.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return e
}

// of returns how the pods ended, and the names of those not gone yet or whose app container's exit was not seen.
func (e *podEnds) of(pods []corev1.Pod) (ends map[string]podEnd, missing []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ends = map[string]podEnd{}
	for _, p := range pods {
		end := e.ends[p.Name]
		if end == nil || end.gone.IsZero() || end.finished.IsZero() {
			missing = append(missing, p.Name)
			continue
		}
		ends[p.Name] = *end
	}
	return ends, missing
}

// contractValues are the values of demo version tag, with the demo's contract step when contract is set; the
// app's pods keep their process contractShutdownDelay after SIGTERM.
func contractValues(tag string, contract bool) map[string]any {
	v := framework.Merge(framework.BaseValues(), map[string]any{
		"image":                         map[string]any{"tag": tag},
		"env":                           []any{framework.EnvVar("SHUTDOWN_DELAY", contractShutdownDelay.String())},
		"terminationGracePeriodSeconds": int(contractShutdownDelay.Seconds()) + 20,
	})
	if contract {
		v = framework.Merge(v, map[string]any{"migration": map[string]any{"contract": map[string]any{"command": []any{"/demo", "contract"}}}})
	}
	return v
}

// upgradeWithContract installs v1 and upgrades it to v2 with deploy (which returns once the tool is done), both
// with the demo's contract step, and checks from the API server and the database that v2's contract started
// after every v1 pod's app exited, with no session of another version in the database, once, and that the
// records hold it. It returns the identities of v1 and v2 and the rows of demo_contracts.
func upgradeWithContract(t *testing.T, res *scenarioResult, r *framework.Release, deploy func(map[string]any) time.Duration) (v1, id string, rows []contractRow) {
	t.Helper()
	ctx := context.Background()
	d := deploy(contractValues("v1", true))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	v1 = r.AppIdentity(ctx)
	old := r.AppPods(ctx, v1)
	if len(old) != 2 {
		t.Fatalf("v1 runs %d pods, want 2", len(old))
	}
	ends := watchPodEnds(ctx, t, r.Namespace, "app.kubernetes.io/instance="+r.Name+",app.kubernetes.io/component=app")

	d = deploy(contractValues("v2", true))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Numbers["upgradeWithContractSec"] = d.Seconds()
	id = r.AppIdentity(ctx)
	oldEnds, missing := ends.of(old)
	if len(missing) > 0 {
		t.Fatalf("the v1 pods %v were still there, or their app container's exit unseen, when the upgrade with the contract ended (%s)", missing, d.Round(time.Second))
	}
	rows = contractRows(t, r)
	var v2 *contractRow
	for i := range rows {
		if rows[i].appVersion == 2 {
			if v2 != nil {
				t.Errorf("the contract of v2 ran twice: %+v", rows)
			}
			v2 = &rows[i]
		}
	}
	if v2 == nil {
		t.Fatalf("the contract of v2 never ran: demo_contracts %+v", rows)
	}
	migrated, _ := r.MigrationFinished(id)
	clock := func(at time.Time) string { return at.UTC().Format("15:04:05.000") }
	expandStarted := r.Psql("select coalesce(to_char(min(started_at) at time zone 'UTC', 'HH24:MI:SS.MS'), '?') from demo_migrate_runs where identity = '" + id + "'")
	timeline := []string{fmt.Sprintf("v2's migration (expand) started %s, finished %s (database)", expandStarted, clock(migrated))}
	for name, end := range oldEnds {
		timeline = append(timeline, fmt.Sprintf("v1 pod %s: deletion %s (API server), app exited %s (kubelet, to the second), gone %s (watch)",
			name, clock(end.deleted), end.finished.UTC().Format("15:04:05"), clock(end.gone)))
		// the kubelet reports the exit to the second, rounded down: the exit was at or after it
		if v2.startedAt.Before(end.finished) {
			t.Errorf("the contract started at %s, before the v1 pod %s's app exited at %s", clock(v2.startedAt), name, end.finished.UTC().Format("15:04:05"))
		}
		res.Numbers["contractAfterDeletionSec"] = max(res.Numbers["contractAfterDeletionSec"], v2.startedAt.Sub(end.deleted).Seconds())
	}
	contractEnd := "?"
	if jobs, err := env.Client.BatchV1().Jobs(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=contract,premigrate.io/identity=" + id}); err == nil {
		for _, j := range jobs.Items {
			if j.Status.CompletionTime != nil {
				contractEnd = j.Status.CompletionTime.UTC().Format("15:04:05") + " (API server, its Job complete, to the second)"
			}
		}
	}
	timeline = append(timeline, fmt.Sprintf("the contract started %s (database), ended %s; the deploy took %s", clock(v2.startedAt), contractEnd, d.Round(time.Second)))
	t.Logf("timeline of the upgrade v1 -> v2:\n  %s", strings.Join(timeline, "\n  "))
	if v2.otherSessions != "" {
		t.Errorf("the contract of v2 started while the database had sessions of other versions: %s", v2.otherSessions)
	}
	if v2.identity != id {
		t.Errorf("the contract ran for identity %q, the Deployment runs %q", v2.identity, id)
	}
	value := r.Records(ctx)[id]
	if _, ok := record.ContractOf(value); !ok {
		t.Errorf("the records hold no contract step for %s: %q", id, value)
	}
	return v1, id, rows
}

// TestTheContractStepRunsOnlyOnceNoOlderPodIsLeft upgrades v1 -> v2 with a contract step (the demo's, which
// records in the database when it started and which sessions of other app versions the database had then),
// the old pods keeping their process 40 s after SIGTERM (upgradeWithContract). The same upgrade again does not
// run it again; a rollback to v1 after the contract has its pod refused by the gate, naming both identities,
// while v2's pods serve. Control, the same upgrade v2 -> v3 with the contract as a plain post-upgrade hook (what
// charts do today): the database sees the v2 sessions at its start. Last, v4 declaring that its expand needs the
// previous version's contract is refused, v3 having run none of premigrate's, and Helm 4 prints why.
func TestTheContractStepRunsOnlyOnceNoOlderPodIsLeft(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, contractAfterOldPodsScenario, env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "contract", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	v1, id, rows := upgradeWithContract(t, res, r, func(v map[string]any) time.Duration {
		_, d := r.MustDeploy(v)
		return d
	})
	values := contractValues
	// the same upgrade again: the post-upgrade hook runs gate contract for the same identity, which finds its
	// contract recorded and runs nothing
	_, d := r.MustDeploy(values("v2", true))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	if n := len(contractRows(t, r)); n != len(rows) {
		t.Errorf("the same upgrade again ran the contract again: %d rows in demo_contracts, %d before", n, len(rows))
	}
	r.AssertWitness(ctx, id)

	// a rollback after the contract: v1's code would run on the schema v2's contract changed. The gate refuses its
	// new pod, naming both identities, and v2's pods keep serving; no v1 process reaches the database.
	rollbackPastTheContractIsRefused(t, r, env.Helm4, v1, id, 1)

	// control: the contract as a plain post-upgrade hook, without the gate
	control := framework.Merge(values("v3", false), map[string]any{"extraObjects": []any{fmt.Sprintf(contractHookControl, r.Fullname())}})
	_, d = r.MustDeploy(control)
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 3
	var v3 *contractRow
	for _, row := range contractRows(t, r) {
		if row.appVersion == 3 {
			v3 = &row
		}
	}
	switch {
	case v3 == nil:
		t.Errorf("control: the plain post-upgrade hook's contract did not run")
	case !strings.Contains(v3.otherSessions, "demo serve v2 "):
		t.Errorf("control: the plain post-upgrade hook's contract saw no v2 session (%q): the database witness cannot tell a contract run too early", v3.otherSessions)
	default:
		t.Logf("control: the plain post-upgrade hook's contract started at %s; the database saw: %s", v3.startedAt.UTC().Format("15:04:05.000"), v3.otherSessions)
	}

	// v3's contract ran outside premigrate (the control's plain hook): premigrate recorded none. v4, declaring that
	// its expand needs the previous version's contract, is refused before anything changed, and Helm 4 prints
	// the check's log with its error (hook-output-log-policy).
	out := anExpandThatRequiresAPendingContractIsRefused(t, res, r, r.AppIdentity(ctx))
	res.Upgrades = 4
	if !strings.Contains(out, "refusing the migration of") {
		t.Errorf("helm upgrade (Helm 4) does not print the check's log with its error:\n%s", out)
	}
}

// rollbackPastTheContractIsRefused rolls the release back to revision 1 (identity old, deployed before the
// contracted identity id, app version oldVersion) with helm, and checks that the gate refuses the new pod of
// old, naming both identities, that id's two pods stay Ready and that no process of old reaches the database.
func rollbackPastTheContractIsRefused(t *testing.T, r *framework.Release, helm, old, id string, oldVersion int) {
	t.Helper()
	ctx := context.Background()
	since := r.Psql("select clock_timestamp()")
	env.Run.Must(t, helm, "rollback", r.Name, "1", "-n", r.Namespace)
	var refused corev1.Pod
	framework.WaitUntil(t, "the gate to refuse the rolled-back pod", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, p := range r.AppPods(ctx, old) {
			for _, c := range p.Status.InitContainerStatuses {
				for _, st := range []corev1.ContainerState{c.State, c.LastTerminationState} {
					if c.Name == "wait-for-migration" && st.Terminated != nil && st.Terminated.ExitCode == 1 {
						refused = p
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	// The gate says why on every start of the init container; the kubelet keeps the log of its last exited
	// instance only, and a restart may remove the one just seen: read the last and the current until one says it.
	want := "identity " + id + ", deployed after it, contracted the schema"
	var logs []string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(3 * time.Second) {
		logs = logs[:0]
		for _, previous := range []bool{true, false} {
			args := []string{"logs", "-n", r.Namespace, refused.Name, "-c", "wait-for-migration"}
			if previous {
				args = append(args, "--previous")
			}
			out, _ := env.Run.Run(t, env.Kubectl, args...)
			logs = append(logs, out)
		}
		if said := strings.Join(logs, "\n"); strings.Contains(said, want) && strings.Contains(said, old) || time.Now().After(deadline) {
			break
		}
	}
	if said := strings.Join(logs, "\n"); !strings.Contains(said, want) || !strings.Contains(said, old) {
		t.Errorf("the refused pod's gate does not say %q naming %s (its last and current logs):\n%s", want, old, said)
	}
	ready := 0
	for _, p := range r.AppPods(ctx, id) {
		if p.DeletionTimestamp == nil && podReady(p) {
			ready++
		}
	}
	if ready != 2 {
		t.Errorf("%d pods of the contracted identity Ready while the rollback's pod is refused, want 2", ready)
	}
	if n := r.PsqlInt(fmt.Sprintf("select count(*) from demo_pod_starts where app_version = %d and connected_at > '%s'", oldVersion, since)); n != 0 {
		t.Errorf("%d v%d processes reached the database after the rollback past the contract", n, oldVersion)
	}
}

// contractHookControl is the contract as charts run it today: a post-upgrade hook Job that runs the command
// once Helm's --wait is satisfied. %[1]s: the chart's fullname.
const contractHookControl = `apiVersion: batch/v1
kind: Job
metadata:
  name: %[1]s-contract-control
  annotations:
    helm.sh/hook: post-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: contract
          image: ghcr.io/premigrate/demo:v3
          imagePullPolicy: Never
          args: [contract]
          env:
            - name: DATABASE_URL
              valueFrom:
                secretKeyRef:
                  name: %[1]s-postgresql
                  key: url
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
`

var (
	contractHelm3Scenario = scenarios.Declare(framework.Contract, framework.CI, "contract-after-old-pods-helm3")
	contractApplyScenario = scenarios.Declare(framework.Contract, framework.CI, "contract-kubectl-apply")
)

// The same upgrade with Helm 3 (its own --wait, the post-upgrade hook), then a contract that fails
// (aFailedContractIsReportedAndRunsAgain), and in job mode with `helm template |
// kubectl apply`, where nothing waits: the contract Job starts with the apply, beside the migration, and waits
// for the rollout itself, with no pod failed.
func TestTheContractStepWaitsForTheOldPodsWithHelm3AndWithKubectlApply(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	t.Run("helm3", sharing(weightOne, 220*time.Second, func(t *testing.T) {
		res := scenario(t, contractHelm3Scenario, env.Helm3)
		ns := env.NewNamespace(t, "contract", restricted)
		r := env.NewRelease(t, ns, "app", env.Helm3)
		_, id, _ := upgradeWithContract(t, res, r, func(v map[string]any) time.Duration {
			_, d := r.MustDeploy(v)
			return d
		})
		r.AssertWitness(context.Background(), id)
		aFailedContractIsReportedAndRunsAgain(t, res, r)
		res.Upgrades = 5
		contractJobsAreBoundedAndLeaveWithTheRelease(t, r)
	}))
	t.Run("kubectl-apply", sharing(weightOne, 100*time.Second, func(t *testing.T) {
		res := scenario(t, contractApplyScenario, env.Kubectl)
		ctx := context.Background()
		ns := env.NewNamespace(t, "contract", restricted)
		r := env.NewRelease(t, ns, "app", env.Helm3)
		_, id, _ := upgradeWithContract(t, res, r, func(v map[string]any) time.Duration {
			start := time.Now()
			r.Apply(r.Template(framework.Merge(v, map[string]any{
				"migration":  map[string]any{"mode": "job"},
				"postgresql": map[string]any{"auth": map[string]any{"password": "contract-pw"}},
			})))
			r.RolledOut(4 * time.Minute)
			// the apply returned at once; the contract Job of the identity it applied ends when its rollout did
			env.Run.Must(t, env.Kubectl, "wait", "-n", ns, "--for=condition=Complete", "job", "--timeout=4m",
				"-l", "app.kubernetes.io/component=contract,premigrate.io/identity="+r.AppIdentity(ctx))
			return time.Since(start)
		})
		res.Upgrades = 1
		r.AssertWitness(ctx, id)
		assertNoContractPodFailed(t, ns)
	}))
}

// assertNoContractPodFailed checks that no contract Job of the namespace had a pod fail: in job mode a contract
// Job starts with its apply, beside the migration, and must wait for the rollout, not be refused because the
// migration is not recorded yet (a failed pod, retried while the Job's backoffLimit lasts).
func assertNoContractPodFailed(t *testing.T, ns string) {
	t.Helper()
	jobs, err := env.Client.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=contract"})
	if err != nil {
		t.Fatalf("listing the contract Jobs: %v", err)
	}
	if len(jobs.Items) == 0 {
		t.Errorf("no contract Job in %s", ns)
	}
	for _, j := range jobs.Items {
		if j.Status.Failed > 0 {
			t.Errorf("contract Job %s had %d failed pods (refused before its migration was recorded?)", j.Name, j.Status.Failed)
		}
	}
}

// aFailedContractIsReportedAndRunsAgain upgrades the release (at v2, contracted) to v3 with a contract command
// that exits 2 (once: backoffLimit 0): the upgrade fails and says the post-upgrade hook failed, the Deployment
// has a Warning ContractFailed Event naming v3's identity, v3's two pods keep serving, nothing is recorded and
// demo_contracts has no row of v3. While v3's contract has not run, an upgrade to v4 that declares its expand
// must follow it (migration.requirePreviousContract) is refused before anything changed
// (anExpandThatRequiresAPendingContractIsRefused). The next upgrade, the same version with the contract fixed (a
// new contract Job, the same identity), runs it once the rollout facts hold: recorded, one row of v3, a
// ContractCompleted Event; then v4, declared the same, runs after it (theExpandThatRequiredTheContractRunsAfterIt).
func aFailedContractIsReportedAndRunsAgain(t *testing.T, res *scenarioResult, r *framework.Release) {
	t.Helper()
	ctx := context.Background()
	failing := framework.Merge(contractValues("v3", true), map[string]any{"migration": map[string]any{
		"backoffLimit": 0,
		"contract":     map[string]any{"command": []any{"/demo", "contract", "--fail-on-purpose"}},
	}})
	out, d, err := r.Deploy(failing)
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	if err == nil {
		t.Fatalf("the upgrade whose contract fails succeeded:\n%s", out)
	}
	if !strings.Contains(out, "post-upgrade") {
		t.Errorf("the failed upgrade does not say its post-upgrade hook failed:\n%s", out)
	}
	id := r.AppIdentity(ctx)
	reasons := func() map[string][]string {
		evs, err := env.Client.CoreV1().Events(r.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Deployment,involvedObject.name=" + r.Fullname()})
		if err != nil {
			t.Fatalf("listing the Deployment's Events: %v", err)
		}
		by := map[string][]string{}
		for _, ev := range evs.Items {
			if strings.HasPrefix(ev.Reason, "Contract") && strings.Contains(ev.Message, id) {
				by[ev.Reason] = append(by[ev.Reason], ev.Type+": "+ev.Message)
			}
		}
		return by
	}
	if failed := reasons()["ContractFailed"]; len(failed) != 1 || !strings.HasPrefix(failed[0], "Warning: ") {
		t.Errorf("want one Warning ContractFailed Event on the Deployment naming %s, got %q", id, failed)
	} else {
		t.Logf("kubectl describe deployment shows: ContractFailed %s", failed[0])
	}
	ready := 0
	for _, p := range r.AppPods(ctx, id) {
		if p.DeletionTimestamp == nil && podReady(p) {
			ready++
		}
	}
	if ready != 2 {
		t.Errorf("%d v3 pods Ready after its contract failed, want 2: a failed contract must not touch them", ready)
	}
	if _, ok := record.ContractOf(r.Records(ctx)[id]); ok {
		t.Errorf("the failed contract of %s is recorded", id)
	}
	v3Rows := func() int {
		n := 0
		for _, row := range contractRows(t, r) {
			if row.appVersion == 3 {
				n++
			}
		}
		return n
	}
	if n := v3Rows(); n != 0 {
		t.Errorf("demo_contracts has %d rows of v3 after its contract failed before the command's work", n)
	}
	anExpandThatRequiresAPendingContractIsRefused(t, res, r, id)

	fixed := framework.Merge(contractValues("v3", true), map[string]any{"migration": map[string]any{"backoffLimit": 0}})
	_, d = r.MustDeploy(fixed)
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	if got := r.AppIdentity(ctx); got != id {
		t.Fatalf("fixing the contract moved the Deployment from identity %s to %s", id, got)
	}
	if _, ok := record.ContractOf(r.Records(ctx)[id]); !ok {
		t.Errorf("the next upgrade did not run and record the contract of %s", id)
	}
	if n := v3Rows(); n != 1 {
		t.Errorf("demo_contracts has %d rows of v3 after the next upgrade, want 1", n)
	}
	if done := reasons()["ContractCompleted"]; len(done) != 1 {
		t.Errorf("want one ContractCompleted Event naming %s after the next upgrade, got %q", id, done)
	}
	theExpandThatRequiredTheContractRunsAfterIt(t, res, r, id)
}

// contractJobsAreBoundedAndLeaveWithTheRelease checks, after the release's upgrades with a contract step (hook
// mode), that one contract Job is left in the namespace, owned by the records ConfigMap, and that `helm
// uninstall` (which leaves hooks behind) leaves none: a contract Job per identity, never removed, would end under
// a count/jobs.batch quota with the migration's hook unable to be created.
func contractJobsAreBoundedAndLeaveWithTheRelease(t *testing.T, r *framework.Release) {
	t.Helper()
	ctx := context.Background()
	contractJobs := func() []batchv1.Job {
		jobs, err := env.Client.BatchV1().Jobs(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=contract"})
		if err != nil {
			t.Fatalf("listing the contract Jobs: %v", err)
		}
		return jobs.Items
	}
	jobs := contractJobs()
	if len(jobs) != 1 {
		names := make([]string, len(jobs))
		for i, j := range jobs {
			names[i] = j.Name
		}
		t.Errorf("after the upgrades %d contract Jobs are left (%v), want the last one only", len(jobs), names)
	}
	for _, j := range jobs {
		if len(j.OwnerReferences) != 1 || j.OwnerReferences[0].Kind != "ConfigMap" || j.OwnerReferences[0].Name != r.AnchorName() {
			t.Errorf("contract Job %s is owned by %+v, want the records ConfigMap %s", j.Name, j.OwnerReferences, r.AnchorName())
		}
	}
	env.Run.Must(t, r.Helm, "uninstall", r.Name, "-n", r.Namespace, "--wait", "--timeout", "2m")
	framework.WaitUntil(t, "the contract Jobs to go with the release", time.Minute, func(context.Context) (bool, error) {
		return len(contractJobs()) == 0, nil
	})
}
