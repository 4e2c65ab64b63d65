package framework

import (
	"fmt"
	"slices"
	"sync"
)

// Promise is what a scenario proves, one clause of premigrate's promise (docs/design.md): the report groups
// scenarios by it.
type Promise string

// The clauses of the promise, in the order the report lists them.
const (
	Before         Promise = "no app pod starts before its migration ran"
	ThisDatabase   Promise = "the records describe this database"
	Once           Promise = "no migration runs twice or at once"
	Forward        Promise = "never backwards, no data dropped unasked"
	NeverSkipped   Promise = "a migration that cannot run stops the deploy"
	EveryPath      Promise = "on every path: install, upgrade, rollback, reinstall, TTL"
	GitOps         Promise = "under Argo CD and Flux"
	Adoption       Promise = "in an adopter's own chart"
	LeastPrivilege Promise = "restricted pods, name-scoped rights"
	Contract       Promise = "nothing dropped while older code runs"
)

// Promises are the clauses in the report's order.
var Promises = []Promise{Before, ThisDatabase, Once, Forward, NeverSkipped, EveryPath, GitOps, Adoption, LeastPrivilege, Contract}

// Scenario is a declared scenario: the ID the report lists and the promise it proves. Only Declare and
// DeclareEach make one, so a test can record only a declared scenario.
type Scenario struct {
	id      string
	promise Promise
}

// ID is the scenario's name in the report.
func (s Scenario) ID() string { return s.id }

// Promise is what the scenario proves.
func (s Scenario) Promise() Promise { return s.promise }

// Scenarios is the list of declared scenarios: what a full run must report, each exactly once. Scenarios are
// declared where their test is, at package level (var x = scenarios.Declare(...)), so the list is whole
// before the tests start; Seal ends the declaring.
type Scenarios struct {
	mu     sync.Mutex
	all    []Scenario
	sealed bool
}

// Declare declares the scenario id, which proves p. A second declaration of an ID, an empty ID, a promise
// not in Promises or a declaration after Seal panics: the list is code, and a mistake in it is the
// programmer's.
func (s *Scenarios) Declare(p Promise, id string) Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.sealed:
		panic(fmt.Sprintf("scenario %q is declared after the run started: declare it at package level", id))
	case id == "":
		panic("a scenario needs an ID")
	case !slices.Contains(Promises, p):
		panic(fmt.Sprintf("scenario %q proves %q, which is not one of framework.Promises", id, p))
	}
	for _, d := range s.all {
		if d.id == id {
			panic(fmt.Sprintf("scenario %q is declared twice", id))
		}
	}
	sc := Scenario{id: id, promise: p}
	s.all = append(s.all, sc)
	return sc
}

// DeclareEach declares one scenario per variant, prefix-variant (upgrades-helm3, upgrades-helm4), and returns
// them by variant.
func (s *Scenarios) DeclareEach(p Promise, prefix string, variants ...string) map[string]Scenario {
	if len(variants) == 0 {
		panic(fmt.Sprintf("scenarios %q: no variants", prefix))
	}
	out := map[string]Scenario{}
	for _, v := range variants {
		out[v] = s.Declare(p, prefix+"-"+v)
	}
	return out
}

// Seal ends the declaring and returns the IDs of every declared scenario, sorted.
func (s *Scenarios) Seal() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed = true
	return s.idsLocked()
}

// IDs are the IDs declared so far, sorted.
func (s *Scenarios) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idsLocked()
}

func (s *Scenarios) idsLocked() []string {
	ids := make([]string, 0, len(s.all))
	for _, d := range s.all {
		ids = append(ids, d.id)
	}
	slices.Sort(ids)
	return ids
}

// PromiseOf is the promise the scenario id proves, or "" when it was not declared.
func (s *Scenarios) PromiseOf(id string) Promise {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.all {
		if d.id == id {
			return d.promise
		}
	}
	return ""
}
