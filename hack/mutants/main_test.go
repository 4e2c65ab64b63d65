package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// The repository root, from this package's folder.
const root = "../.."

func table(t *testing.T) []mutant {
	t.Helper()
	ms, err := readTable(filepath.Join(root, "hack/mutants/mutants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestEveryMutantOfTheTableAppliesExactlyOnceToTheTree(t *testing.T) {
	if err := checkEdits(root, table(t)); err != nil {
		t.Fatal(err)
	}
}

func TestTheTableHasAtLeastTwentyMutantsOfTheLibraryAndTheGate(t *testing.T) {
	ms := table(t)
	lib, gate := 0, 0
	for _, m := range ms {
		for _, e := range m.Edits {
			switch {
			case strings.HasPrefix(e.File, "charts/premigrate-lib/"):
				lib++
			case strings.HasPrefix(e.File, "cmd/gate/"), strings.HasPrefix(e.File, "internal/gate/"), strings.HasPrefix(e.File, "internal/record/"):
				gate++
			}
		}
	}
	if len(ms) < 20 || lib == 0 || gate == 0 {
		t.Errorf("%d mutants, %d edits of the library and %d of the gate: want at least 20 mutants covering both", len(ms), lib, gate)
	}
}

func TestNoClusterResultIsOlderThanTheFilesItsMutantEdits(t *testing.T) {
	results, err := readClusterResults(filepath.Join(root, clusterResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	ms := table(t)
	broken, stale, err := staleClusterResults(root, ms, results)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range broken {
		t.Errorf("stale cluster result, run `make test-mutants MUTANTS_LEVEL=cluster MUTANTS=<id>` again: %s", s)
	}
	t.Logf("%d cluster results ran another scenario or before their scenario's test changed (MUTANTS.md says which)", len(stale))
	known := map[string]bool{}
	for _, m := range ms {
		known[m.ID] = true
	}
	notRun := 0
	for id, r := range results {
		if !known[id] {
			t.Errorf("cluster result of %s, which is no mutant of the table", id)
		}
		if r.Outcome != caught {
			t.Errorf("mutant %s was not caught at the cluster level on %s: %s %s", id, r.Commit, r.Outcome, r.Detail)
		}
	}
	for _, m := range ms {
		_, ok := results[m.ID]
		switch {
		case ok && m.UnitOnly != "":
			t.Errorf("mutant %s has a cluster result but says it has no cluster scenario (unitOnly)", m.ID)
		case !ok && m.UnitOnly == "":
			notRun++
		}
	}
	t.Logf("%d of %d mutants not run at the cluster level (MUTANTS.md says so)", notRun, len(ms))
}

func TestMutantsMdListsEveryMutantOfTheTable(t *testing.T) {
	b, err := readFile(filepath.Join(root, "MUTANTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range table(t) {
		if !strings.Contains(b, "| `"+m.ID+"` |") {
			t.Errorf("MUTANTS.md does not list mutant %s: run `go run ./hack/mutants --level unit --markdown MUTANTS.md`", m.ID)
		}
	}
}

func TestJudgeCountsOnlyAFailedAssertionAsACatch(t *testing.T) {
	failLine := "    x_test.go:12: want 1, got 2\n"
	cases := []struct {
		name string
		rep  testReport
		want string
	}{
		{"a failed assertion", testReport{results: map[string]string{"TestX": "fail"}, output: map[string][]string{"TestX": {failLine}}}, caught},
		{"a testify failure", testReport{results: map[string]string{"TestX": "fail"}, output: map[string][]string{"TestX": {"        \tError Trace:\t/x/y_test.go:40\n"}}}, caught},
		{"a build failure", testReport{buildFail: true, results: map[string]string{}}, errored},
		{"a timeout", testReport{timedOut: true, results: map[string]string{"TestX": "fail"}, output: map[string][]string{"TestX": {failLine}}}, errored},
		{"a panic", testReport{panicked: true, results: map[string]string{"TestX": "fail"}}, errored},
		{"a failure without an assertion", testReport{results: map[string]string{"TestX": "fail"}, output: map[string][]string{"TestX": {"--- FAIL: TestX\n"}}}, errored},
		{"every test passed", testReport{results: map[string]string{"TestX": "pass"}}, survived},
		{"no test ran", testReport{results: map[string]string{}}, errored},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := tc.rep
			if rep.output == nil {
				rep.output = map[string][]string{}
			}
			if tc.want == errored && rep.results["TestX"] == "fail" {
				rep.exitErr = errFailed
			}
			if got, _ := rep.judge(); got != tc.want {
				t.Errorf("judge() = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTheClusterBaselineAcceptsOnlyARunWhoseAskedScenariosAllPassed(t *testing.T) {
	failed := errors.New("exit status 1")
	cases := []struct {
		name    string
		results map[string]string
		exitErr error
		bad     int
	}{
		{"every test passed or skipped as not asked for", map[string]string{"TestA": "pass", "TestB": "skip"}, nil, 0},
		{"a subtest failed under a passing parent is judged by its parent", map[string]string{"TestA": "pass", "TestA/sub": "fail"}, nil, 0},
		{"a test failed", map[string]string{"TestA": "pass", "TestB": "fail"}, failed, 2},
		{"the verdict failed the run: an asked scenario did not run", map[string]string{"TestA": "skip"}, failed, 1},
		{"nothing ran", map[string]string{}, failed, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := testReport{results: tc.results, exitErr: tc.exitErr}
			if got := rep.notPassing(); len(got) != tc.bad {
				t.Errorf("notPassing() = %q, want %d problems", got, tc.bad)
			}
		})
	}
}

func TestASecondMutantRunOnTheSameTreeStopsNamingIt(t *testing.T) {
	tree := filepath.Join(t.TempDir(), "mutants", "tree")
	unlock, err := lockTree(tree)
	if err != nil {
		t.Fatalf("the first run could not lock %s: %v", tree, err)
	}
	if _, err := lockTree(tree); err == nil || !strings.Contains(err.Error(), "another mutant run is using "+tree) {
		t.Fatalf("the second run got %v, want a refusal naming %s", err, tree)
	}
	unlock()
	unlock2, err := lockTree(tree)
	if err != nil {
		t.Fatalf("after the first run ended, the next could not lock %s: %v", tree, err)
	}
	unlock2()
}

func TestTheRegistryScenarioTheRunnerBuildsAReleaseForIsAScenarioOfTheClusterSuite(t *testing.T) {
	files, err := scenarioFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files[registryScenario]; !ok {
		t.Errorf("no test/e2e test declares scenario %s: the mutants it judges would run on the unmutated release", registryScenario)
	}
}

func TestEveryMutantNamesAScenarioTheClusterTestsDeclare(t *testing.T) {
	files, err := scenarioFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 90 {
		t.Errorf("%d scenarios read from test/e2e, want the suite's (over 90): the declarations changed shape", len(files))
	}
	for _, m := range table(t) {
		if _, ok := files[m.Scenario]; m.Scenario != "" && !ok {
			t.Errorf("mutant %s names scenario %s, which no test/e2e file declares", m.ID, m.Scenario)
		}
	}
}

func TestTheClusterLevelKnowsAClusterFromKindsListByItsWholeName(t *testing.T) {
	for _, tc := range []struct {
		list string
		want bool
	}{
		{"premigrate\n", true},
		{"other\npremigrate\n", true},
		{"No kind clusters found.\n", false},
		{"premigrate-old\n", false},
	} {
		if got := clusterListed(tc.list, "premigrate"); got != tc.want {
			t.Errorf("clusterListed(%q) = %t, want %t", tc.list, got, tc.want)
		}
	}
}
