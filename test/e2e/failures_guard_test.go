//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	guardScenarios       = scenarios.DeclareEach(framework.NeverSkipped, "guard-refuses-unmigrated-updates", framework.In(framework.Matrix, "helm3"), framework.In(framework.CI, "helm4"))
	guardControlScenario = scenarios.Declare(framework.NeverSkipped, framework.Matrix, "guard-refuses-unmigrated-updates-control")
)

// guardValues are the demo at app version v with the guard on or off.
func guardValues(v string, on bool) map[string]any {
	return framework.Merge(framework.BaseValues(), map[string]any{
		"image":     map[string]any{"tag": v},
		"migration": map[string]any{"guard": map[string]any{"enabled": on}},
	})
}

// removeGuardObjects deletes the release's cluster-scoped policy and binding when the test ends: deleting the
// test's namespace does not take them.
func removeGuardObjects(t *testing.T, r *framework.Release) {
	t.Helper()
	name := "premigrate." + r.Namespace + "." + r.Fullname()
	t.Cleanup(func() {
		_, _ = env.Run.Run(t, env.Kubectl, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", name, "--ignore-not-found")
	})
}

// noHooksUpgrade is `helm upgrade --no-hooks` to values, without --wait (its pods could only wait in the gate).
func noHooksUpgrade(r *framework.Release, values map[string]any) (string, error) {
	out, _, err := r.RunDeploy([]string{"upgrade", r.Name, env.Chart, "-n", r.Namespace, "--no-hooks", "--values", r.ValuesFile(values)})
	return out, err
}

// appImage is the image of the app Deployment's first container.
func appImage(ctx context.Context, t *testing.T, r *framework.Release) string {
	t.Helper()
	d, err := env.Client.AppsV1().Deployments(r.Namespace).Get(ctx, r.Fullname(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the app Deployment: %v", err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// TestTheGuardRefusesUpdatesNoMigrationRanForAndLetsEveryOtherOneThrough turns migration.guard on and tries
// the two ways around a migration: `helm upgrade --no-hooks` (a new identity whose pre-upgrade hook never ran)
// and `kubectl set image` (another image under an identity migrated for the old one). The API server refuses
// both, naming the identity, and changes nothing: the Deployment keeps its identity and image, no Job of the new
// identity exists. What must pass passes: a restart, the upgrade with its hooks, a rollback. The
// witness sees no app process before its migration. Then the guard off and on again, which froze the first
// version's records (a ConfigMap parameter): the next upgrade with its hooks passes, --no-hooks is still refused,
// and the migration's ServiceAccount, which annotates the Deployment for the guard, may change nothing else.
// Helm 3 (client-side apply) and Helm 4 (server-side apply).
func TestTheGuardRefusesUpdatesNoMigrationRanForAndLetsEveryOtherOneThrough(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range []struct{ name, bin string }{{"helm3", env.Helm3}, {"helm4", env.Helm4}} {
		t.Run(h.name, sharing(weightOne, 150*time.Second, func(t *testing.T) {
			res := scenario(t, guardScenarios[h.name], h.bin)
			ctx := context.Background()
			ns := env.NewNamespace(t, "guard-"+h.name, restricted)
			r := env.NewRelease(t, ns, "app", h.bin)
			removeGuardObjects(t, r)
			r.MustDeploy(guardValues("v1", true))
			_, d := r.MustDeploy(guardValues("v2", true))
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades++
			id := r.AppIdentity(ctx)
			image := appImage(ctx, t, r)

			// helm upgrade --no-hooks: the new identity's hook never runs
			out, err := noHooksUpgrade(r, guardValues("v3", true))
			if err == nil || !strings.Contains(out+err.Error(), "whose migration has not run") {
				t.Fatalf("helm upgrade --no-hooks to v3 was not refused by the guard (err %v):\n%s", err, out)
			}
			if got := r.AppIdentity(ctx); got != id {
				t.Fatalf("the refused upgrade changed the Deployment's identity from %s to %s", id, got)
			}
			res.Numbers["refusedNoHooks"] = 1

			// kubectl set image: another image under the identity migrated for v2
			out, err = env.Run.Run(t, env.Kubectl, "set", "image", "-n", ns, "deployment/"+r.Fullname(), "app=ghcr.io/premigrate/demo:v3")
			if err == nil || !strings.Contains(out+err.Error(), "which was migrated for that image") {
				t.Fatalf("kubectl set image was not refused by the guard (err %v):\n%s", err, out)
			}
			if got := appImage(ctx, t, r); got != image {
				t.Fatalf("the refused kubectl set image changed the app's image from %s to %s", image, got)
			}
			res.Numbers["refusedSetImage"] = 1

			// what must pass: a restart (a new pod template, the same identity), the upgrade with its hooks, a
			// rollback
			env.Run.Must(t, env.Kubectl, "rollout", "restart", "-n", ns, "deployment/"+r.Fullname())
			r.RolledOut(3 * time.Minute)
			_, d = r.MustDeploy(guardValues("v3", true))
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades++
			v3 := r.AppIdentity(ctx)
			if v3 == id {
				t.Fatalf("the upgrade to v3 kept the identity %s", id)
			}
			r.AssertWitness(ctx, v3)
			if j := r.MigrationJob(ctx, v3); j == nil || j.Status.Succeeded != 1 {
				t.Fatalf("no succeeded migration Job of identity %s after the upgrade with its hooks", v3)
			}
			// revision 2 is v2's (the refused upgrade left a failed revision 3, whose identity is v3's)
			env.Run.Must(t, h.bin, "rollback", r.Name, "2", "-n", ns, "--wait", "--timeout", "3m")
			if got := r.AppIdentity(ctx); got != id {
				t.Fatalf("after helm rollback the Deployment runs identity %s, want v2's %s", got, id)
			}
			r.RolledOut(3 * time.Minute)
			r.AssertWitness(ctx, id)
			if n := r.PsqlInt(fmt.Sprintf("select count(*) from demo_migrate_runs where identity = '%s'", v3)); n != 1 {
				t.Errorf("identity %s migrated %d times, want once (the refused upgrade ran nothing)", v3, n)
			}

			// the guard off and on again: a policy that read the records as a ConfigMap parameter judged by a
			// cache the API server stops updating once no binding names one (kubernetes/kubernetes#130887), and
			// refused the next upgrade whose hook did record its identity
			r.MustDeploy(guardValues("v2", false))
			// Helm never deletes a hook it stops rendering: the guard's Role must not leave the migration its right
			// to patch the Deployment, which no policy holds to the annotation now
			as := "--as=system:serviceaccount:" + ns + ":" + r.Fullname() + "-migrate"
			if out, _ := env.Run.Run(t, env.Kubectl, "auth", "can-i", "patch", "deployments/"+r.Fullname(), "-n", ns, as); strings.TrimSpace(out) != "no" {
				t.Errorf("with the guard off, the migration's ServiceAccount may still patch the Deployment (kubectl auth can-i: %q)", out)
			}
			r.MustDeploy(guardValues("v2", true))
			_, d = r.MustDeploy(guardValues("v4", true))
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades++
			v4 := r.AppIdentity(ctx)
			recorded := guardRecorded(ctx, t, r)
			if !strings.Contains(recorded, v4) || !strings.Contains(recorded, v3) {
				t.Errorf("after the upgrade to v4 the Deployment lists the recorded identities %q, want %s and %s among them", recorded, v3, v4)
			}
			out, err = noHooksUpgrade(r, guardValues("v5", true))
			if err == nil || !strings.Contains(out+err.Error(), "whose migration has not run") {
				t.Fatalf("after the guard went off and on, helm upgrade --no-hooks to v5 was not refused (err %v):\n%s", err, out)
			}
			res.Numbers["refusedAfterOffAndOn"] = 1

			// the migration's ServiceAccount may patch the Deployment (the guard's Role) but change nothing else
			asMigration := migrationClient(t, ns, r.Fullname()+"-migrate")
			_, err = asMigration.AppsV1().Deployments(ns).Patch(ctx, r.Fullname(), types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
			if err == nil || !strings.Contains(err.Error(), "may change only the annotation premigrate.io/recorded-identities") {
				t.Fatalf("the migration's ServiceAccount scaled the Deployment (err %v)", err)
			}
			annotate := fmt.Sprintf(`{"metadata":{"annotations":{"premigrate.io/recorded-identities":%q}}}`, recorded)
			if _, err := asMigration.AppsV1().Deployments(ns).Patch(ctx, r.Fullname(), types.MergePatchType, []byte(annotate), metav1.PatchOptions{}); err != nil {
				t.Fatalf("the migration's ServiceAccount could not annotate the Deployment as gate run does: %v", err)
			}
			res.Numbers["refusedMigrationScale"] = 1
			r.AssertWitness(ctx, v4)
		}))
	}
}

// migrationClient is a client that acts as the ServiceAccount sa of namespace ns.
func migrationClient(t *testing.T, ns, sa string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.RestConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("a client as %s: %v", sa, err)
	}
	return c
}

// guardRecorded is the Deployment's annotation premigrate.io/recorded-identities: what the guard reads.
func guardRecorded(ctx context.Context, t *testing.T, r *framework.Release) string {
	t.Helper()
	d, err := env.Client.AppsV1().Deployments(r.Namespace).Get(ctx, r.Fullname(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the app Deployment: %v", err)
	}
	return d.Annotations["premigrate.io/recorded-identities"]
}

// TestWithoutTheGuardTheSameUpdatesGoThrough is the guard's negative control: the same two updates with
// migration.guard off. `kubectl set image` goes through and its pods start at once, since their identity is
// recorded: the witness sees the v3 app on the schema migrated for v2. `helm upgrade --no-hooks` goes through
// and its pods wait in the gate for a migration that never runs.
func TestWithoutTheGuardTheSameUpdatesGoThrough(t *testing.T) {
	share(t, weightOne, 90*time.Second)
	res := scenario(t, guardControlScenario, env.Helm3)
	ctx := context.Background()
	ns := env.NewNamespace(t, "guard-control", restricted)
	// Helm 3: its three-way merge takes the Deployment back from kubectl set image; Helm 4's server-side apply
	// stops on the field kubectl-set now owns (a conflict, which hides nothing the control looks for)
	r := env.NewRelease(t, ns, "app", env.Helm3)
	r.MustDeploy(guardValues("v1", false))
	r.MustDeploy(guardValues("v2", false))
	id := r.AppIdentity(ctx)
	if v := r.WitnessViolations(); len(v) != 0 {
		t.Fatalf("the witness saw violations before the control's updates: %v", v)
	}

	env.Run.Must(t, env.Kubectl, "set", "image", "-n", ns, "deployment/"+r.Fullname(), "app=ghcr.io/premigrate/demo:v3")
	framework.WaitUntil(t, "the witness to see the v3 app start on the v2 schema", 2*time.Minute, func(context.Context) (bool, error) {
		return len(r.WitnessViolations()) > 0, nil
	})
	violations := r.WitnessViolations()
	res.Numbers["violationsCaught"] = float64(len(violations))
	t.Logf("kubectl set image went through; the witness saw, as it must:\n  %s", strings.Join(violations, "\n  "))
	if got := r.AppIdentity(ctx); got != id {
		t.Fatalf("kubectl set image changed the identity from %s to %s", id, got)
	}

	out, err := noHooksUpgrade(r, guardValues("v4", false))
	if err != nil {
		t.Fatalf("without the guard, helm upgrade --no-hooks failed: %v\n%s", err, out)
	}
	next := r.AppIdentity(ctx)
	if next == id {
		t.Fatalf("the upgrade to v4 kept the identity %s", id)
	}
	r.AssertHeld(ctx, next, 15*time.Second)
	t.Logf("helm upgrade --no-hooks went through; the pods of %s wait in the gate for a migration that never runs", next)
}
