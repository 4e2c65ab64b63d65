package render

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The records are bound to the database they were made on (docs/design.md, "What a record means"): the gate
// and the migration both name it the same way, and may read only the object that names it.
func TestTheRecordsAreBoundToTheDatabaseTheReleaseUses(t *testing.T) {
	claim := "persistentvolumeclaim/data-" + fullname + "-postgresql-0"
	cases := []struct {
		name   string
		values string
		// args are the database flags of gate wait and gate run; rule is the Roles' extra rule (nil: none)
		args    []string
		rule    *rbacv1.PolicyRule
		urlFrom *corev1.SecretKeySelector
	}{
		{name: "the embedded database's claim, with persistence", values: "",
			args: []string{"--database-object", claim},
			rule: &rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, ResourceNames: []string{"data-" + fullname + "-postgresql-0"}, Verbs: []string{"get"}}},
		{name: "the embedded database's pod, whose emptyDir holds the data without persistence", values: "postgresql: {persistence: {enabled: false}}",
			args: []string{"--database-object", "pod/" + fullname + "-postgresql-0"},
			rule: &rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{fullname + "-postgresql-0"}, Verbs: []string{"get"}}},
		{name: "an external database's URL, hashed from the same Secret key as the app's", values: externalDB,
			args:    []string{"--database-url-env", "PREMIGRATE_DATABASE_URL"},
			urlFrom: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "prod-db"}, Key: "url"}},
		{name: "nothing when the binding is off", values: "migration: {bindRecordsToDatabase: false}"},
		{name: "the default when the binding is null", values: "migration: {bindRecordsToDatabase: null}",
			args: []string{"--database-object", claim},
			rule: &rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, ResourceNames: []string{"data-" + fullname + "-postgresql-0"}, Verbs: []string{"get"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, renderOptions{values: c.values})
			wait := container(t, r.deployment(t).Spec.Template.Spec.InitContainers, "wait-for-migration")
			migrate := container(t, r.job(t).Spec.Template.Spec.Containers, "migrate")
			if got := databaseFlags(wait.Args); !equalStrings(got, c.args) {
				t.Errorf("gate wait's database flags %v, want %v", got, c.args)
			}
			if got := databaseFlags(migrate.Command); !equalStrings(got, c.args) {
				t.Errorf("gate run's database flags %v, want %v (the same as gate wait's, or no record would ever match)", got, c.args)
			}
			for where, ctr := range map[string]corev1.Container{"gate wait": wait, "gate run": migrate} {
				e, ok := envVar(ctr.Env, "PREMIGRATE_DATABASE_URL")
				switch {
				case c.urlFrom == nil && ok:
					t.Errorf("%s has PREMIGRATE_DATABASE_URL without a URL binding: %+v", where, e)
				case c.urlFrom != nil && (!ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || *e.ValueFrom.SecretKeyRef != *c.urlFrom):
					t.Errorf("%s's PREMIGRATE_DATABASE_URL = %+v, want from %+v", where, e, c.urlFrom)
				}
			}
			// the migration's Role carries its Job's name (beside a plain Job, "-migrate-<identity>")
			for _, role := range []string{fullname + "-gate", r.job(t).Name} {
				var extra []rbacv1.PolicyRule
				for _, rule := range mustFind[*rbacv1.Role](t, r, "Role", role).Rules {
					// the migration's get on any pod: whether the holder of a lock that was not renewed still runs
					lockHolder := equalStrings(rule.Resources, []string{"pods"}) && len(rule.ResourceNames) == 0 && equalStrings(rule.Verbs, []string{"get"})
					if !equalStrings(rule.Resources, []string{"configmaps"}) && !equalStrings(rule.Resources, []string{"jobs"}) && !lockHolder {
						extra = append(extra, rule)
					}
				}
				switch {
				case c.rule == nil && len(extra) != 0:
					t.Errorf("Role %s has rules %+v beyond the Jobs and ConfigMaps", role, extra)
				case c.rule != nil && (len(extra) != 1 || !equalStrings(extra[0].Resources, c.rule.Resources) ||
					!equalStrings(extra[0].ResourceNames, c.rule.ResourceNames) || !equalStrings(extra[0].Verbs, c.rule.Verbs)):
					t.Errorf("Role %s's rules beyond the Jobs and ConfigMaps %+v, want only %+v", role, extra, *c.rule)
				}
			}
		})
	}
}

func TestTheAppContainerWaitingItselfNamesTheDatabaseLikeTheMigration(t *testing.T) {
	r := render(t, renderOptions{values: externalDB + "gate: {waitIn: app}\n"})
	app := container(t, r.deployment(t).Spec.Template.Spec.Containers, "app")
	migrate := container(t, r.job(t).Spec.Template.Spec.Containers, "migrate")
	if got, want := databaseFlags(app.Command), databaseFlags(migrate.Command); !equalStrings(got, want) || len(got) == 0 {
		t.Errorf("the app container's gate names the database with %v, the migration with %v", got, want)
	}
	if e, ok := envVar(app.Env, "PREMIGRATE_DATABASE_URL"); !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "prod-db" {
		t.Errorf("the app container's PREMIGRATE_DATABASE_URL = %+v, want it from Secret prod-db", e)
	}
}

// databaseFlags are the --database-* flags and their values in args, before any "--".
func databaseFlags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			break
		}
		if (args[i] == "--database-object" || args[i] == "--database-url-env") && i+1 < len(args) {
			out = append(out, args[i], args[i+1])
			i++
		}
	}
	return out
}
