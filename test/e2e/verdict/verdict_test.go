package verdict

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

var expected = []string{"rollback", "ttl-failed", "upgrades-helm3"}

func passed(names ...string) []Reported {
	var r []Reported
	for _, n := range names {
		r = append(r, Reported{Scenario: n, Result: Pass})
	}
	return r
}

// full is `make test-e2e`'s flags: the benchmarks skipped, nothing else filtered.
var full = Flags{}

func TestAScenarioIsSkippedOnlyWhenItDidNotFail(t *testing.T) {
	assert.Equal(t, Pass, ResultOf(false, false))
	assert.Equal(t, Skipped, ResultOf(false, true))
	assert.Equal(t, Fail, ResultOf(true, false))
	assert.Equal(t, Fail, ResultOf(true, true), "a test that failed, then skipped, failed")
}

func TestTheVerdictIsPassOnlyWhenAFinishedRunRanEveryExpectedScenarioOnceAndAllPassed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		run     Run
		verdict string
		reasons []string
	}{
		{
			name:    "every scenario passed once and go test exited 0",
			run:     Run{Reported: passed("upgrades-helm3", "rollback", "ttl-failed"), Finished: true},
			verdict: Pass,
		},
		{
			name:    "one expected scenario did not report",
			run:     Run{Reported: passed("rollback", "upgrades-helm3"), Finished: true},
			verdict: Incomplete,
			reasons: []string{"not run: ttl-failed"},
		},
		{
			name:    "a skipped scenario is no pass",
			run:     Run{Reported: append(passed("rollback", "upgrades-helm3"), Reported{"ttl-failed", Skipped}), Finished: true},
			verdict: Incomplete,
			reasons: []string{"skipped: ttl-failed"},
		},
		{
			name:    "a failed scenario fails the run",
			run:     Run{Reported: append(passed("rollback", "upgrades-helm3"), Reported{"ttl-failed", Fail}), Finished: true, ExitCode: 1},
			verdict: Fail,
			reasons: []string{"failed: ttl-failed", "go test's own exit code is 1"},
		},
		{
			name:    "go test exiting 1 fails the run though every scenario passed (a helper test failed)",
			run:     Run{Reported: passed(expected...), Finished: true, ExitCode: 1},
			verdict: Fail,
			reasons: []string{"go test's own exit code is 1"},
		},
		{
			name:    "a failure beats a scenario not run",
			run:     Run{Reported: []Reported{{"rollback", Fail}}, Finished: true, ExitCode: 1},
			verdict: Fail,
			reasons: []string{"failed: rollback", "not run: ttl-failed, upgrades-helm3", "go test's own exit code is 1"},
		},
		{
			name:    "a scenario reported twice is a defect of the suite",
			run:     Run{Reported: passed("rollback", "rollback", "ttl-failed", "upgrades-helm3"), Finished: true},
			verdict: Fail,
			reasons: []string{"reported more than once: rollback"},
		},
		{
			name:    "a scenario missing from the expected ones is a defect of the suite",
			run:     Run{Reported: passed("rollback", "ttl-failed", "upgrades-helm3", "ttl-zero"), Finished: true},
			verdict: Fail,
			reasons: []string{"not in the expected scenarios: ttl-zero"},
		},
		{
			name:    "with -count 2 each scenario reports twice",
			run:     Run{Reported: passed("rollback", "rollback", "ttl-failed", "ttl-failed", "upgrades-helm3", "upgrades-helm3"), Count: 2, Finished: true},
			verdict: Pass,
		},
		{
			name:    "a run still going is incomplete",
			run:     Run{Reported: passed(expected...)},
			verdict: Incomplete,
			reasons: []string{"the run has not finished"},
		},
		{
			name:    "a failed setup fails the run",
			run:     Run{Stopped: "setup failed: bin/helm is missing"},
			verdict: Fail,
			reasons: []string{"setup failed: bin/helm is missing", "not run: rollback, ttl-failed, upgrades-helm3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run.Expected = expected
			v := Decide(tc.run)
			assert.Equal(t, tc.verdict, v.Verdict)
			assert.Equal(t, tc.reasons, v.Reasons)
		})
	}
}

func TestOnlyARunWithoutRunSkipOrListIsTheFullSuite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flags  Flags
		filter string
	}{
		{"no flags", Flags{}, ""},
		{"a -run pattern", Flags{Run: "TestFlux|TestArgoCD"}, `-run "TestFlux|TestArgoCD"`},
		{"a -skip pattern", Flags{Skip: "TestFlux"}, `-skip "TestFlux"`},
		{"both", Flags{Run: "TestFlux", Skip: "TestFluxRuns"}, `-run "TestFlux" -skip "TestFluxRuns"`},
		{"a -list pattern", Flags{List: "."}, `-list "."`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.filter, tc.flags.Filter())
		})
	}
}

func TestAFullRunExitsOneUnlessItsVerdictIsPassAndAFilteredRunKeepsGoTestsCode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flags    Flags
		code     int
		reported []Reported
		exit     int
		line     string
	}{
		{
			name:     "a full run that passed exits 0",
			flags:    full,
			reported: passed(expected...),
			exit:     0,
			line:     "e2e verdict PASS: every expected scenario ran once and passed",
		},
		{
			name:     "a full run with one expected scenario not run exits 1 though go test exited 0",
			flags:    full,
			reported: passed("rollback", "upgrades-helm3"),
			exit:     1,
			line:     "e2e verdict INCOMPLETE, and the full suite must pass: not run: ttl-failed",
		},
		{
			name:     "a full run with a skipped scenario exits 1",
			flags:    full,
			reported: append(passed("rollback", "upgrades-helm3"), Reported{"ttl-failed", Skipped}),
			exit:     1,
			line:     "e2e verdict INCOMPLETE, and the full suite must pass: skipped: ttl-failed",
		},
		{
			name:     "a full run where go test exited 1 with every scenario passing exits 1",
			flags:    full,
			code:     1,
			reported: passed(expected...),
			exit:     1,
			line:     "e2e verdict FAIL, and the full suite must pass: go test's own exit code is 1",
		},
		{
			name:     "a run of the CI tier with a scenario not run exits 1 naming the tier",
			flags:    Flags{Asked: "tier ci (3 scenarios)"},
			reported: passed("rollback", "upgrades-helm3"),
			exit:     1,
			line:     "e2e verdict INCOMPLETE, and tier ci (3 scenarios) must pass: not run: ttl-failed",
		},
		{
			name:     "a run of the CI tier where every scenario passed exits 0 naming the tier",
			flags:    Flags{Asked: "tier ci (3 scenarios)"},
			reported: passed(expected...),
			exit:     0,
			line:     "e2e verdict PASS: every scenario of tier ci (3 scenarios) ran once and passed",
		},
		{
			name:     "a filtered run is not enforced and keeps go test's 0",
			flags:    Flags{Run: "TestRollback"},
			reported: passed("rollback"),
			exit:     0,
			line:     `e2e verdict INCOMPLETE, not enforced: the run was filtered (-run "TestRollback"); go test's own exit code 0 stands`,
		},
		{
			name:     "a filtered run is not enforced and keeps go test's 1",
			flags:    Flags{Run: "TestRollback"},
			code:     1,
			reported: []Reported{{"rollback", Fail}},
			exit:     1,
			line:     `e2e verdict FAIL, not enforced: the run was filtered (-run "TestRollback"); go test's own exit code 1 stands`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(Run{Expected: expected, Reported: tc.reported, Finished: true, ExitCode: tc.code})
			exit, line := Exit(tc.flags, tc.code, v)
			assert.Equal(t, tc.exit, exit)
			assert.Equal(t, tc.line, line)
		})
	}
}
