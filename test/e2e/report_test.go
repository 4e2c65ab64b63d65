//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/premigrate/premigrate/test/e2e/verdict"
	"github.com/premigrate/premigrate/test/framework"
)

// scenarioResult is one scenario's line in results/e2e-report.json.
type scenarioResult struct {
	Scenario       string             `json:"scenario"`
	Promise        string             `json:"promise"` // what it proves (framework.Promises)
	Tier           string             `json:"tier"`    // the smallest run it is part of (framework.Tiers)
	Result         string             `json:"result"`  // pass, fail or skipped
	Helm           string             `json:"helm,omitempty"`
	Upgrades       int                `json:"upgrades,omitempty"`
	DurationsSec   []float64          `json:"durationsSec,omitempty"`
	FailedRequests *int               `json:"failedRequests,omitempty"`
	SentRequests   int                `json:"sentRequests,omitempty"`
	LongestGapMs   int64              `json:"longestGapMs,omitempty"`
	GateLatencyMs  []int64            `json:"gateLatencyMs,omitempty"`
	Numbers        map[string]float64 `json:"numbers,omitempty"`
	WallSec        float64            `json:"wallSec"`
	// CPUSec is the machine's busy CPU time while the scenario ran, split equally among the scenarios running
	// at each moment (framework.CPUShares): what the scenario costs the suite, to choose the next cut from
	CPUSec float64 `json:"cpuSec"`
}

// cpuShares attributes the machine's busy CPU time to the running scenarios (scenario() starts and stops each).
var cpuShares = framework.NewCPUShares(framework.CPUClock{}.Read)

// scenarios are the declared scenarios: each test file declares the scenarios it proves at package level
// (framework.Scenarios.Declare), and a full run must report each exactly once, and no other. expected is
// their list, sealed when the run starts; a scenario that did not run shows as "not run" (a run cut short by a
// panic, a timeout or -run).
var (
	scenarios framework.Scenarios
	expected  []string
)

var report struct {
	sync.Mutex
	started   time.Time
	scenarios []scenarioResult
	final     bool
	code      int    // go test's own exit code, once final
	stopped   string // why the run stopped before its tests (a failed setup), or ""
	machine   framework.Machine
	cpuStart  framework.CPUTimes // the host's CPU times when the run began; zero when unreadable
}

func init() { report.started = time.Now() }

// measureMachine records the machine's core speed and the host's CPU times at the start of the run: the
// report then says how busy the machine was and how fast, so that two runs' walls can be compared.
func measureMachine() {
	m := framework.NewMachine()
	t, err := framework.CPUClock{}.Read()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e report: the machine's CPU times are not in the report:", err)
	}
	report.Lock()
	defer report.Unlock()
	report.machine, report.cpuStart = m, t
}

// machineNow is the machine with the CPU times since the run began. Called with report locked.
func machineNow() framework.Machine {
	m := report.machine
	if report.cpuStart != (framework.CPUTimes{}) {
		if t, err := (framework.CPUClock{}).Read(); err == nil {
			m.BusySec, m.IdleSec = t.Busy-report.cpuStart.Busy, t.Idle-report.cpuStart.Idle
		}
	}
	return m
}

func reportPath() string { return filepath.Join(env.Results, "e2e-report.json") }

// removeReport removes an earlier run's report: run calls it first, so a run that stops early never leaves
// the earlier run's report behind as its own.
func removeReport() error {
	if err := os.Remove(reportPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the previous report: %w", err)
	}
	return nil
}

// startReport writes this run's report, every scenario not run yet: a run that dies leaves a report that
// says so.
func startReport() error {
	report.Lock()
	defer report.Unlock()
	_, err := saveReport()
	return err
}

// stoppedReport writes the report of a run that stopped before its tests, with the verdict fail.
func stoppedReport(why string) error {
	report.Lock()
	defer report.Unlock()
	report.final, report.stopped = true, why
	if err := os.MkdirAll(env.Results, 0o755); err != nil {
		return fmt.Errorf("creating the results folder: %w", err)
	}
	_, err := saveReport()
	return err
}

// addResult records a finished scenario and rewrites the report at once.
func addResult(r scenarioResult) {
	report.Lock()
	defer report.Unlock()
	report.scenarios = append(report.scenarios, r)
	if _, err := saveReport(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e report:", err)
	}
}

// saveReport writes the JSON report: every expected scenario with its result ("pass", "fail", "skipped" or
// "not run"), and the verdict (verdict.Decide): "pass" only when the run ended with go test's exit code 0
// and every expected scenario ran once and passed, "fail" when one failed or go test's code is not 0,
// "incomplete" while running or when one did not run or was skipped. Called with report locked; the
// verdict comes back even when the file cannot be written.
func saveReport() (verdict.Verdict, error) {
	sort.SliceStable(report.scenarios, func(i, j int) bool { return report.scenarios[i].Scenario < report.scenarios[j].Scenario })
	in := verdict.Run{Expected: expected, Count: testCount(), Finished: report.final, ExitCode: report.code, Stopped: report.stopped}
	for _, s := range report.scenarios {
		in.Reported = append(in.Reported, verdict.Reported{Scenario: s.Scenario, Result: s.Result})
	}
	v := verdict.Decide(in)
	all := append([]scenarioResult(nil), report.scenarios...)
	for _, name := range v.NotRun {
		all = append(all, scenarioResult{Scenario: name, Promise: string(scenarios.PromiseOf(name)), Tier: string(scenarios.TierOf(name)), Result: verdict.NotRun})
	}
	byPromise(all)
	doc := map[string]any{
		"startedAt":  report.started.UTC().Format(time.RFC3339),
		"asked":      asked,
		"wallSec":    time.Since(report.started).Round(time.Second).Seconds(),
		"finished":   report.final,
		"verdict":    v.Verdict,
		"reasons":    v.Reasons,
		"notRun":     v.NotRun,
		"failed":     v.Failed,
		"skipped":    v.Skipped,
		"duplicated": v.Duplicated,
		"unexpected": v.Unexpected,
		"scenarios":  all,
		"machine":    machineNow(),
	}
	switch {
	case report.stopped != "":
		doc["stopped"] = report.stopped
	case report.final:
		doc["goTestExitCode"] = report.code
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return v, fmt.Errorf("encoding the report: %w", err)
	}
	tmp := reportPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return v, fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, reportPath()); err != nil {
		return v, fmt.Errorf("writing %s: %w", reportPath(), err)
	}
	return v, nil
}

// writeReport writes the final JSON report with go test's own exit code, prints the summary table and
// returns the verdict, also when the file cannot be written.
func writeReport(code int) (verdict.Verdict, error) {
	report.Lock()
	defer report.Unlock()
	report.final, report.code = true, code
	v, err := saveReport()
	rows := append([]scenarioResult(nil), report.scenarios...)
	for _, name := range v.NotRun {
		rows = append(rows, scenarioResult{Scenario: name, Promise: string(scenarios.PromiseOf(name)), Tier: string(scenarios.TierOf(name)), Result: verdict.NotRun})
	}
	byPromise(rows)
	if terr := writeTable(v, rows); terr != nil {
		fmt.Fprintln(os.Stderr, "e2e report:", terr)
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	promise := ""
	for _, s := range rows {
		if s.Promise != promise {
			promise = s.Promise
			_, _ = fmt.Fprintf(tw, "\n%s\t\t\t\t\t\t\t\t\t\n", strings.ToUpper(promise))
			_, _ = fmt.Fprintln(tw, "  SCENARIO\tTIER\tRESULT\tHELM\tUPGRADES\tMEDIAN UPGRADE\tFAILED REQ\tSENT\tWALL\tCPU")
		}
		failed := "-"
		if s.FailedRequests != nil {
			failed = fmt.Sprint(*s.FailedRequests)
		}
		_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%.0fs\t%.0fs\n", s.Scenario, s.Tier, strings.ToUpper(s.Result), s.Helm,
			s.Upgrades, median(s.DurationsSec), failed, s.SentRequests, s.WallSec, s.CPUSec)
	}
	_ = tw.Flush()
	var walls float64
	for _, s := range report.scenarios {
		walls += s.WallSec
	}
	m := machineNow()
	if m.BusySec+m.IdleSec > 0 {
		fmt.Printf("machine: %d CPUs, one core hashes %.0f MiB/s (sha256); busy %.0f%% of the run (%.0f CPU-seconds); the scenarios' walls sum to %.0f s\n",
			m.CPUs, m.SHA256MiBps, 100*m.BusySec/(m.BusySec+m.IdleSec), m.BusySec, walls)
	}
	fmt.Printf("verdict: %s; report: %s (whole run %s)\n", strings.ToUpper(v.Verdict), reportPath(), time.Since(report.started).Round(time.Second))
	return v, err
}

// tablePath is the run's Markdown table (verdict.Table), beside the JSON report: make test-matrix commits it.
func tablePath() string { return filepath.Join(env.Results, "e2e-report.md") }

// writeTable writes the run's Markdown table. Called with report locked.
func writeTable(v verdict.Verdict, rows []scenarioResult) error {
	m := machineNow()
	sum := verdict.Summary{Asked: asked, Commit: treeCommit(), StartedAt: report.started.UTC().Format(time.RFC3339), Verdict: v.Verdict,
		WallSec: time.Since(report.started).Seconds(), BusySec: m.BusySec}
	if m.BusySec+m.IdleSec > 0 {
		sum.BusyPct = 100 * m.BusySec / (m.BusySec + m.IdleSec)
	}
	var table []verdict.Row
	for _, r := range rows {
		table = append(table, verdict.Row{Promise: r.Promise, Scenario: r.Scenario, Tier: r.Tier, Result: r.Result, Helm: r.Helm, WallSec: r.WallSec, CPUSec: r.CPUSec})
	}
	if err := os.WriteFile(tablePath(), []byte(verdict.Table(sum, table)), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tablePath(), err)
	}
	return nil
}

// treeCommit names the commit the tested tree came from, with "+ changes" when it had uncommitted ones, or says
// why it cannot (a copy without .git, such as the mutants' tree).
func treeCommit() string {
	head, err := exec.Command("git", "-C", env.RepoRoot, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown (no git history here)"
	}
	c := strings.TrimSpace(string(head))
	if st, err := exec.Command("git", "-C", env.RepoRoot, "status", "--porcelain").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += " + changes"
	}
	return c
}

// testCount is go test's -count, how many times each test runs; 1 before the flags are parsed.
func testCount() int {
	if f := flag.Lookup("test.count"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil {
			return n
		}
	}
	return 1
}

// testFlags are the go test flags that tell whether the run is the full suite.
func testFlags() verdict.Flags {
	value := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return verdict.Flags{Run: value("test.run"), Skip: value("test.skip"), List: value("test.list")}
}

func median(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%.1fs", s[(len(s)-1)/2]) // the lower median of an even count
}

// resultOf is a scenario's result from its test: "fail", "skipped" or "pass".
func resultOf(failed, skipped bool) string { return verdict.ResultOf(failed, skipped) }

// byPromise orders results by the promise they prove (framework.Promises' order), then by scenario.
func byPromise(rs []scenarioResult) {
	rank := func(p string) int {
		for i, q := range framework.Promises {
			if string(q) == p {
				return i
			}
		}
		return len(framework.Promises)
	}
	sort.SliceStable(rs, func(i, j int) bool {
		if a, b := rank(rs[i].Promise), rank(rs[j].Promise); a != b {
			return a < b
		}
		return rs[i].Scenario < rs[j].Scenario
	})
}

// recordLoad puts the load's numbers in the scenario's line of the report.
func recordLoad(res *scenarioResult, rep framework.LoadReport) {
	res.FailedRequests, res.SentRequests, res.LongestGapMs = &rep.Failed, rep.Sent, rep.LongestGapMs
	if res.Numbers == nil {
		res.Numbers = map[string]float64{}
	}
	res.Numbers["slowestRequestMs"] = float64(rep.SlowestMs)
	res.Numbers["loadGeneratorStallMs"] = float64(rep.LongestStallMs)
}
