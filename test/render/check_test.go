package render

import (
	"strings"
	"testing"
)

// migration.check asks the database whether a recorded migration is applied (docs/design.md, "What a record
// means"): gate run gets it as one JSON array, it is part of the identity only when set, and a check that is
// not a list of strings is refused by the library too (a chart without the premigrate chart's schema).
func TestTheCheckReachesGateRunAsOneJSONArrayAndIsPartOfTheIdentityOnlyWhenSet(t *testing.T) {
	without := render(t, renderOptions{})
	with := render(t, renderOptions{values: "migration: {check: [/demo, migrate, check]}"})
	migrate := container(t, with.job(t).Spec.Template.Spec.Containers, "migrate")
	cmd := strings.Join(migrate.Command, " ")
	if !strings.Contains(cmd, ` --check ["/demo","migrate","check"] `) {
		t.Errorf("gate run does not get the check as one JSON array: %s", cmd)
	}
	if i, j := strings.Index(cmd, "--check"), strings.Index(cmd, " -- "); i < 0 || j < i {
		t.Errorf("--check is not a flag of gate run before the migration command: %s", cmd)
	}
	if c := strings.Join(container(t, without.job(t).Spec.Template.Spec.Containers, "migrate").Command, " "); strings.Contains(c, "--check") {
		t.Errorf("gate run gets --check without migration.check: %s", c)
	}
	a, b := without.job(t).Labels["premigrate.io/identity"], with.job(t).Labels["premigrate.io/identity"]
	if a == "" || a == b {
		t.Errorf("the identity with a check (%s) equals the one without (%s): a changed Job would keep its name", b, a)
	}
	// an empty check leaves the identity as it was before checks existed
	if empty := render(t, renderOptions{values: "migration: {check: []}"}).job(t).Labels["premigrate.io/identity"]; empty != a {
		t.Errorf("an empty check changed the identity: %s, want %s", empty, a)
	}
}

func TestTheLibraryRefusesACheckThatIsNotAListOfStrings(t *testing.T) {
	for _, bad := range []string{"migrations: {check: 'ledger check'}", "migrations: {check: [ledger, 3]}"} {
		_, err := renderValues(renderOptions{chart: exampleDir, values: bad, records: ledgerFullname + "-migrations"})
		if err == nil || !strings.Contains(err.Error(), "premigrate-lib: check must be a list") {
			t.Errorf("%s: error %v, want the library's refusal naming check", bad, err)
		}
	}
}
