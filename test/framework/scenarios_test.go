package framework

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDeclaredScenariosAreListedSortedWithTheirPromise(t *testing.T) {
	var s Scenarios
	up := s.DeclareEach(Before, "upgrades", "helm4", "helm3")
	rb := s.Declare(EveryPath, "rollback")
	assert.Equal(t, "upgrades-helm3", up["helm3"].ID())
	assert.Equal(t, EveryPath, rb.Promise())
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
		{"a second declaration", func(s *Scenarios) { s.Declare(Before, "x"); s.Declare(Once, "x") }, `scenario "x" is declared twice`},
		{"an empty ID", func(s *Scenarios) { s.Declare(Before, "") }, "a scenario needs an ID"},
		{"an unknown promise", func(s *Scenarios) { s.Declare("fast", "x") }, `scenario "x" proves "fast", which is not one of framework.Promises`},
		{"no variants", func(s *Scenarios) { s.DeclareEach(Before, "x") }, `scenarios "x": no variants`},
		{"after the run started", func(s *Scenarios) { s.Seal(); s.Declare(Before, "late") }, `scenario "late" is declared after the run started: declare it at package level`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s Scenarios
			assert.PanicsWithValue(t, c.want, func() { c.declare(&s) })
		})
	}
}
