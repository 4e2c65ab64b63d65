package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// guardName is the guard's cluster-scoped name for the test release: it carries the namespace.
const guardName = "premigrate." + namespace + "." + fullname

// TestTheGuardIsOffByDefaultAndAddsNothingToThePods: without migration.guard.enabled the chart renders no
// admission policy and no guard annotation, and turning it on changes the Deployment's annotations only, never
// its pod template (enabling the guard rolls no pod).
func TestTheGuardIsOffByDefaultAndAddsNothingToThePods(t *testing.T) {
	const base = "postgresql: {auth: {password: pw}}\n"
	for _, upgrade := range []bool{false, true} {
		off := render(t, renderOptions{values: base, upgrade: upgrade})
		assert.Empty(t, off.ofKind("ValidatingAdmissionPolicy"), "upgrade=%v", upgrade)
		assert.Empty(t, off.ofKind("ValidatingAdmissionPolicyBinding"), "upgrade=%v", upgrade)
		for k := range off.deployment(t).Annotations {
			assert.False(t, strings.HasPrefix(k, "premigrate.io/"), "upgrade=%v: the Deployment has %s with the guard off", upgrade, k)
		}
		on := render(t, renderOptions{values: base + "migration: {guard: {enabled: true}}", upgrade: upgrade})
		assert.Equal(t, off.deployment(t).Spec.Template, on.deployment(t).Spec.Template, "upgrade=%v: the guard changed the pod template", upgrade)
		assert.Equal(t, identityOf(t, off), identityOf(t, on), "upgrade=%v: the guard is not part of the identity", upgrade)
	}
}

// TestTheGuardWatchesTheReleasesWorkloadsByWhatTheyCarry: the policy and its binding carry the release's
// namespace in their name, match UPDATEs of workloads whose annotations name this release, read no parameter
// (the API server's cache of ConfigMap parameters can freeze: kubernetes/kubernetes#130887) but the identities
// the workload carried before the update, and stay in the release's namespace; the Deployment says which image
// its identity was migrated with and whether its migration Job runs beside it or before it; the migration
// annotates the Deployment (gate run --guard-workload) with a Role that may patch only it.
func TestTheGuardWatchesTheReleasesWorkloadsByWhatTheyCarry(t *testing.T) {
	cases := []struct {
		name      string
		values    string
		upgrade   bool
		noRecords bool
		beside    string
	}{
		{name: "an install: the plain Job runs beside the Deployment", beside: "true"},
		{name: "a hook-mode upgrade: the hook ran before", upgrade: true, beside: "false"},
		{name: "an upgrade that finds no records ConfigMap: a plain Job again", upgrade: true, noRecords: true, beside: "true"},
		{name: "job mode", values: "migration: {mode: job, guard: {enabled: true}}\n", upgrade: true, beside: "true"},
		{name: "argocd mode: the Job is an earlier wave", values: "migration: {mode: argocd, guard: {enabled: true}}\n", upgrade: true, beside: "false"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			values := c.values
			if values == "" {
				values = "migration: {guard: {enabled: true}}\n"
			}
			r := render(t, renderOptions{values: values + "image: {tag: v4}\npostgresql: {auth: {password: pw}}\n", upgrade: c.upgrade, noRecords: c.noRecords})
			d := r.deployment(t)
			assert.Equal(t, fullname, d.Annotations["premigrate.io/guard"])
			assert.Equal(t, "ghcr.io/premigrate/demo:v4", d.Annotations["premigrate.io/migrated-image"])
			assert.Equal(t, c.beside, d.Annotations["premigrate.io/migration-beside"])

			p := mustFind[*admissionregistrationv1.ValidatingAdmissionPolicy](t, r, "ValidatingAdmissionPolicy", guardName)
			require.NotNil(t, p.Spec.FailurePolicy)
			assert.Equal(t, admissionregistrationv1.Fail, *p.Spec.FailurePolicy)
			assert.Nil(t, p.Spec.ParamKind, "a parameter is read from a cache that can freeze")
			assert.Contains(t, policyVariable(t, p, "recorded"), "oldObject.metadata.?annotations[?'premigrate.io/recorded-identities']",
				"recorded means: on the workload before this update, where only the migration writes it")
			require.Len(t, p.Spec.MatchConstraints.ResourceRules, 1)
			rule := p.Spec.MatchConstraints.ResourceRules[0]
			assert.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, rule.Operations, "creates are never refused")
			assert.ElementsMatch(t, []string{"deployments", "statefulsets", "daemonsets"}, rule.Resources)
			require.Len(t, p.Spec.MatchConditions, 1)
			assert.Contains(t, p.Spec.MatchConditions[0].Expression, "'"+fullname+"'", "matches only this release's workloads")
			// the three rules (the guard's scenarios prove what they refuse on a cluster)
			require.Len(t, p.Spec.Validations, 3)
			assert.Equal(t, "variables.identity == '' || variables.identity == variables.oldIdentity || variables.recorded || variables.beside",
				p.Spec.Validations[0].Expression, "a new identity passes only when recorded or migrated beside the workload")
			assert.True(t, strings.HasPrefix(p.Spec.Validations[1].Expression, "variables.identity != variables.oldIdentity || variables.migratedImage == '' || "),
				"only an image change under the same identity is judged: %s", p.Spec.Validations[1].Expression)
			assert.Contains(t, p.Spec.Validations[1].Expression, "c.image == variables.migratedImage", "a container that ran the migrated image keeps it")
			assert.Contains(t, policyVariable(t, p, "fromMigration"), "'system:serviceaccount:"+namespace+":"+fullname+"-migrate'")
			assert.True(t, strings.HasPrefix(p.Spec.Validations[2].Expression, "!variables.fromMigration || (object.spec == oldObject.spec && "),
				"the migration may change the recorded identities only: %s", p.Spec.Validations[2].Expression)
			for _, v := range p.Spec.Validations {
				assert.Contains(t, v.MessageExpression, "premigrate: ")
			}

			job := r.job(t)
			assert.Contains(t, strings.Join(job.Spec.Template.Spec.Containers[0].Command, " "), "--guard-workload deployment/"+fullname+" ",
				"the migration annotates the Deployment once its identity is recorded")
			role := mustFind[*rbacv1.Role](t, r, "Role", migrateRoleOf(job)+"-guard")
			assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{fullname},
				Verbs: []string{"patch"}}}, role.Rules, "patch on the release's Deployment, by name, and nothing else")
			rb := mustFind[*rbacv1.RoleBinding](t, r, "RoleBinding", role.Name)
			assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}, rb.RoleRef)
			assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: job.Spec.Template.Spec.ServiceAccountName, Namespace: namespace}}, rb.Subjects)
			assert.Equal(t, job.Annotations["helm.sh/hook"], role.Annotations["helm.sh/hook"], "the Role is there when the Job runs")

			b := mustFind[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, r, "ValidatingAdmissionPolicyBinding", guardName)
			assert.Equal(t, guardName, b.Spec.PolicyName)
			assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, b.Spec.ValidationActions)
			assert.Nil(t, b.Spec.ParamRef)
			require.NotNil(t, b.Spec.MatchResources)
			require.NotNil(t, b.Spec.MatchResources.NamespaceSelector)
			assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": namespace}, b.Spec.MatchResources.NamespaceSelector.MatchLabels,
				"another namespace's workloads are not this release's")
		})
	}
}

// TestTheGuardNamesOfTwoReleasesNeverCollide: the objects are cluster-scoped; two releases of one name in two
// namespaces, or of two names in one, get their own.
func TestTheGuardNamesOfTwoReleasesNeverCollide(t *testing.T) {
	names := []string{}
	for _, release := range []string{"demo", "other"} {
		r := render(t, renderOptions{release: release, values: "migration: {guard: {enabled: true}}\npostgresql: {auth: {password: pw}}\n"})
		for _, o := range r.ofKind("ValidatingAdmissionPolicy") {
			names = append(names, o.name())
		}
	}
	require.Len(t, names, 2)
	assert.False(t, slices.Contains(names[1:], names[0]), "both releases render %v", names)
	assert.True(t, strings.HasPrefix(names[0], "premigrate."+namespace+"."), "the namespace is part of the name: %s", names[0])
}

// policyVariable is the expression of the policy's variable called name.
func policyVariable(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, name string) string {
	t.Helper()
	for _, v := range p.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	t.Fatalf("the policy has no variable %s", name)
	return ""
}

// migrateRoleOf is the name of the migration's Role: the Job's name when the Job is plain, else <fullname>-migrate.
func migrateRoleOf(job *batchv1.Job) string {
	if job.Annotations["helm.sh/hook"] == "" {
		return job.Name
	}
	return fullname + "-migrate"
}

// TestTheGuardTurnedOffTakesTheMigrationsRightToPatchTheDeployment: Helm never deletes a hook it no longer
// renders, so the guard's Role (a hook in hook mode) would outlive the guard, and with it the migration's right
// to patch the Deployment, no longer held to its annotation by the policy. A hook-mode upgrade with the guard off
// that finds the Role replaces it with one that grants nothing; one that finds none renders none.
func TestTheGuardTurnedOffTakesTheMigrationsRightToPatchTheDeployment(t *testing.T) {
	const values = "postgresql: {auth: {password: pw}}\nmigration: {guard: {enabled: false}}\n"
	left := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: fullname + "-migrate-guard", Namespace: namespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{fullname}, Verbs: []string{"patch"}}},
	}
	r := render(t, renderOptions{values: values, upgrade: true, existing: []runtime.Object{left}})
	role := mustFind[*rbacv1.Role](t, r, "Role", left.Name)
	assert.Empty(t, role.Rules, "the guard is off: its Role must grant nothing")
	assert.Equal(t, r.job(t).Annotations["helm.sh/hook"], role.Annotations["helm.sh/hook"], "a hook, so that it replaces the one left")
	assert.Empty(t, r.ofKind("ValidatingAdmissionPolicy"))

	none := render(t, renderOptions{values: values, upgrade: true})
	_, found := none.find("Role", left.Name)
	assert.False(t, found, "no guard Role was ever created: none to replace")
}
