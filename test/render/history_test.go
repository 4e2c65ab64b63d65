package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The migration keeps its run history in <fullname>-migration-runs by default: gate run is told where and how
// many runs to keep, and the migration's Role may write that ConfigMap, by name. runHistory: 0 writes none
// (no flag, no right), and a number other than the default is a new identity (the Job's command changes with it).
func TestTheMigrationKeepsItsRunHistoryUnlessTurnedOff(t *testing.T) {
	for _, c := range []struct {
		name   string
		values string
		want   string // --history-keep; empty: no history
	}{
		{"by default", "", "10"},
		{"with 3 runs", "migration: {runHistory: 3}", "3"},
		{"turned off", "migration: {runHistory: 0}", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, renderOptions{values: c.values})
			job := r.job(t)
			role := mustFind[*rbacv1.Role](t, r, "Role", job.Name)
			runs := fullname + "-migration-runs"
			if c.want == "" {
				assert.NotContains(t, container(t, job.Spec.Template.Spec.Containers, "migrate").Command, "--history")
				assert.NotContains(t, role.Rules[0].ResourceNames, runs)
				return
			}
			assert.Equal(t, runs, migrateArg(t, job, "--history"))
			assert.Equal(t, c.want, migrateArg(t, job, "--history-keep"))
			assert.Contains(t, role.Rules[0].ResourceNames, runs, "the migration may write its run history, by name")
		})
	}
	def, other := render(t, renderOptions{}), render(t, renderOptions{values: "migration: {runHistory: 3}"})
	assert.Equal(t, identityOf(t, def), identityOf(t, other), "the run history is no input of the migration: the same identity")
	assert.NotEqual(t, def.job(t).Name, other.job(t).Name, "another number is another Job command: another plain Job")
}
