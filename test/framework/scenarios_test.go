package framework

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeclaredScenariosAreListedSortedWithTheirPromise(t *testing.T) {
	var s Scenarios
	up := s.DeclareEach(Before, "upgrades", In(CI, "helm4"), In(Matrix, "helm3"))
	rb := s.Declare(EveryPath, CI, "rollback")
	assert.Equal(t, "upgrades-helm3", up["helm3"].ID())
	assert.Equal(t, EveryPath, rb.Promise())
	assert.Equal(t, Matrix, up["helm3"].Tier())
	assert.Equal(t, CI, s.TierOf("upgrades-helm4"))
	assert.Equal(t, Tier(""), s.TierOf("never-declared"))
	assert.Equal(t, Before, s.PromiseOf("upgrades-helm4"))
	assert.Equal(t, Promise(""), s.PromiseOf("never-declared"))
	assert.Equal(t, []string{"rollback", "upgrades-helm3", "upgrades-helm4"}, s.Seal())
}

func TestAMistakeInTheDeclarationsPanicsNamingTheScenario(t *testing.T) {
	for _, c := range []struct {
		name    string
		declare func(s *Scenarios)
		want    string
	}{
		{"a second declaration", func(s *Scenarios) { s.Declare(Before, CI, "x"); s.Declare(Once, Matrix, "x") }, `scenario "x" is declared twice`},
		{"an empty ID", func(s *Scenarios) { s.Declare(Before, CI, "") }, "a scenario needs an ID"},
		{"an unknown promise", func(s *Scenarios) { s.Declare("fast", CI, "x") }, `scenario "x" proves "fast", which is not one of framework.Promises`},
		{"an unknown tier", func(s *Scenarios) { s.Declare(Before, "nightly", "x") }, `scenario "x" is in tier "nightly", which is not one of framework.Tiers`},
		{"no variants", func(s *Scenarios) { s.DeclareEach(Before, "x") }, `scenarios "x": no variants`},
		{"after the run started", func(s *Scenarios) { s.Seal(); s.Declare(Before, CI, "late") }, `scenario "late" is declared after the run started: declare it at package level`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s Scenarios
			assert.PanicsWithValue(t, c.want, func() { c.declare(&s) })
		})
	}
}

func TestARunChoosesItsTiersScenariosOrTheScenariosItNames(t *testing.T) {
	declare := func() *Scenarios {
		var s Scenarios
		s.DeclareEach(Before, "upgrades", In(CI, "helm4"), In(Matrix, "helm3"))
		s.Declare(EveryPath, Matrix, "rollback")
		return &s
	}
	for _, tc := range []struct {
		name string
		tier Tier
		ids  []string
		want []string
	}{
		{"the CI tier runs only its scenarios", CI, nil, []string{"upgrades-helm4"}},
		{"the matrix runs every scenario", Matrix, nil, []string{"rollback", "upgrades-helm3", "upgrades-helm4"}},
		{"named scenarios run whatever their tier", CI, []string{"rollback"}, []string{"rollback"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := declare()
			got, err := s.Select(tc.tier, tc.ids)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			for _, id := range s.IDs() {
				assert.Equal(t, slices.Contains(tc.want, id), s.Selected(id), id)
			}
		})
	}
}

func TestARunThatNamesAnUndeclaredScenarioOrTierIsRefusedNamingIt(t *testing.T) {
	var s Scenarios
	s.Declare(EveryPath, CI, "rollback")
	_, err := s.Select(CI, []string{"rollback", "rolback"})
	assert.EqualError(t, err, "no scenario is declared as rolback")
	_, err = ParseTier("nightly")
	assert.EqualError(t, err, `tier "nightly": want ci or matrix`)
	tier, err := ParseTier("")
	require.NoError(t, err)
	assert.Equal(t, Matrix, tier, "an unset tier is the whole suite")
}
