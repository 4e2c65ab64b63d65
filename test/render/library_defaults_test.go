package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The library's defaults as an adopter gets them: examples/ledger sets none of the values below, and an upgrade
// that finds its records renders the pre-upgrade hook.

const (
	ledgerJob     = ledgerFullname + "-migrate"
	ledgerRecords = ledgerFullname + "-migrations"
	ledgerStore   = ledgerFullname + "-migration-records"
	ledgerRuns    = ledgerFullname + "-migration-runs"
)

// ledgerHookJob is the example's migration Job on an upgrade: the pre-upgrade hook, named without identity.
func ledgerHookJob(t *testing.T) (*result, *batchv1.Job) {
	t.Helper()
	r := renderLedger(t, "", true)
	job := r.job(t)
	require.Equal(t, ledgerJob, job.Name, "the hook Job is named without its identity")
	return r, job
}

func TestTheLibrarysHookJobIsAPreUpgradeHookThatKeepsAFailedJobAndPrintsItsLog(t *testing.T) {
	_, job := ledgerHookJob(t)
	assert.Equal(t, map[string]string{
		"helm.sh/hook":                   "pre-upgrade",
		"helm.sh/hook-weight":            "0",
		"helm.sh/hook-delete-policy":     "before-hook-creation",
		"helm.sh/hook-output-log-policy": "hook-failed",
	}, job.Annotations)
}

func TestTheLibrarysJobRetriesTwiceWithinFifteenMinutesAndExitCode3FailsItAtOnce(t *testing.T) {
	_, job := ledgerHookJob(t)
	assert.Equal(t, any(int32(2)), valueOf(job.Spec.BackoffLimit), "backoffLimit")
	assert.Equal(t, any(int64(900)), valueOf(job.Spec.ActiveDeadlineSeconds), "activeDeadlineSeconds")
	assert.Equal(t, asYAML(t, failFastOn3), asYAML(t, failJobRules(job)),
		"one FailJob rule: exit code 3 of the migrate container")
	assert.Equal(t, "3", migrateArg(t, job, "--fail-fast-exit-codes"), "the ledger's own refusal (3, its failFastExitCodes) passes through gate run")
}

func TestTheLibraryFailsTheGatesRefusalAtOnceAndOfTheAdoptersCodesOnlyThoseItNames(t *testing.T) {
	job := renderLedger(t, "migrations: {failFastExitCodes: null}", true).job(t)
	assert.Equal(t, asYAML(t, failFastOn3), asYAML(t, failJobRules(job)), "the gate's refusal (3) is no failure a retry fixes")
	assert.NotContains(t, container(t, job.Spec.Template.Spec.Containers, "migrate").Command, "--fail-fast-exit-codes",
		"the library's default: every failure of the adopter's migration is retried (backoffLimit), its 3 too")
	job = renderLedger(t, "migrations: {failFastExitCodes: [7, 3]}", true).job(t)
	assert.Equal(t, []int32{3, 7}, failJobRules(job)[0].OnExitCodes.Values)
	assert.Equal(t, "3,7", migrateArg(t, job, "--fail-fast-exit-codes"), "gate run passes the adopter's codes through")
	job = renderLedger(t, "migrations: {failFastExitCodes: [9]}", true).job(t)
	assert.Equal(t, []int32{3, 9}, failJobRules(job)[0].OnExitCodes.Values, "the refusal beside the adopter's codes")
}

func TestThePremigrateChartFailsTheGatesRefusalAtOnceForEveryImageAndTheDemosOwnToo(t *testing.T) {
	r := render(t, renderOptions{upgrade: true})
	assert.Equal(t, asYAML(t, failFastOn3), asYAML(t, failJobRules(r.job(t))), "the demo exits 3 when it refuses to drop data")
	assert.Equal(t, "3", migrateArg(t, r.job(t), "--fail-fast-exit-codes"), "the demo's refusal is passed through")
	r = render(t, renderOptions{upgrade: true, values: "global: {imageRegistry: mirror.example.com}"})
	assert.Equal(t, "3", migrateArg(t, r.job(t), "--fail-fast-exit-codes"), "the demo behind a mirror is still the demo")
	r = render(t, renderOptions{upgrade: true, values: "image: {repository: registry.example.com/shop}\ncommand: [/shop]"})
	assert.Equal(t, asYAML(t, failFastOn3), asYAML(t, failJobRules(r.job(t))), "the gate's refusal, whatever the image")
	assert.NotContains(t, container(t, r.job(t).Spec.Template.Spec.Containers, "migrate").Command, "--fail-fast-exit-codes",
		"another image's exit codes are its own: its 3 is retried")
}

func TestTheLibrarysGateRunKeepsTwentyRecords(t *testing.T) {
	_, job := ledgerHookJob(t)
	assert.Equal(t, "20", migrateArg(t, job, "--keep"))
	assert.Equal(t, ledgerRuns, migrateArg(t, job, "--history"), "every run leaves its outcome and last output lines")
	assert.Equal(t, "10", migrateArg(t, job, "--history-keep"))
	assert.Equal(t, ledgerRecords, migrateArg(t, job, "--records"))
	assert.Equal(t, ledgerStore, migrateArg(t, job, "--store"), "the records are kept outside the release")
}

func TestTheLibrarysGateRoleOnlyReadsTheMigrationJobAndTheRecordsByName(t *testing.T) {
	r, _ := ledgerHookJob(t)
	role := mustFind[*rbacv1.Role](t, r, "Role", ledgerFullname+"-gate")
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, ResourceNames: []string{ledgerJob}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{ledgerRecords, ledgerStore}, Verbs: []string{"get", "list", "watch"}},
	}, role.Rules)
}

func TestTheLibrarysMigrationRoleOnlyWritesTheRecordsAndItsHookJobIsRenderedWithItsOwner(t *testing.T) {
	r, job := ledgerHookJob(t)
	role := mustFind[*rbacv1.Role](t, r, "Role", ledgerJob)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{ledgerRecords, ledgerStore, ledgerRuns}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, ResourceNames: []string{job.Name}, Verbs: []string{"get"}},
	}, role.Rules)
	require.Len(t, job.OwnerReferences, 1)
	assert.Equal(t, ledgerRecords, job.OwnerReferences[0].Name)
	assert.Equal(t, "ConfigMap", job.OwnerReferences[0].Kind)
}
