//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	schedulingGateScenario       = scenarios.Declare(framework.Before, framework.CI, "gate-scheduling-gate")
	schedulingGateFailedScenario = scenarios.Declare(framework.Before, framework.CI, "gate-scheduling-gate-failed-migration")
)

// schedulingGateValues are the demo at app version v, its pods held by the scheduling gate.
func schedulingGateValues(v string, extra map[string]any) map[string]any {
	return framework.Merge(framework.BaseValues(), map[string]any{
		"image": map[string]any{"tag": v},
		"gate":  map[string]any{"waitIn": "schedulingGate"},
	}, extra)
}

// waitMode is one entry of the matrix of where the app pods wait, for the scenarios that run in both: the
// defaults (the wait-for-migration init container) and the scheduling gate (gate.waitIn schedulingGate).
type waitMode struct {
	name   string         // the subtest's name
	values map[string]any // merged into the scenario's values
}

// waitModes are the defaults and the scheduling gate.
func waitModes() []waitMode {
	return []waitMode{
		{name: "init-container"},
		{name: "scheduling-gate", values: map[string]any{"gate": map[string]any{"waitIn": "schedulingGate"}}},
	}
}

// waitModeScenarios keys a scenario's two declarations by wait mode: the defaults' (the ID it had before it ran in both)
// and the scheduling gate's (the ID with the suffix -scheduling-gate). Each file declares its own, so that the
// check of promises (verdict.CheckPromises) sees the promise of every declaration.
func waitModeScenarios(defaults, held framework.Scenario) map[string]framework.Scenario {
	return map[string]framework.Scenario{waitModes()[0].name: defaults, waitModes()[1].name: held}
}

// held says whether the mode holds the pods with the scheduling gate.
func (m waitMode) held() bool { return m.values != nil }

// start removes, with the scheduling gate, the release's cluster-scoped policy when the test ends.
func (m waitMode) start(t *testing.T, r *framework.Release) {
	t.Helper()
	if m.held() {
		removeUngateObjects(t, r)
	}
}

// assertPodsWaitAsTheModeSays checks the Deployment's pod template: with the scheduling gate, every new pod is
// created unschedulable (the gate) and runs no init container, so a pod that runs was released by gate ungate;
// with the defaults, the template carries the wait-for-migration init container and no gate.
func (m waitMode) assertPodsWaitAsTheModeSays(ctx context.Context, t *testing.T, r *framework.Release) {
	t.Helper()
	d, err := env.Client.AppsV1().Deployments(r.Namespace).Get(ctx, r.Fullname(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Deployment: %v", err)
	}
	spec := d.Spec.Template.Spec
	gated := len(spec.SchedulingGates) == 1 && spec.SchedulingGates[0].Name == "premigrate.io/migration"
	if m.held() != gated || m.held() != (len(spec.InitContainers) == 0) {
		t.Fatalf("%s: the pod template has scheduling gates %v and %d init containers", m.name, spec.SchedulingGates, len(spec.InitContainers))
	}
}

// removeUngateObjects deletes the release's cluster-scoped policy and binding of gate ungate when the test
// ends: deleting the test's namespace does not take them.
func removeUngateObjects(t *testing.T, r *framework.Release) string {
	t.Helper()
	name := "premigrate." + r.Namespace + "." + r.Fullname() + "-gate"
	t.Cleanup(func() {
		_, _ = env.Run.Run(t, env.Kubectl, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", name, "--ignore-not-found")
	})
	return name
}

// scheduledAt is when the scheduler placed p (its PodScheduled condition turned True), by the API server.
func scheduledAt(p corev1.Pod) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// TestPodsHeldByTheSchedulingGateRunNothingUntilTheirMigrationSucceeded installs and upgrades with gate.waitIn
// schedulingGate (Helm 4): the install's pods are created with its 20 s migration and wait unscheduled; an
// upgrade's (a hook) come after it; a scale-up's pod of a recorded identity is released too. Evidence the gate
// does not write: the witness (no app process before its migration), the scheduler's own PodScheduled time (not
// before the database finished the migration) and the pods' specs (no init container, no API token). Then what
// <fullname>-gate may do with its right to patch pods: the policy refuses any other change of an app pod, and
// the release of a pod that is not the release's; with the policy's binding deleted (the control) that release
// goes through.
func TestPodsHeldByTheSchedulingGateRunNothingUntilTheirMigrationSucceeded(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, schedulingGateScenario, env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "schedgate", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	policy := removeUngateObjects(t, r)
	steps := []map[string]any{
		schedulingGateValues("v2", map[string]any{"migration": map[string]any{"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "20s")}}}),
		schedulingGateValues("v3", nil),
		schedulingGateValues("v3", map[string]any{"replicaCount": 3}),
	}
	for i, s := range steps {
		_, d := r.MustDeploy(s)
		res.DurationsSec = append(res.DurationsSec, d.Seconds())
		if i > 0 {
			res.Upgrades++
		}
		id := r.AppIdentity(ctx)
		r.AssertWitness(ctx, id)
		done, _ := r.MigrationFinished(id)
		pods := r.AppPods(ctx, id)
		if want := []int{2, 2, 3}[i]; len(pods) != want {
			t.Errorf("step %d: %d app pods of identity %s, want %d", i+1, len(pods), id, want)
		}
		for _, p := range pods {
			if len(p.Spec.InitContainers) != 0 || len(p.Spec.Volumes) != 0 || len(p.Spec.SchedulingGates) != 0 {
				t.Errorf("step %d: pod %s has init containers %d, volumes %v, scheduling gates %v; want none of them once released",
					i+1, p.Name, len(p.Spec.InitContainers), p.Spec.Volumes, p.Spec.SchedulingGates)
			}
			at, ok := scheduledAt(p)
			if !ok || at.Before(done.Truncate(time.Second)) {
				t.Errorf("step %d: the scheduler placed pod %s at %v (scheduled: %v), before the database finished migration %s at %v",
					i+1, p.Name, at, ok, id, done)
			}
			if i == 0 && !p.CreationTimestamp.Before(&metav1.Time{Time: done.Add(-10 * time.Second)}) {
				t.Errorf("pod %s was created at %v, not while the 20 s install migration ran (finished %v): the test did not hold it",
					p.Name, p.CreationTimestamp, done)
			}
		}
	}

	// what <fullname>-gate may do with its right to patch pods
	gate := migrationClient(t, ns, r.Fullname()+"-gate")
	app := r.AppPods(ctx, r.AppIdentity(ctx))[0]
	_, err := gate.CoreV1().Pods(ns).Patch(ctx, app.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"premigrate.io/identity":"forged"}}}`), metav1.PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "may only remove the scheduling gate") {
		t.Errorf("the gate's ServiceAccount changing an app pod's annotation: %v, want a refusal by the policy", err)
	}
	stranger := heldStranger(ctx, t, ns)
	ungate := []byte(`[{"op":"test","path":"/spec/schedulingGates/0/name","value":"premigrate.io/migration"},{"op":"remove","path":"/spec/schedulingGates/0"}]`)
	_, err = gate.CoreV1().Pods(ns).Patch(ctx, stranger, types.JSONPatchType, ungate, metav1.PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "may release only the pods of its release") {
		t.Errorf("the gate's ServiceAccount releasing a pod that is not the release's: %v, want a refusal by the policy", err)
	}
	// the control: without the policy's binding the same release goes through (RBAC alone cannot tell the pods apart)
	env.Run.Must(t, env.Kubectl, "delete", "validatingadmissionpolicybinding", policy)
	framework.WaitUntil(t, "the release of the stranger pod to go through without the policy", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := gate.CoreV1().Pods(ns).Patch(ctx, stranger, types.JSONPatchType, ungate, metav1.PatchOptions{})
		return err == nil, nil
	})
}

// heldStranger creates a pod in ns that carries premigrate's scheduling gate but is not the release's (no
// premigrate.io/gated-by label), and returns its name.
func heldStranger(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	no, yes := false, true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stranger", Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulingGates:              []corev1.PodSchedulingGate{{Name: "premigrate.io/migration"}},
			AutomountServiceAccountToken: &no,
			RestartPolicy:                corev1.RestartPolicyNever,
			SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "gate", Image: "ghcr.io/premigrate/gate:" + env.AppVersion, Args: []string{"version"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a held pod that is not the release's: %v", err)
	}
	return p.Name
}

// TestAFailedMigrationLeavesThePodsHeldByTheSchedulingGatePendingWithAnEventNamingIt installs with a migration
// that fails (no retries): the app pods stay Pending and unscheduled, start no container (by the API server)
// and no app process (by the witness), and each carries a Warning Event that names the migration and its Job.
func TestAFailedMigrationLeavesThePodsHeldByTheSchedulingGatePendingWithAnEventNamingIt(t *testing.T) {
	share(t, weightOne, 75*time.Second)
	scenario(t, schedulingGateFailedScenario, env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "schedgatefail", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	removeUngateObjects(t, r)
	values := schedulingGateValues("v2", map[string]any{
		"migration": map[string]any{"backoffLimit": 0, "env": []any{framework.EnvVar("DEMO_FAIL_MIGRATION", "2")}},
	})
	// no --wait: the pods could only wait
	env.Run.Must(t, r.Helm, "upgrade", "--install", r.Name, env.Chart, "-n", ns, "--values", r.ValuesFile(values))
	id := r.AppIdentity(ctx)
	job := appMigrationJob(ctx, r)
	framework.WaitUntil(t, "an Event naming the failed migration on each app pod", 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods := r.AppPods(ctx, id)
		if len(pods) == 0 {
			return false, nil
		}
		for _, p := range pods {
			evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name + ",reason=MigrationFailed"})
			if err != nil || len(evs.Items) == 0 {
				return false, err
			}
			if m := evs.Items[0].Message; !strings.Contains(m, fmt.Sprintf("migration %s (Job %s) failed", id, job)) {
				return false, fmt.Errorf("pod %s's Event says %q, not which migration failed", p.Name, m)
			}
		}
		return true, nil
	})
	// 15 s more: no pod of the identity starts a container (the API server) or the app (the witness's table,
	// which the failed migration may not have created)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		for _, p := range r.AppPods(ctx, id) {
			if _, started := framework.AppStart(p); started {
				t.Fatalf("pod %s started its app container although its migration failed", p.Name)
			}
		}
	}
	if r.PsqlInt("select count(*) from pg_tables where tablename = 'demo_pod_starts'") > 0 {
		if n := r.PsqlInt(fmt.Sprintf("select count(*) from demo_pod_starts where identity = '%s'", id)); n != 0 {
			t.Errorf("the app recorded %d starts of identity %s, whose migration failed", n, id)
		}
	}
	for _, p := range r.AppPods(ctx, id) {
		if _, ok := scheduledAt(p); ok || len(p.Status.ContainerStatuses) != 0 || p.Status.Phase != corev1.PodPending {
			t.Errorf("pod %s: phase %s, scheduled %v, %d container statuses; want Pending, unscheduled, none",
				p.Name, p.Status.Phase, ok, len(p.Status.ContainerStatuses))
		}
	}
}
