package verdict

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestTheCITierMustHoldEveryMutantsScenarioEveryPromiseBothControllersAndTheWitnessControls(t *testing.T) {
	ci := func(id, promise string) Declaration {
		return Declaration{ID: id, Promise: promise, Tier: TierCI, File: "x_test.go"}
	}
	matrix := func(id, promise string) Declaration {
		return Declaration{ID: id, Promise: promise, Tier: TierMatrix, File: "x_test.go"}
	}
	whole := []Declaration{
		ci("control-1", "Before"), ci("control-time-clause", "Before"), ci("flux-upgrades", "GitOps"), ci("argocd-upgrades", "GitOps"),
		ci("rollback", "EveryPath"), matrix("rollback-helm4", "EveryPath"),
	}
	promises := []string{"Before", "GitOps", "EveryPath"}
	for _, tc := range []struct {
		name    string
		decls   []Declaration
		mutants []MutantScenario
		problem string // "" when the check passes
	}{
		{name: "a tier with every mutant's scenario, promise, controller and control passes", decls: whole,
			mutants: []MutantScenario{{"m", "rollback"}, {"unit-only", ""}}},
		{name: "a mutant caught only in the matrix fails naming it", decls: whole, mutants: []MutantScenario{{"m", "rollback-helm4"}},
			problem: "mutant m is caught by scenario rollback-helm4 (x_test.go), which is not in the CI tier"},
		{name: "a mutant whose scenario no test declares fails naming it", decls: whole, mutants: []MutantScenario{{"m", "gone"}},
			problem: "mutant m names scenario gone, which no test declares"},
		{name: "a promise with no CI scenario fails naming it", decls: whole[:4], mutants: nil,
			problem: "promise EveryPath has no scenario in the CI tier"},
		{name: "a controller with no CI scenario fails naming it", decls: append([]Declaration{matrix("argocd-upgrades", "GitOps")}, whole[4:]...),
			problem: "no scenario argocd-* is in the CI tier"},
		{name: "a witness control in the matrix fails naming it", decls: append([]Declaration{matrix("control-1", "Before")}, whole[1:]...),
			problem: "the witness control control-1 is not in the CI tier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTiers(tc.decls, promises, tc.mutants)
			if tc.problem == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.problem)
		})
	}
}

func TestDeclarationsAreReadFromTheSourceWithTheirTierAndFile(t *testing.T) {
	dir := pkg(t, map[string]string{"before_test.go": `package e2e
var (
	up = scenarios.DeclareEach(framework.Before, "upgrades", framework.In(framework.CI, "helm4"), framework.In(framework.Matrix, "helm3"))
	c  = waitModes(scenarios.Declare(framework.Before, framework.Matrix, "ttl"), scenarios.Declare(framework.Before, framework.CI, "ttl-held"))
)`})
	decls, err := Declarations(dir)
	require.NoError(t, err)
	assert.Equal(t, []Declaration{
		{ID: "ttl", Promise: "Before", Tier: TierMatrix, File: "before_test.go"},
		{ID: "ttl-held", Promise: "Before", Tier: TierCI, File: "before_test.go"},
		{ID: "upgrades-helm3", Promise: "Before", Tier: TierMatrix, File: "before_test.go"},
		{ID: "upgrades-helm4", Promise: "Before", Tier: TierCI, File: "before_test.go"},
	}, decls)
}

func TestADeclarationWhoseTierIsNotLiteralIsRefusedNamingWhere(t *testing.T) {
	for name, src := range map[string]string{
		"a variant from a function": `var up = scenarios.DeclareEach(framework.Before, "upgrades", variants()...)`,
		"a tier in a variable":      `var up = scenarios.Declare(framework.Before, tier, "upgrades")`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Declarations(pkg(t, map[string]string{"before_test.go": "package e2e\n" + src}))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "before_test.go:2")
		})
	}
}

// The cluster tests' own declarations against the mutant table: the check make test runs without a cluster.
func TestMakeTestsCITierHoldsEveryMutantsScenarioEveryPromiseBothControllersAndTheWitnessControls(t *testing.T) {
	// the test binary runs in test/e2e/verdict: the cluster tests are one folder up, the repository three
	decls, err := Declarations("..")
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "hack", "mutants", "mutants.yaml"))
	require.NoError(t, err)
	var table []struct {
		ID       string `json:"id"`
		Scenario string `json:"scenario"`
	}
	require.NoError(t, yaml.Unmarshal(b, &table))
	require.NotEmpty(t, table)
	var mutants []MutantScenario
	for _, m := range table {
		mutants = append(mutants, MutantScenario{Mutant: m.ID, Scenario: m.Scenario})
	}
	var promises []string
	for _, p := range PromiseFiles {
		promises = append(promises, p)
	}
	assert.NoError(t, CheckTiers(decls, promises, mutants))
}
