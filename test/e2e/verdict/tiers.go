package verdict

import (
	"fmt"
	"slices"
	"strings"
)

// Tier names as the framework package spells them in a declaration (framework.CI, framework.Matrix).
const (
	TierCI     = "CI"
	TierMatrix = "Matrix"
)

// WitnessControls are the scenarios that show the witness (the app's own record of the schema it found at
// start, which the gate does not write) catching what it must: a pod started before its migration (control-1:
// job mode without the gate) and a pod started before a migration that changed nothing it reads
// (control-time-clause). Every CI run proves its witness can fail, so they are in the CI tier.
var WitnessControls = []string{"control-1", "control-time-clause"}

// GitOpsControllers are the ID prefixes of the scenarios each GitOps controller runs: the CI tier keeps one of
// each, or "under Argo CD and Flux" would be proven only in the matrix.
var GitOpsControllers = []string{"flux-", "argocd-"}

// MutantScenario is a mutant of hack/mutants/mutants.yaml and the cluster scenario that must catch it ("" for
// a mutant that is unit only).
type MutantScenario struct {
	Mutant   string
	Scenario string
}

// CheckTiers returns an error naming everything that keeps the CI tier (make test) from being a proof on its
// own: a mutant whose scenario is not declared or not in the CI tier; a promise (promises: the names of
// framework.Promises) with no CI scenario; a GitOps controller with none; a witness control outside it.
func CheckTiers(decls []Declaration, promises []string, mutants []MutantScenario) error {
	byID := map[string]Declaration{}
	for _, d := range decls {
		byID[d.ID] = d
	}
	ci := func(id string) bool { return byID[id].Tier == TierCI }
	var problems []string
	for _, d := range decls {
		if d.Tier != TierCI && d.Tier != TierMatrix {
			problems = append(problems, fmt.Sprintf("scenario %s is in tier framework.%s, which is neither framework.CI nor framework.Matrix", d.ID, d.Tier))
		}
	}
	for _, m := range mutants {
		switch d, ok := byID[m.Scenario]; {
		case m.Scenario == "":
		case !ok:
			problems = append(problems, fmt.Sprintf("mutant %s names scenario %s, which no test declares", m.Mutant, m.Scenario))
		case d.Tier != TierCI:
			problems = append(problems, fmt.Sprintf("mutant %s is caught by scenario %s (%s), which is not in the CI tier: declare it framework.CI, "+
				"or name a CI scenario that catches it (make test-mutants MUTANTS_LEVEL=cluster MUTANTS=%s)", m.Mutant, m.Scenario, d.File, m.Mutant))
		}
	}
	for _, p := range promises {
		if !slices.ContainsFunc(decls, func(d Declaration) bool { return d.Promise == p && d.Tier == TierCI }) {
			problems = append(problems, fmt.Sprintf("promise %s has no scenario in the CI tier", p))
		}
	}
	for _, prefix := range GitOpsControllers {
		if !slices.ContainsFunc(decls, func(d Declaration) bool { return strings.HasPrefix(d.ID, prefix) && d.Tier == TierCI }) {
			problems = append(problems, fmt.Sprintf("no scenario %s* is in the CI tier: each GitOps controller needs one", prefix))
		}
	}
	for _, c := range WitnessControls {
		if !ci(c) {
			problems = append(problems, fmt.Sprintf("the witness control %s is not in the CI tier", c))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("the CI tier does not prove what make test must:\n\t%s", strings.Join(problems, "\n\t"))
	}
	return nil
}
