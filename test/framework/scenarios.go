package framework

import (
	"fmt"
	"slices"
	"strings"
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

// Tier is which run a scenario belongs to. Every scenario runs in the matrix (make test-matrix); the CI tier
// (make test, all that CI runs) is the part of it that keeps every promise clause, every mutant's catching
// scenario and the witness's controls, at a cost that fits CI. docs/development.md says how to choose.
type Tier string

// The tiers, from the smallest run to the whole.
const (
	// CI scenarios run in make test and in make test-matrix.
	CI Tier = "ci"
	// Matrix scenarios run only in make test-matrix: the other Helm and wait-mode variants, the repetitions,
	// the controls and paths that no mutant needs and whose clause a CI scenario already proves.
	Matrix Tier = "matrix"
)

// Tiers are the tiers a run can ask for, smallest first.
var Tiers = []Tier{CI, Matrix}

// Includes says whether a run of tier t runs a scenario declared in tier s: the matrix runs everything.
func (t Tier) Includes(s Tier) bool { return t == Matrix || t == s }

// ParseTier reads a run's tier (E2E_TIER): ci or matrix; an empty value is the matrix, the whole suite.
func ParseTier(v string) (Tier, error) {
	switch Tier(v) {
	case "":
		return Matrix, nil
	case CI, Matrix:
		return Tier(v), nil
	}
	return "", fmt.Errorf("tier %q: want %s or %s", v, CI, Matrix)
}

// Scenario is a declared scenario: the ID the report lists, the promise it proves and its tier. Only Declare
// and DeclareEach make one, so a test can record only a declared scenario.
type Scenario struct {
	id      string
	promise Promise
	tier    Tier
}

// ID is the scenario's name in the report.
func (s Scenario) ID() string { return s.id }

// Promise is what the scenario proves.
func (s Scenario) Promise() Promise { return s.promise }

// Tier is the smallest run the scenario is part of.
func (s Scenario) Tier() Tier { return s.tier }

// Variant is one variant of a DeclareEach: its name and its tier.
type Variant struct {
	name string
	tier Tier
}

// In is the variant name in tier t.
func In(t Tier, name string) Variant { return Variant{name: name, tier: t} }

// Scenarios is the list of declared scenarios: what a full run must report, each exactly once. Scenarios are
// declared where their test is, at package level (var x = scenarios.Declare(...)), so the list is whole
// before the tests start; Seal ends the declaring.
type Scenarios struct {
	mu       sync.Mutex
	all      []Scenario
	sealed   bool
	selected map[string]bool // what this run runs (Select); nil until then
}

// Declare declares the scenario id, which proves p, in tier t. A second declaration of an ID, an empty ID, a
// promise not in Promises, a tier not in Tiers or a declaration after Seal panics: the list is code, and a
// mistake in it is the programmer's.
func (s *Scenarios) Declare(p Promise, t Tier, id string) Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.sealed:
		panic(fmt.Sprintf("scenario %q is declared after the run started: declare it at package level", id))
	case id == "":
		panic("a scenario needs an ID")
	case !slices.Contains(Promises, p):
		panic(fmt.Sprintf("scenario %q proves %q, which is not one of framework.Promises", id, p))
	case !slices.Contains(Tiers, t):
		panic(fmt.Sprintf("scenario %q is in tier %q, which is not one of framework.Tiers", id, t))
	}
	for _, d := range s.all {
		if d.id == id {
			panic(fmt.Sprintf("scenario %q is declared twice", id))
		}
	}
	sc := Scenario{id: id, promise: p, tier: t}
	s.all = append(s.all, sc)
	return sc
}

// DeclareEach declares one scenario per variant, prefix-variant (upgrades-helm3, upgrades-helm4), each in its
// variant's tier, and returns them by variant name.
func (s *Scenarios) DeclareEach(p Promise, prefix string, variants ...Variant) map[string]Scenario {
	if len(variants) == 0 {
		panic(fmt.Sprintf("scenarios %q: no variants", prefix))
	}
	out := map[string]Scenario{}
	for _, v := range variants {
		out[v.name] = s.Declare(p, v.tier, prefix+"-"+v.name)
	}
	return out
}

// Select ends the declaring (Seal) and chooses what this run runs: the scenarios named in ids when there are
// any (each must be declared: a mutant's cluster run names the scenario that catches it), else every scenario
// the tier includes. It returns the chosen IDs, sorted: the scenarios the run must report, each once.
func (s *Scenarios) Select(t Tier, ids []string) ([]string, error) {
	s.Seal()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.selected = map[string]bool{}
	declared := map[string]Scenario{}
	for _, d := range s.all {
		declared[d.id] = d
	}
	var unknown []string
	for _, id := range ids {
		if _, ok := declared[id]; !ok {
			unknown = append(unknown, id)
		}
		s.selected[id] = true
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("no scenario is declared as %s", strings.Join(unknown, ", "))
	}
	if len(ids) == 0 {
		for _, d := range s.all {
			if t.Includes(d.tier) {
				s.selected[d.id] = true
			}
		}
	}
	out := make([]string, 0, len(s.selected))
	for id := range s.selected {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// Selected says whether this run runs the scenario; before Select, every scenario is.
func (s *Scenarios) Selected(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.selected == nil || s.selected[id]
}

// InTier lists the IDs of the scenarios declared in tier t exactly (not what a run of t includes), sorted.
func (s *Scenarios) InTier(t Tier) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, d := range s.all {
		if d.tier == t {
			ids = append(ids, d.id)
		}
	}
	slices.Sort(ids)
	return ids
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

// TierOf is the tier of the scenario id, or "" when it was not declared.
func (s *Scenarios) TierOf(id string) Tier {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.all {
		if d.id == id {
			return d.tier
		}
	}
	return ""
}
