//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/premigrate/premigrate/test/e2e/verdict"
)

// scenarioResult is one scenario's line in results/e2e-report.json.
type scenarioResult struct {
	Scenario       string             `json:"scenario"`
	Result         string             `json:"result"` // pass, fail or skipped
	Helm           string             `json:"helm,omitempty"`
	Upgrades       int                `json:"upgrades,omitempty"`
	DurationsSec   []float64          `json:"durationsSec,omitempty"`
	FailedRequests *int               `json:"failedRequests,omitempty"`
	SentRequests   int                `json:"sentRequests,omitempty"`
	LongestGapMs   int64              `json:"longestGapMs,omitempty"`
	GateLatencyMs  []int64            `json:"gateLatencyMs,omitempty"`
	Numbers        map[string]float64 `json:"numbers,omitempty"`
	WallSec        float64            `json:"wallSec"`
}

// expectedScenarios are the scenarios a full `make test-e2e` runs: the report lists each, and one that did not
// run shows as "not run" (a run cut short by a panic, a timeout or -run). A full run must report each exactly
// once, and no other: a scenario added to the tests goes on this list too.
var expectedScenarios = []string{
	"adopter-control", "adopter-helm3", "adopter-helm4", "adopter-library-defaults", "migration-proxy-sidecar",
	"concurrent-migrations", "back-to-back-migrations", "held-back-older-migration", "timed-out-install-retried-helm3", "timed-out-install-retried-helm4", "install-racing-upgrade-helm3", "install-racing-upgrade-helm4", "database-reset-embedded", "database-reset-embedded-control", "database-replaced-external", "database-restored-from-dump", "database-restored-from-dump-control", "external-database-first-install-fails-fast-helm3", "external-database-first-install-fails-fast-helm4", "external-database-first-install-plain-job-control", "control-1", "control-2", "control-time-clause", "no-hooks-upgrade", "records-and-watch-on-a-real-api-server", "signalled-migration", "records-unreadable", "rollback-past-kept-records", "upgrade-from-previous-helm3", "upgrade-from-previous-helm4", "ct-install", "database-down", "destructive-migration",
	"enable-later-helm3", "enable-later-helm4", "failed-migration", "gate-rbac", "gate-wait-in-app", "gate-wait-in-app-control", "gitops-revert-ttl",
	"job-mode-kubectl-apply", "job-mode-rollback-helm3", "job-mode-rollback-helm4", "migration-pod-killed",
	"reinstall-helm3", "reinstall-helm4", "reinstall-kept-database-helm3", "reinstall-kept-database-helm4",
	"force-upgrade-helm3", "force-upgrade-helm4", "helm-timeout-helm3", "helm-timeout-helm4", "rollback", "slow-database", "ttl-failed", "ttl-succeeded", "ttl-zero-wait-for-jobs",
	"upgrades-helm3", "upgrades-helm4",
	"flux-upgrades", "flux-failed-migration", "flux-hook-output-logs-control",
	"argocd-upgrades", "argocd-failed-migration", "argocd-selective-sync", "argocd-hook-mode", "argocd-replace",
}

var report struct {
	sync.Mutex
	started   time.Time
	scenarios []scenarioResult
	final     bool
	code      int    // go test's own exit code, once final
	stopped   string // why the run stopped before its tests (a failed setup), or ""
}

func init() { report.started = time.Now() }

func reportPath() string { return filepath.Join(env.results, "e2e-report.json") }

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
	if err := os.MkdirAll(env.results, 0o755); err != nil {
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
	in := verdict.Run{Expected: expectedScenarios, Count: testCount(), Finished: report.final, ExitCode: report.code, Stopped: report.stopped}
	for _, s := range report.scenarios {
		in.Reported = append(in.Reported, verdict.Reported{Scenario: s.Scenario, Result: s.Result})
	}
	v := verdict.Decide(in)
	all := append([]scenarioResult(nil), report.scenarios...)
	for _, name := range v.NotRun {
		all = append(all, scenarioResult{Scenario: name, Result: verdict.NotRun})
	}
	doc := map[string]any{
		"startedAt":  report.started.UTC().Format(time.RFC3339),
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
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "SCENARIO\tRESULT\tHELM\tUPGRADES\tMEDIAN UPGRADE\tFAILED REQ\tSENT\tWALL")
	for _, s := range report.scenarios {
		failed := "-"
		if s.FailedRequests != nil {
			failed = fmt.Sprint(*s.FailedRequests)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%.0fs\n", s.Scenario, strings.ToUpper(s.Result), s.Helm,
			s.Upgrades, median(s.DurationsSec), failed, s.SentRequests, s.WallSec)
	}
	for _, name := range v.NotRun {
		_, _ = fmt.Fprintf(tw, "%s\tNOT RUN\t\t\t\t\t\t\n", name)
	}
	_ = tw.Flush()
	fmt.Printf("verdict: %s; report: %s (whole run %s)\n", strings.ToUpper(v.Verdict), reportPath(), time.Since(report.started).Round(time.Second))
	return v, err
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
