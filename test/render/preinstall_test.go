package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 23 item 12: a database that exists before the release (an external one) lets hook mode run the
// install's migration as the same Helm hook as every upgrade's, pre-install,pre-upgrade, with its RBAC as
// hooks of weight -10; `helm template` renders it too. A hook that finds no records ConfigMap (an install, helm
// template, an upgrade after it was deleted) has no owner to name and does not pass --create-records: Helm's
// install creates the release's objects after its hooks and fails on one that exists already. The embedded
// database does not exist before the release: its install keeps the plain Job; so does an external database
// whose URL Secret the release brings itself (Helm creates it after the pre-install hooks, which would wait for it
// until --timeout), unless preInstallHook says otherwise.
func TestWithAnExternalDatabaseTheInstallsMigrationIsAPreInstallHook(t *testing.T) {
	const both = "pre-install,pre-upgrade"
	cases := []struct {
		name           string
		o              renderOptions
		hook           string // the Job's helm.sh/hook; "" is a plain Job
		owned          bool   // owned by the records ConfigMap
		createsRecords bool   // gate run --create-records
	}{
		{name: "an install on an external database", o: renderOptions{values: externalDB}, hook: both},
		{name: "helm template on an external database", o: renderOptions{values: externalDB, noCluster: true}, hook: both},
		{name: "an upgrade on an external database", o: renderOptions{values: externalDB, upgrade: true}, hook: both, owned: true, createsRecords: true},
		{name: "an upgrade on an external database that finds no records ConfigMap", o: renderOptions{values: externalDB, upgrade: true, noRecords: true}, hook: both},
		{name: "an install on an external database with preInstallHook false", o: renderOptions{values: externalDB + "migration: {preInstallHook: false}"}, createsRecords: true},
		{name: "an upgrade on an external database with preInstallHook false", o: renderOptions{values: externalDB + "migration: {preInstallHook: false}", upgrade: true}, hook: "pre-upgrade", owned: true, createsRecords: true},
		{name: "an install on the embedded database", o: renderOptions{}, createsRecords: true},
		{name: "an upgrade on the embedded database", o: renderOptions{upgrade: true}, hook: "pre-upgrade", owned: true, createsRecords: true},
		{name: "job mode on an external database", o: renderOptions{values: externalDB + "migration: {mode: job, preInstallHook: true}"}, createsRecords: true},
		{name: "an install on an external database whose Secret the release brings", o: renderOptions{values: externalDB, secretFromRelease: true}, createsRecords: true},
		{name: "an install on an external database whose Secret the release brings, with preInstallHook true", o: renderOptions{values: externalDB + "migration: {preInstallHook: true}", secretFromRelease: true}, hook: both},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.o)
			job := r.job(t)
			assert.Equal(t, c.hook, job.Annotations["helm.sh/hook"], "the Job's hook events")
			if c.hook != "" {
				assert.Equal(t, fullname+"-migrate", job.Name)
			} else {
				assert.True(t, isPlainJobName(fullname, job.Name), "a plain Job named by its spec: %s", job.Name)
			}
			if c.owned {
				require.Len(t, job.OwnerReferences, 1, "the hook Job's owner")
				assert.Equal(t, fullname+"-migrations", job.OwnerReferences[0].Name)
			} else {
				assert.Empty(t, job.OwnerReferences, "no records ConfigMap to own the Job")
			}
			command := container(t, job.Spec.Template.Spec.Containers, "migrate").Command
			assert.Equal(t, c.createsRecords, slices.Contains(command, "--create-records"), "gate run --create-records in %v", command)
			for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding"} {
				name := fullname + "-migrate"
				if c.hook == "" && kind != "ServiceAccount" {
					name = job.Name // beside a plain Job they carry its name
				}
				o, ok := r.find(kind, name)
				require.True(t, ok, "no %s %s: %s", kind, name, r.summary())
				a := o.meta.GetAnnotations()
				assert.Equal(t, c.hook, a["helm.sh/hook"], "%s %s: its hook events follow the Job's", kind, name)
				if c.hook != "" {
					assert.Equal(t, "-10", a["helm.sh/hook-weight"], "%s %s exists before the Job", kind, name)
				}
				assert.Equal(t, c.owned, len(o.meta.GetOwnerReferences()) == 1, "%s %s owned: %v", kind, name, o.meta.GetOwnerReferences())
			}
			d := r.deployment(t)
			gate := container(t, d.Spec.Template.Spec.InitContainers, "wait-for-migration")
			assert.Contains(t, strings.Join(gate.Args, " "), "--job "+job.Name+" ", "the gate waits for the Job rendered")
			_, ok := r.find("ConfigMap", fullname+"-migrations")
			assert.True(t, ok, "the records ConfigMap is a release object: Helm creates it after the pre-install hook")
		})
	}
}
