package render

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const contractValues = "migration: {contract: {command: [/demo, contract], soakSeconds: 5}}"

// contractJob is the one Job of r named <fullname>-contract (a hook) or <fullname>-contract-<hash> (a plain Job).
func contractJob(t *testing.T, r *result) *batchv1.Job {
	t.Helper()
	var found []*batchv1.Job
	for _, o := range r.ofKind("Job") {
		if o.name() == fullname+"-contract" || strings.HasPrefix(o.name(), fullname+"-contract-") {
			found = append(found, o.obj.(*batchv1.Job))
		}
	}
	require.Len(t, found, 1, "contract Jobs among %s", r.summary())
	return found[0]
}

func TestNoContractStepIsRenderedUnlessItsCommandIsSet(t *testing.T) {
	r := render(t, renderOptions{upgrade: true})
	for _, kind := range []string{"Job", "ServiceAccount", "Role", "RoleBinding"} {
		for _, o := range r.ofKind(kind) {
			assert.NotContains(t, o.name(), "contract", "%s rendered without migration.contract.command", kind)
		}
	}
	r = render(t, renderOptions{upgrade: true, values: "migration: {enabled: false, contract: {command: [/demo, contract]}}"})
	for _, o := range r.ofKind("Job") {
		assert.NotContains(t, o.name(), "contract", "a contract without its migration")
	}
}

func TestTheContractJobRunsGateContractOnTheMigrationsPodWithItsOwnServiceAccount(t *testing.T) {
	r := render(t, renderOptions{upgrade: true, values: contractValues})
	job := contractJob(t, r)
	identity := r.deployment(t).Spec.Template.Annotations["premigrate.io/identity"]
	require.NotEmpty(t, identity)
	assert.Equal(t, identity, job.Labels["premigrate.io/identity"])
	pod := job.Spec.Template.Spec
	c := container(t, pod.Containers, "contract")
	cmd := strings.Join(c.Command, " ")
	assert.Contains(t, cmd, "/premigrate/gate contract --identity "+identity+" --records "+fullname+"-migrations --store "+fullname+"-migration-records --job $(JOB_NAME) --deployment "+fullname+" --soak 5s --rollout-timeout 1h")
	assert.True(t, strings.HasSuffix(cmd, " -- /demo contract"), "the contract command after --: %s", cmd)
	assert.Empty(t, c.Args)
	assert.Equal(t, fullname+"-contract", pod.ServiceAccountName)
	assert.Equal(t, "contract", job.Spec.Template.Labels["app.kubernetes.io/component"])
	assert.NotContains(t, job.Spec.Template.Labels, "app.kubernetes.io/name", "the contract pod must not match the app's selectors")
	if _, ok := envVar(c.Env, "DATABASE_URL"); !ok {
		t.Errorf("the contract has not the migration's environment: %v", envNames(c.Env))
	}
	migration := mustFind[*batchv1.Job](t, r, "Job", fullname+"-migrate")
	assert.Equal(t, migration.Spec.Template.Spec.InitContainers, pod.InitContainers, "the migration pod's init containers (the gate's delivery, sidecars)")
	assert.Equal(t, migration.Spec.Template.Spec.SecurityContext, pod.SecurityContext)
	assert.EqualValues(t, 1800, *job.Spec.ActiveDeadlineSeconds)
}

func TestTheContractJobIsAPostHookInHookModeAPostSyncHookInArgocdModeAndPlainInJobMode(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want map[string]string
		// a hook has one name, deleted before the next is created: one contract Job per release; a plain Job
		// changes its name with its contents (the apply that renders the next removes it)
		oneName bool
	}{
		{"hook", map[string]string{"helm.sh/hook": "post-install,post-upgrade", "helm.sh/hook-delete-policy": "before-hook-creation"}, true},
		{"argocd", map[string]string{"argocd.argoproj.io/hook": "PostSync", "argocd.argoproj.io/hook-delete-policy": "BeforeHookCreation"}, true},
		{"job", nil, false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			r := render(t, renderOptions{upgrade: true, values: "migration: {mode: " + tc.mode + ", contract: {command: [/demo, contract]}}\npostgresql: {auth: {password: pw}}"})
			job := contractJob(t, r)
			assert.Equal(t, tc.oneName, job.Name == fullname+"-contract", "the contract Job's name %s", job.Name)
			for k, v := range tc.want {
				assert.Equal(t, v, job.Annotations[k], k)
			}
			if tc.want == nil {
				assert.Empty(t, job.Annotations, "a plain Job")
			}
		})
	}
}

func TestAChangedContractIsANewJobAndLeavesTheIdentityAlone(t *testing.T) {
	// a plain Job (job mode) is applied, so a changed one needs another name; a hook is deleted and created anew
	a := render(t, renderOptions{upgrade: true, values: "migration: {mode: job, contract: {command: [/demo, contract], soakSeconds: 5}}\npostgresql: {auth: {password: pw}}"})
	b := render(t, renderOptions{upgrade: true, values: "migration: {mode: job, contract: {command: [/demo, contract], args: [--drop], soakSeconds: 5}}\npostgresql: {auth: {password: pw}}"})
	assert.NotEqual(t, contractJob(t, a).Name, contractJob(t, b).Name, "a patch of an immutable Job otherwise")
	assert.Equal(t, a.deployment(t).Spec.Template.Annotations["premigrate.io/identity"], b.deployment(t).Spec.Template.Annotations["premigrate.io/identity"])
	assert.Equal(t, []string{"--drop"}, container(t, contractJob(t, b).Spec.Template.Spec.Containers, "contract").Args)
}

// The contract's plain Job is the migration Job's pod with `gate contract` in it: a new gate image, or other
// limits of the migration's pod, are a new pod template of the same identity, so they must be another name too.
func TestInJobModeAContractJobWithAnotherPodTemplateIsAnotherJob(t *testing.T) {
	values := "migration: {mode: job, contract: {command: [/demo, contract]}%s}\npostgresql: {auth: {password: pw}}\n%s"
	a := render(t, renderOptions{upgrade: true, values: fmt.Sprintf(values, "", "")})
	for what, v := range map[string][2]string{
		"a new gate image":          {"", "gate: {image: {tag: other}}"},
		"the migration's resources": {", resources: {requests: {cpu: 20m}}", ""},
	} {
		b := render(t, renderOptions{upgrade: true, values: fmt.Sprintf(values, v[0], v[1])})
		assert.Equal(t, a.deployment(t).Spec.Template.Annotations["premigrate.io/identity"], b.deployment(t).Spec.Template.Annotations["premigrate.io/identity"], "%s: the same identity", what)
		assert.NotEqual(t, contractJob(t, a).Name, contractJob(t, b).Name, "%s: a patch of an immutable contract Job otherwise", what)
	}
}

func TestTheContractsRoleReadsTheRolloutAndItsRecordsPostsEventsAndNothingElse(t *testing.T) {
	r := render(t, renderOptions{upgrade: true, values: contractValues})
	job := contractJob(t, r)
	sa := mustFind[*corev1.ServiceAccount](t, r, "ServiceAccount", fullname+"-contract")
	assert.False(t, *sa.AutomountServiceAccountToken)
	role := mustFind[*rbacv1.Role](t, r, "Role", fullname+"-contract")
	assert.ElementsMatch(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{fullname + "-migrations", fullname + "-migration-records"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, ResourceNames: []string{job.Name}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{fullname}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, ResourceNames: []string{"data-" + fullname + "-postgresql-0"}, Verbs: []string{"get"}},
	}, role.Rules)
	binding := mustFind[*rbacv1.RoleBinding](t, r, "RoleBinding", fullname+"-contract")
	assert.Equal(t, fullname+"-contract", binding.RoleRef.Name)
	assert.True(t, slices.ContainsFunc(binding.Subjects, func(s rbacv1.Subject) bool { return s.Name == fullname+"-contract" }))
}

// The example chart ships the contract step (contract: true): the library's contract Job, ServiceAccount, Role
// and RoleBinding, the ledger's own command after gate contract, the ledger's Deployment as the rollout to wait
// for, and a pod the ledger's Service never selects. Off by default.
func TestTheExampleChartShipsTheLibrarysContractStep(t *testing.T) {
	for _, o := range renderLedger(t, "", true).objects {
		assert.NotContains(t, o.name(), "contract", "%s rendered without contract: true", o.kind)
	}
	r := renderLedger(t, "schemaVersion: 3\ncontract: true\nmigrations: {contract: {soakSeconds: 10}}\n", true)
	var job *batchv1.Job
	for _, o := range r.ofKind("Job") {
		if o.name() == ledgerFullname+"-contract" {
			job = o.obj.(*batchv1.Job)
		}
	}
	require.NotNil(t, job, "no contract Job among %s", r.summary())
	migration := mustFind[*batchv1.Job](t, r, "Job", ledgerFullname+"-migrate")
	id := migration.Labels["premigrate.io/identity"]
	require.NotEmpty(t, id)
	assert.Equal(t, id, job.Labels["premigrate.io/identity"], "the contract belongs to the migration's identity")
	assert.Equal(t, "post-install,post-upgrade", job.Annotations["helm.sh/hook"])
	c := container(t, job.Spec.Template.Spec.Containers, "contract")
	assert.Contains(t, strings.Join(c.Command, " "), "/premigrate/gate contract --identity "+id+" --records "+ledgerFullname+"-migrations")
	assert.Contains(t, strings.Join(c.Command, " "), "--deployment "+ledgerFullname+" --soak 10s")
	assert.Equal(t, []string{"/ledger", "contract", "--to", "3"}, afterDashes(c.Command, c.Args))
	assert.Equal(t, ledgerFullname+"-contract", job.Spec.Template.Spec.ServiceAccountName)
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding"} {
		_, ok := r.find(kind, ledgerFullname+"-contract")
		assert.True(t, ok, "%s %s-contract is not rendered", kind, ledgerFullname)
	}
	svc := mustFind[*corev1.Service](t, r, "Service", ledgerFullname)
	assert.False(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(job.Spec.Template.Labels)), "the Service selects the contract pod")
}

func TestAContractTheGateRefusesFailsItsJobAtOnceAndAFailingContractCommandIsRetried(t *testing.T) {
	job := contractJob(t, render(t, renderOptions{upgrade: true, values: "migration: {failFastExitCodes: [7], contract: {command: [/demo, contract]}}"}))
	var failJob []batchv1.PodFailurePolicyRule
	for _, r := range job.Spec.PodFailurePolicy.Rules {
		if r.Action == batchv1.PodFailurePolicyActionFailJob {
			failJob = append(failJob, r)
		}
	}
	require.Len(t, failJob, 1, "one FailJob rule: %+v", job.Spec.PodFailurePolicy.Rules)
	assert.Equal(t, "contract", *failJob[0].OnExitCodes.ContainerName)
	assert.Equal(t, []int32{3}, failJob[0].OnExitCodes.Values, "the gate's refusal only: the migration's fail-fast codes are not the contract's")
}
