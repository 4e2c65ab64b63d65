package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

const requireValues = "migration: {requirePreviousContract: true, contract: {command: [/demo, contract]}}"

// requireJobs are the Jobs of r whose name starts with <fullname>-require-.
func requireJobs(r *result) []*batchv1.Job {
	var found []*batchv1.Job
	for _, o := range r.ofKind("Job") {
		if strings.HasPrefix(o.name(), fullname+"-require-") {
			found = append(found, o.obj.(*batchv1.Job))
		}
	}
	return found
}

func TestNoRequireContractCheckIsRenderedUnlessDeclaredOrOnAnInstall(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    renderOptions
	}{
		{"not declared", renderOptions{upgrade: true, values: "migration: {contract: {command: [/demo, contract]}}"}},
		{"declared false", renderOptions{upgrade: true, values: "migration: {requirePreviousContract: false}"}},
		{"an install (the migration Job is a release object)", renderOptions{values: requireValues}},
		{"the migration disabled", renderOptions{upgrade: true, values: "migration: {enabled: false, requirePreviousContract: true}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Empty(t, requireJobs(render(t, tc.o)))
		})
	}
}

func TestTheRequireContractCheckIsAPreUpgradeHookBeforeTheMigrationOnItsPod(t *testing.T) {
	r := render(t, renderOptions{upgrade: true, values: requireValues})
	jobs := requireJobs(r)
	require.Len(t, jobs, 1, "require-contract Jobs among %s", r.summary())
	job := jobs[0]
	identity := r.deployment(t).Spec.Template.Annotations["premigrate.io/identity"]
	require.NotEmpty(t, identity)
	assert.Equal(t, fullname+"-require-"+identity, job.Name)
	assert.Equal(t, identity, job.Labels["premigrate.io/identity"])
	migration := mustFind[*batchv1.Job](t, r, "Job", fullname+"-migrate")
	assert.Equal(t, map[string]string{
		"helm.sh/hook":                   "pre-upgrade",
		"helm.sh/hook-weight":            "-1",
		"helm.sh/hook-delete-policy":     "before-hook-creation,hook-succeeded",
		"helm.sh/hook-output-log-policy": "hook-failed",
	}, job.Annotations, "one weight before the migration hook (weight %s)", migration.Annotations["helm.sh/hook-weight"])
	assert.Equal(t, migration.OwnerReferences, job.OwnerReferences, "owned by the records ConfigMap, as the migration hook")

	pod := job.Spec.Template.Spec
	c := container(t, pod.Containers, "require-contract")
	assert.Equal(t, "/premigrate/gate require-contract --identity "+identity+" --records "+fullname+"-migrations --store "+fullname+
		"-migration-records --job $(JOB_NAME) --database-object persistentvolumeclaim/data-"+fullname+"-postgresql-0", strings.Join(c.Command, " "))
	assert.Empty(t, c.Args)
	assert.Equal(t, migration.Spec.Template.Spec.ServiceAccountName, pod.ServiceAccountName, "the migration's ServiceAccount: it reads the records")
	assert.Equal(t, migration.Spec.Template.Spec.SecurityContext, pod.SecurityContext)
	assert.Equal(t, migration.Spec.Template.Spec.Containers[0].SecurityContext, c.SecurityContext)
	assert.Equal(t, "require-contract", job.Spec.Template.Labels["app.kubernetes.io/component"])
	assert.NotContains(t, job.Spec.Template.Labels, "app.kubernetes.io/name", "the check's pod must not match the app's selectors")
	rules := job.Spec.PodFailurePolicy.Rules
	require.Len(t, rules, 2)
	assert.Equal(t, batchv1.PodFailurePolicyActionFailJob, rules[0].Action, "a refusal fails the Job at once")
	assert.Equal(t, []int32{3}, rules[0].OnExitCodes.Values)
	assert.Equal(t, "require-contract", *rules[0].OnExitCodes.ContainerName)
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
}

func TestTheRequireContractCheckRunsOneWeightBeforeTheMigrationAtAnyHookWeight(t *testing.T) {
	r := render(t, renderOptions{upgrade: true, values: "migration: {requirePreviousContract: true, hookWeight: -9}"})
	jobs := requireJobs(r)
	require.Len(t, jobs, 1)
	assert.Equal(t, "-10", jobs[0].Annotations["helm.sh/hook-weight"], "with the migration's ServiceAccount, Role and RoleBinding, which Helm creates first (by kind)")
}

func TestRequiringThePreviousContractIsNoPartOfTheIdentity(t *testing.T) {
	without := render(t, renderOptions{upgrade: true, values: "migration: {contract: {command: [/demo, contract]}}"})
	with := render(t, renderOptions{upgrade: true, values: requireValues})
	assert.Equal(t, without.deployment(t).Spec.Template.Annotations["premigrate.io/identity"], with.deployment(t).Spec.Template.Annotations["premigrate.io/identity"],
		"declaring it (or turning it off for one deploy) must not migrate again")
}
