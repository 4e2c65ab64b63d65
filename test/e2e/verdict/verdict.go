// Package verdict decides what a run of the cluster tests (test/e2e) says: each scenario's result, the run's
// verdict, and the test binary's exit code. It also checks, before any cluster exists, that every test of
// the e2e package records a scenario or is listed as a helper test. It needs no cluster.
package verdict

import (
	"fmt"
	"slices"
	"strings"
)

// A scenario's result, and a run's verdict.
const (
	Pass       = "pass"
	Fail       = "fail"
	Skipped    = "skipped"
	NotRun     = "not run"
	Incomplete = "incomplete"
)

// ResultOf is a scenario's result from its test: a failure wins over a skip.
func ResultOf(failed, skipped bool) string {
	switch {
	case failed:
		return Fail
	case skipped:
		return Skipped
	}
	return Pass
}

// Reported is what one scenario reported when its test ended.
type Reported struct {
	Scenario string
	Result   string // pass, fail or skipped
}

// Run is what the verdict is decided from.
type Run struct {
	Expected []string   // the scenarios a full run runs
	Reported []Reported // what the scenarios reported, in any order
	Count    int        // go test's -count: how many times each scenario runs; 0 means 1
	Finished bool       // the tests ended (m.Run returned)
	ExitCode int        // go test's own exit code, once Finished
	Stopped  string     // why the run stopped before its tests (a failed setup), or ""
}

// Verdict is the run's verdict and what it is made of. The lists are sorted.
type Verdict struct {
	Verdict    string   // pass, fail or incomplete
	Failed     []string // scenarios that failed
	Skipped    []string // scenarios that were skipped
	NotRun     []string // expected scenarios that did not report (as often as -count says)
	Duplicated []string // expected scenarios that reported more often than -count says
	Unexpected []string // scenarios that reported but are not expected
	Reasons    []string // why the verdict is not pass, one short phrase each
}

// Decide returns the verdict: "pass" only when the run finished, every expected scenario reported exactly
// once (-count times) and passed, none was skipped, none reported that is not expected, and go test's own
// exit code is 0; "fail" when the run stopped before its tests, a scenario failed, go test's code is not 0,
// or a scenario reported twice or unexpected (a defect of the suite); otherwise "incomplete".
func Decide(r Run) Verdict {
	want := max(r.Count, 1)
	expected := map[string]bool{}
	for _, name := range r.Expected {
		expected[name] = true
	}
	var v Verdict
	times := map[string]int{}
	for _, s := range r.Reported {
		times[s.Scenario]++
		switch s.Result {
		case Pass:
		case Skipped:
			v.Skipped = append(v.Skipped, s.Scenario)
		default:
			v.Failed = append(v.Failed, s.Scenario)
		}
		if !expected[s.Scenario] {
			v.Unexpected = append(v.Unexpected, s.Scenario)
		}
	}
	for name := range expected {
		switch n := times[name]; {
		case n < want:
			v.NotRun = append(v.NotRun, name)
		case n > want:
			v.Duplicated = append(v.Duplicated, name)
		}
	}
	for _, l := range []*[]string{&v.Failed, &v.Skipped, &v.NotRun, &v.Duplicated, &v.Unexpected} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}

	if r.Stopped != "" {
		v.Reasons = append(v.Reasons, r.Stopped)
	}
	v.Reasons = appendList(v.Reasons, "failed", v.Failed)
	v.Reasons = appendList(v.Reasons, "skipped", v.Skipped)
	v.Reasons = appendList(v.Reasons, "not run", v.NotRun)
	v.Reasons = appendList(v.Reasons, fmt.Sprintf("reported more than %s", timesWord(want)), v.Duplicated)
	v.Reasons = appendList(v.Reasons, "not in the expected scenarios", v.Unexpected)
	if r.Finished && r.ExitCode != 0 {
		v.Reasons = append(v.Reasons, fmt.Sprintf("go test's own exit code is %d", r.ExitCode))
	}
	if !r.Finished && r.Stopped == "" {
		v.Reasons = append(v.Reasons, "the run has not finished")
	}

	switch {
	case r.Stopped != "" || len(v.Failed) > 0 || (r.Finished && r.ExitCode != 0) || len(v.Duplicated) > 0 || len(v.Unexpected) > 0:
		v.Verdict = Fail
	case !r.Finished || len(v.NotRun) > 0 || len(v.Skipped) > 0:
		v.Verdict = Incomplete
	default:
		v.Verdict = Pass
	}
	return v
}

func appendList(reasons []string, what string, names []string) []string {
	if len(names) == 0 {
		return reasons
	}
	return append(reasons, what+": "+strings.Join(names, ", "))
}

func timesWord(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// Flags are the go test flags that tell whether a run is the full suite, and what the run asked for.
type Flags struct {
	Run  string // -test.run
	Skip string // -test.skip
	List string // -test.list: the tests are listed, none runs
	// Asked names the scenarios the run was asked for when it is not the whole suite (E2E_TIER,
	// E2E_SCENARIOS), e.g. "tier ci (40 scenarios)": its verdict is enforced as a full run's is
	Asked string
}

// Filter says how the run is not the full suite, or "" when it is: no -run, no -skip, no -list (the
// benchmarks are a package of their own, test/bench, so nothing needs skipping).
func (f Flags) Filter() string {
	var by []string
	if f.Run != "" {
		by = append(by, fmt.Sprintf("-run %q", f.Run))
	}
	if f.Skip != "" {
		by = append(by, fmt.Sprintf("-skip %q", f.Skip))
	}
	if f.List != "" {
		by = append(by, fmt.Sprintf("-list %q", f.List))
	}
	return strings.Join(by, " ")
}

// Exit returns the test binary's exit code and one line that says why. A run of the full suite, or of what
// it asked for (a tier, named scenarios), must have the verdict pass, else the code is 1; a run filtered by
// go test's flags keeps go test's own code, its verdict not enforced.
func Exit(f Flags, code int, v Verdict) (int, string) {
	head := "e2e verdict " + strings.ToUpper(v.Verdict)
	if filter := f.Filter(); filter != "" {
		return code, fmt.Sprintf("%s, not enforced: the run was filtered (%s); go test's own exit code %d stands", head, filter, code)
	}
	what, every := "the full suite", "every expected scenario"
	if f.Asked != "" {
		what, every = f.Asked, "every scenario of "+f.Asked
	}
	if v.Verdict != Pass {
		return 1, fmt.Sprintf("%s, and %s must pass: %s", head, what, strings.Join(v.Reasons, "; "))
	}
	return code, head + ": " + every + " ran once and passed"
}
