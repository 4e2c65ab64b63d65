package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const (
	gateName       = fullname + "-gate"
	ungatePolicy   = "premigrate." + namespace + "." + gateName
	schedulingGate = "premigrate.io/migration"
)

// TestWithTheSchedulingGateThePodsCarryNothingThatRunsWhileTheyWait: with gate.waitIn schedulingGate, in every
// mode, the app pods carry the scheduling gate, the label gate ungate selects and the migration they wait for
// (identity and Job), and nothing that runs or reads the API: no init container, no volume, no token. The
// identity is the same as with the init container (the records stay valid when the mode changes).
func TestWithTheSchedulingGateThePodsCarryNothingThatRunsWhileTheyWait(t *testing.T) {
	for _, c := range []struct {
		name    string
		values  string
		upgrade bool
	}{
		{name: "an install (a plain Job)"},
		{name: "a hook-mode upgrade", upgrade: true},
		{name: "job mode", values: "migration: {mode: job}\n", upgrade: true},
		{name: "argocd mode", values: "migration: {mode: argocd}\n", upgrade: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := c.values + "postgresql: {auth: {password: pw}}\n"
			r := render(t, renderOptions{values: base + "gate: {waitIn: schedulingGate}\n", upgrade: c.upgrade})
			d := r.deployment(t)
			pod := d.Spec.Template
			assert.Equal(t, []corev1.PodSchedulingGate{{Name: schedulingGate}}, pod.Spec.SchedulingGates)
			assert.Equal(t, gateName, pod.Labels["premigrate.io/gated-by"])
			assert.Equal(t, r.job(t).Name, pod.Annotations["premigrate.io/migration-job"], "the Job whose success releases the pod")
			assert.Equal(t, r.job(t).Labels["premigrate.io/identity"], pod.Annotations["premigrate.io/identity"])
			assert.Empty(t, pod.Spec.InitContainers, "nothing runs while the pod waits")
			assert.Empty(t, pod.Spec.Volumes, "no API token, no gate binary")
			require.NotNil(t, pod.Spec.AutomountServiceAccountToken)
			assert.False(t, *pod.Spec.AutomountServiceAccountToken)
			sa := mustFind[*corev1.ServiceAccount](t, r, "ServiceAccount", pod.Spec.ServiceAccountName)
			require.NotNil(t, sa.AutomountServiceAccountToken)
			assert.False(t, *sa.AutomountServiceAccountToken, "the app's ServiceAccount needs no API rights in this mode")
			for _, rb := range r.ofKind("RoleBinding") {
				for _, s := range rb.obj.(*rbacv1.RoleBinding).Subjects {
					assert.NotEqual(t, pod.Spec.ServiceAccountName, s.Name, "RoleBinding %s grants the app's ServiceAccount", rb.name())
				}
			}
			initial := render(t, renderOptions{values: base, upgrade: c.upgrade})
			assert.Equal(t, identityOf(t, initial), identityOf(t, r), "where the pods wait is not part of the identity")
		})
	}
}

// TestGateUngateRunsAsItsOwnDeploymentWithTheRightsToReleaseThePodsAndNoOther: <fullname>-gate runs `gate
// ungate` for the release's gated pods with its own ServiceAccount; its pods do not match the app's selector
// (they would take its traffic); its Role reads the migration Job and the records by name, lists, watches and
// patches pods and posts Events; the policy holds those patches to removing premigrate's gate from the release's
// pods; Argo CD creates all of it in the wave before the Job. Without the mode none of it is rendered.
func TestGateUngateRunsAsItsOwnDeploymentWithTheRightsToReleaseThePodsAndNoOther(t *testing.T) {
	r := render(t, renderOptions{values: "migration: {mode: argocd}\ngate: {waitIn: schedulingGate}\npostgresql: {auth: {password: pw}}\n", upgrade: true})
	g := mustFind[*appsv1.Deployment](t, r, "Deployment", gateName)
	spec := g.Spec.Template.Spec
	assert.Equal(t, gateName, spec.ServiceAccountName)
	require.Len(t, spec.Containers, 1)
	args := strings.Join(spec.Containers[0].Args, " ")
	assert.True(t, strings.HasPrefix(args, "ungate --selector premigrate.io/gated-by="+gateName+" --records "+fullname+"-migrations --store "+fullname+"-migration-records "), args)
	assert.Contains(t, args, "--database-object persistentvolumeclaim/", "the records count on this database only")
	app := r.deployment(t)
	sel, err := labels.ValidatedSelectorFromSet(app.Spec.Selector.MatchLabels)
	require.NoError(t, err)
	assert.False(t, sel.Matches(labels.Set(g.Spec.Template.Labels)), "the gate's pods match the app's selector: %v", g.Spec.Template.Labels)
	assert.Equal(t, "-1", g.Annotations["argocd.argoproj.io/sync-wave"], "running before the app's pods come")
	require.NotNil(t, spec.SecurityContext)
	assert.True(t, *spec.SecurityContext.RunAsNonRoot)
	assert.False(t, *spec.Containers[0].SecurityContext.AllowPrivilegeEscalation)

	sa := mustFind[*corev1.ServiceAccount](t, r, "ServiceAccount", gateName)
	assert.True(t, *sa.AutomountServiceAccountToken)
	role := mustFind[*rbacv1.Role](t, r, "Role", gateName)
	assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "patch"}})
	assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}})
	for _, rule := range role.Rules {
		if !slices.Contains(rule.Resources, "pods") && !slices.Contains(rule.Resources, "events") {
			assert.NotEmpty(t, rule.ResourceNames, "rule %v is not limited to names", rule)
		}
	}
	rb := mustFind[*rbacv1.RoleBinding](t, r, "RoleBinding", gateName)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: gateName, Namespace: namespace}}, rb.Subjects)

	p := mustFind[*admissionregistrationv1.ValidatingAdmissionPolicy](t, r, "ValidatingAdmissionPolicy", ungatePolicy)
	assert.Equal(t, admissionregistrationv1.Fail, *p.Spec.FailurePolicy)
	require.Len(t, p.Spec.MatchConstraints.ResourceRules, 1)
	assert.Equal(t, []string{"pods"}, p.Spec.MatchConstraints.ResourceRules[0].Resources)
	require.Len(t, p.Spec.MatchConditions, 1)
	assert.Equal(t, "request.userInfo.username == 'system:serviceaccount:"+namespace+":"+gateName+"'", p.Spec.MatchConditions[0].Expression,
		"it judges the gate's requests only")
	require.Len(t, p.Spec.Validations, 2)
	assert.Equal(t, "oldObject.metadata.?labels[?'premigrate.io/gated-by'].orValue('') == '"+gateName+"'", p.Spec.Validations[0].Expression,
		"only the release's pods, by what they carried before the patch")
	assert.True(t, strings.HasPrefix(p.Spec.Validations[1].Expression, "variables.gates == variables.oldGates.filter(n, n != '"+schedulingGate+"') && "),
		"only premigrate's gate is removed: %s", p.Spec.Validations[1].Expression)
	for _, f := range []string{"containers", "initContainers", "tolerations", "nodeSelector", "affinity", "labels", "annotations"} {
		assert.Contains(t, p.Spec.Validations[1].Expression, f, "a patch of the pod's %s is refused", f)
	}
	b := mustFind[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, r, "ValidatingAdmissionPolicyBinding", ungatePolicy)
	assert.Equal(t, ungatePolicy, b.Spec.PolicyName)
	assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, b.Spec.ValidationActions)
	assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": namespace}, b.Spec.MatchResources.NamespaceSelector.MatchLabels)

	off := render(t, renderOptions{values: "migration: {mode: argocd}\npostgresql: {auth: {password: pw}}\n", upgrade: true})
	_, found := off.find("Deployment", gateName)
	assert.False(t, found, "no gate Deployment without the mode")
	assert.Empty(t, off.ofKind("ValidatingAdmissionPolicy"))
	assert.Empty(t, off.deployment(t).Spec.Template.Spec.SchedulingGates)
}

// TestGateUngateRunsWhereTheAppsPodsMayRunAndOneOfItKeepsRunningThroughADrain: while no pod of <fullname>-gate
// runs, no new app pod starts, so by default it takes the app pods' placement (a tainted pool's tolerations,
// their node selector, affinity and priority), not the migration pod's; gate.deployment overrides each, a spread
// constraint without labelSelector spreads the gate's own pods, and two replicas come with a budget that lets a
// drain evict one at a time (one replica gets none, which would block the drain). None of it is the identity.
func TestGateUngateRunsWhereTheAppsPodsMayRunAndOneOfItKeepsRunningThroughADrain(t *testing.T) {
	const app = `gate: {waitIn: schedulingGate}
postgresql: {auth: {password: pw}}
nodeSelector: {pool: apps}
tolerations: [{key: pool, operator: Equal, value: apps, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: arch, operator: In, values: [amd64]}]}]}}}
priorityClassName: apps-high
migration: {nodeSelector: {pool: batch}, tolerations: [], priorityClassName: batch}
`
	r := render(t, renderOptions{values: app})
	spec := mustFind[*appsv1.Deployment](t, r, "Deployment", gateName).Spec.Template.Spec
	appSpec := r.deployment(t).Spec.Template.Spec
	assert.Equal(t, appSpec.NodeSelector, spec.NodeSelector, "the app's node selector, not the migration's")
	assert.Equal(t, appSpec.Tolerations, spec.Tolerations)
	assert.Equal(t, appSpec.Affinity, spec.Affinity)
	assert.Equal(t, "apps-high", spec.PriorityClassName)
	assert.Equal(t, int32(1), *mustFind[*appsv1.Deployment](t, r, "Deployment", gateName).Spec.Replicas)
	_, budget := r.find("PodDisruptionBudget", gateName)
	assert.False(t, budget, "one replica with a budget that allows no eviction would block every drain of its node")

	own := render(t, renderOptions{values: app + `gate:
  waitIn: schedulingGate
  deployment:
    replicas: 2
    nodeSelector: {pool: system}
    tolerations: [{operator: Exists}]
    affinity: {}
    priorityClassName: system-cluster-critical
    topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]
`})
	g := mustFind[*appsv1.Deployment](t, own, "Deployment", gateName)
	spec = g.Spec.Template.Spec
	assert.Equal(t, int32(2), *g.Spec.Replicas)
	assert.Equal(t, map[string]string{"pool": "system"}, spec.NodeSelector)
	assert.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, spec.Tolerations)
	assert.Nil(t, spec.Affinity, "{} is no affinity, not the app's")
	assert.Equal(t, "system-cluster-critical", spec.PriorityClassName)
	require.Len(t, spec.TopologySpreadConstraints, 1)
	require.NotNil(t, spec.TopologySpreadConstraints[0].LabelSelector)
	assert.Equal(t, g.Spec.Selector.MatchLabels, spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels, "spreading the gate's own pods")
	pdb := mustFind[*policyv1.PodDisruptionBudget](t, own, "PodDisruptionBudget", gateName)
	require.NotNil(t, pdb.Spec.MaxUnavailable)
	assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue())
	assert.Equal(t, g.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels)
	assert.Equal(t, identityOf(t, r), identityOf(t, own), "where the gate runs is not part of the identity")
	assert.Equal(t, r.job(t).Name, own.job(t).Name, "nor of the migration Job")

	off := render(t, renderOptions{values: "postgresql: {auth: {password: pw}}\ngate: {deployment: {replicas: 3}}\n"})
	_, budget = off.find("PodDisruptionBudget", gateName)
	assert.False(t, budget, "no gate Deployment, no budget, without the mode")
}
