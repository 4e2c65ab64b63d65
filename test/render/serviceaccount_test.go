package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// migrationServiceAccount is the migration's ServiceAccount as the cluster has it: a release object of the
// release app (the install's, beside its plain Job), or, with hook, a hook.
func migrationServiceAccount(release string, hook bool) *corev1.ServiceAccount {
	a := map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace}
	if hook {
		a["helm.sh/hook"] = "pre-upgrade"
		a["helm.sh/hook-delete-policy"] = "before-hook-creation"
	}
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: fullname + "-migrate", Namespace: namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}, Annotations: a}}
}

// A hook-mode upgrade's migration ServiceAccount is a hook (it must exist before the pre-upgrade Job), unless
// the cluster has it as a release object of this release: Helm would then delete it before creating the hook
// of its name (`before-hook-creation`), and a migration still running on it (an install that outlived Helm's
// timeout, retried with `helm upgrade --install`) would lose its token mid-run. It then stays a release
// object: it exists already, so the hook Job has it.
func TestAnUpgradeKeepsTheMigrationServiceAccountARunningInstallMigrationUses(t *testing.T) {
	cases := []struct {
		name     string
		existing []runtime.Object
		hook     bool // rendered as a pre-upgrade hook the records ConfigMap owns
	}{
		{name: "the install's release object", existing: []runtime.Object{migrationServiceAccount(releaseName, false)}},
		{name: "a hook of an earlier upgrade", existing: []runtime.Object{migrationServiceAccount(releaseName, true)}, hook: true},
		{name: "none (deleted, or helm template)", hook: true},
		{name: "another release's", existing: []runtime.Object{migrationServiceAccount("other", false)}, hook: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, renderOptions{upgrade: true, existing: c.existing})
			job := r.job(t)
			require.Equal(t, "pre-upgrade", job.Annotations["helm.sh/hook"], "the upgrade's migration is the hook")
			require.Equal(t, fullname+"-migrate", job.Spec.Template.Spec.ServiceAccountName)
			sa := mustFind[*corev1.ServiceAccount](t, r, "ServiceAccount", fullname+"-migrate")
			if c.hook {
				assert.Equal(t, "pre-upgrade", sa.Annotations["helm.sh/hook"])
				assert.Equal(t, "before-hook-creation", sa.Annotations["helm.sh/hook-delete-policy"])
				require.Len(t, sa.OwnerReferences, 1, "a hook the records ConfigMap owns (helm uninstall takes it)")
				assert.Equal(t, fullname+"-migrations", sa.OwnerReferences[0].Name)
				return
			}
			for _, k := range []string{"helm.sh/hook", "helm.sh/hook-weight", "helm.sh/hook-delete-policy"} {
				assert.NotContains(t, sa.Annotations, k, "the install's ServiceAccount stays a release object")
			}
			assert.Empty(t, sa.OwnerReferences, "a release object: helm uninstall deletes it")
			for _, kind := range []string{"Role", "RoleBinding"} {
				o, ok := r.find(kind, fullname+"-migrate")
				require.True(t, ok, "no %s %s: %s", kind, fullname+"-migrate", r.summary())
				assert.Equal(t, "pre-upgrade", o.meta.GetAnnotations()["helm.sh/hook"], "%s: a hook, named apart from the install's", kind)
			}
		})
	}
}
