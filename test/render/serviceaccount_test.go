package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// migrationServiceAccount is the migration's ServiceAccount name as the cluster has it: a release object of
// the release (the install's, beside its plain Job), or, with hook, a hook.
func migrationServiceAccount(name, release string, hook bool) *corev1.ServiceAccount {
	a := map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace}
	if hook {
		a["helm.sh/hook"] = "pre-upgrade"
		a["helm.sh/hook-delete-policy"] = "before-hook-creation"
	}
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}, Annotations: a}}
}

// A hook-mode upgrade's migration ServiceAccount is a hook (it must exist before the pre-upgrade Job), unless
// the cluster has it as a release object of this release: Helm would then delete it before creating the hook
// of its name (`before-hook-creation`), and a migration still running on it (an install that outlived Helm's
// timeout, retried with `helm upgrade --install`) would lose its token mid-run. It then stays a release
// object: it exists already, so the hook Job has it. The library decides, so the premigrate chart and a chart
// built on the library (examples/ledger) both keep it.
func TestAnUpgradeKeepsTheMigrationServiceAccountARunningInstallMigrationUses(t *testing.T) {
	charts := []struct {
		name, dir, fullname string
	}{
		{name: "premigrate", fullname: fullname},
		{name: "a chart built on the library", dir: exampleDir, fullname: ledgerFullname},
	}
	cases := []struct {
		name     string
		existing func(sa string) []runtime.Object
		hook     bool // rendered as a pre-upgrade hook the records ConfigMap owns
	}{
		{name: "the install's release object", existing: func(sa string) []runtime.Object {
			return []runtime.Object{migrationServiceAccount(sa, releaseName, false)}
		}},
		{name: "a hook of an earlier upgrade", hook: true, existing: func(sa string) []runtime.Object {
			return []runtime.Object{migrationServiceAccount(sa, releaseName, true)}
		}},
		{name: "none (deleted, or helm template)", hook: true, existing: func(string) []runtime.Object { return nil }},
		{name: "another release's", hook: true, existing: func(sa string) []runtime.Object {
			return []runtime.Object{migrationServiceAccount(sa, "other", false)}
		}},
	}
	for _, ch := range charts {
		for _, c := range cases {
			t.Run(ch.name+"/"+c.name, func(t *testing.T) {
				name := ch.fullname + "-migrate"
				r := render(t, renderOptions{chart: ch.dir, upgrade: true, existing: c.existing(name),
					records: ch.fullname + "-migrations"})
				job := r.job(t)
				require.Equal(t, "pre-upgrade", job.Annotations["helm.sh/hook"], "the upgrade's migration is the hook")
				require.Equal(t, name, job.Spec.Template.Spec.ServiceAccountName)
				sa := mustFind[*corev1.ServiceAccount](t, r, "ServiceAccount", name)
				if c.hook {
					assert.Equal(t, "pre-upgrade", sa.Annotations["helm.sh/hook"])
					assert.Equal(t, "before-hook-creation", sa.Annotations["helm.sh/hook-delete-policy"])
					require.Len(t, sa.OwnerReferences, 1, "a hook the records ConfigMap owns (helm uninstall takes it)")
					assert.Equal(t, ch.fullname+"-migrations", sa.OwnerReferences[0].Name)
					return
				}
				for _, k := range []string{"helm.sh/hook", "helm.sh/hook-weight", "helm.sh/hook-delete-policy"} {
					assert.NotContains(t, sa.Annotations, k, "the install's ServiceAccount stays a release object")
				}
				assert.Empty(t, sa.OwnerReferences, "a release object: helm uninstall deletes it")
				for _, kind := range []string{"Role", "RoleBinding"} {
					o, ok := r.find(kind, name)
					require.True(t, ok, "no %s %s: %s", kind, name, r.summary())
					assert.Equal(t, "pre-upgrade", o.meta.GetAnnotations()["helm.sh/hook"], "%s: a hook, named apart from the install's", kind)
				}
			})
		}
	}
}
