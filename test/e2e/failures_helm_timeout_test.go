//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	helmTimeoutScenarios = scenarios.DeclareEach(framework.NeverSkipped, "helm-timeout", framework.In(framework.CI, "helm3"), framework.In(framework.Matrix, "helm4"))
)

// Issue: Helm's --timeout (5 minutes by default) can end before the migration (activeDeadlineSeconds 900 s by
// default). Helm then fails the upgrade and deletes the hooks it may delete, but the Job runs on. Up to chart
// 0.3.0 the migration's ServiceAccount, Role and RoleBinding were among them (hook-succeeded): the migration
// finished and could not record itself, so the next upgrade ran it again. They are now replaced by the next
// upgrade's hooks only, owned by the records ConfigMap, and carry Helm's ownership so that a rollback to the
// install's revision, where they are release objects, adopts them: the operator's usual answer to a failed
// upgrade. The ServiceAccount the install made stays a release object (docs/design.md).
func TestAMigrationThatOutlivesHelmsTimeoutRecordsItselfAndTheNextUpgradeRunsNothing(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range helmCLIs() {
		t.Run(h.name, func(t *testing.T) {
			share(t, weightOne, 150*time.Second)
			res := scenario(t, helmTimeoutScenarios[h.name], h.bin)
			ctx := context.Background()
			ns := env.NewNamespace(t, "timeout-"+h.name, restricted)
			r := env.NewRelease(t, ns, "app", h.bin)
			r.MustDeploy(framework.BaseValues())
			first := r.AppIdentity(ctx)

			// the v2 migration takes 40 s; Helm waits 15 s for it
			slow := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"},
				"migration": map[string]any{"env": []any{framework.EnvVar("DEMO_MIGRATION_DELAY", "40s")}}})
			out, d, err := r.Deploy(slow, "--timeout", "15s")
			gaveUp := time.Now()
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			if err == nil {
				t.Fatalf("the upgrade with a 15 s timeout succeeded in %s; the scenario needs Helm to give up on the migration:\n%s", d, out)
			}
			second := releaseJob(ctx, r, r.Fullname()+"-migrate").Labels["premigrate.io/identity"]
			if second == "" || second == first {
				t.Fatalf("the hook Job has identity %q after the failed upgrade, want the v2 migration's (not %s)", second, first)
			}
			framework.WaitUntil(t, "the v2 migration to finish after Helm gave up, and to record itself", 3*time.Minute, func(ctx context.Context) (bool, error) {
				_, ok := r.Records(ctx)[second]
				return ok, nil
			})
			finished, ok := r.MigrationFinished(second)
			if !ok || !finished.After(gaveUp) {
				t.Fatalf("the database has the v2 migration finished at %s (found %v), want after Helm gave up at %s: the scenario proves nothing",
					finished.Format(time.RFC3339Nano), ok, gaveUp.Format(time.RFC3339Nano))
			}

			// the hooks outlived Helm's timeout, owned by the records ConfigMap (uninstall takes them with it); the
			// ServiceAccount is the install's release object, which the upgrade kept
			anchor, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, r.AnchorName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for kind, get := range map[string]func() (metav1.Object, error){
				"ServiceAccount": func() (metav1.Object, error) {
					return env.Client.CoreV1().ServiceAccounts(ns).Get(ctx, r.Fullname()+"-migrate", metav1.GetOptions{})
				},
				"Role": func() (metav1.Object, error) {
					return env.Client.RbacV1().Roles(ns).Get(ctx, r.Fullname()+"-migrate", metav1.GetOptions{})
				},
				"RoleBinding": func() (metav1.Object, error) {
					return env.Client.RbacV1().RoleBindings(ns).Get(ctx, r.Fullname()+"-migrate", metav1.GetOptions{})
				},
			} {
				o, err := get()
				if err != nil {
					t.Errorf("the migration's %s after Helm gave up: %v", kind, err)
					continue
				}
				switch owners, hook := o.GetOwnerReferences(), o.GetAnnotations()["helm.sh/hook"]; {
				case kind == "ServiceAccount":
					// the install's release object, kept by the upgrade: a hook of its name would have taken it
					// from under a migration still running on its token
					if hook != "" || len(owners) != 0 {
						t.Errorf("the migration's ServiceAccount is a hook %q owned by %v, want the install's release object kept", hook, owners)
					}
				case len(owners) != 1 || owners[0].UID != anchor.UID:
					t.Errorf("the migration's %s is owned by %v, want the records ConfigMap %s (uid %s)", kind, owners, anchor.Name, anchor.UID)
				}
				// Helm's ownership, so that a later release that renders it as a release object (a rollback to
				// the install's revision, a switch to job mode) adopts it instead of refusing to import it
				if a := o.GetAnnotations(); a["meta.helm.sh/release-name"] != r.Name || a["meta.helm.sh/release-namespace"] != ns {
					t.Errorf("the migration's %s lacks Helm's ownership annotations of release %s/%s: %v", kind, ns, r.Name, a)
				}
			}

			// a rollback to the install's revision, where those objects are release objects: Helm adopts them (the
			// failed revision's manifest does not have them). Helm 4 only: Helm 3's rollback to the install's
			// revision after a failed upgrade fails before it reaches them, on the install's migration objects,
			// which the failed upgrade left and its manifest does not list (v3.21 refuses them as not found, v3.22
			// patches the Job: "field is immutable"; docs/troubleshooting.md gives the way out, which
			// upgrade-from-previous-helm3 takes).
			if h.name == "helm4" {
				start := time.Now()
				out, err = env.Run.Run(t, h.bin, "rollback", r.Name, "1", "-n", ns, "--wait", "--timeout", "4m")
				res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
				if err != nil || strings.Contains(out, "cannot be imported") {
					t.Fatalf("%s rollback to the install's revision: %v\n%s", h.name, err, out)
				}
				if got := r.AppIdentity(ctx); got != first {
					t.Fatalf("after the rollback the Deployment has identity %s, want the install's %s", got, first)
				}
				r.RolledOut(2 * time.Minute)
			}
			// the v2 values again: the migration ran on this database, nothing runs twice
			_, d = r.MustDeploy(slow)
			res.DurationsSec = append(res.DurationsSec, d.Seconds())
			res.Upgrades = 3
			if got := r.AppIdentity(ctx); got != second {
				t.Fatalf("after the upgrade again the Deployment has identity %s, want %s", got, second)
			}
			r.AssertWitness(ctx, second)
			if runs := r.PsqlInt(fmt.Sprintf("select count(*) from demo_migrate_runs where identity = '%s'", second)); runs != 1 {
				t.Errorf("the v2 migration ran %d times on the database, want once", runs)
			}

			uninstall(r)
			assertNothingLeftAfterUninstall(t, ns, map[string]bool{
				"PersistentVolumeClaim/data-" + r.Fullname() + "-postgresql-0": true,
				"Secret/" + r.Fullname() + "-postgresql":                       true,
				"ConfigMap/" + r.StoreName():                                   true,
			})
		})
	}
}
