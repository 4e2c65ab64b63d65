package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// scenarioResult is one scenario's line in results/e2e-report.json.
type scenarioResult struct {
	Scenario       string             `json:"scenario"`
	Result         string             `json:"result"` // pass or fail
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
// run shows as "not run" (a run cut short by a panic, a timeout or -run).
var expectedScenarios = []string{
	"adopter-control", "adopter-helm3", "adopter-helm4", "migration-proxy-sidecar",
	"concurrent-migrations", "control-1", "control-2", "upgrade-from-previous-helm3", "upgrade-from-previous-helm4", "ct-install", "database-down", "destructive-migration",
	"enable-later-helm3", "enable-later-helm4", "failed-migration", "gate-rbac", "gate-wait-in-app", "gate-wait-in-app-control", "gitops-revert-ttl",
	"job-mode-kubectl-apply", "job-mode-rollback-helm3", "job-mode-rollback-helm4", "migration-pod-killed",
	"reinstall-helm3", "reinstall-helm4", "rollback", "slow-database", "ttl-failed", "ttl-succeeded", "ttl-zero-wait-for-jobs",
	"upgrades-helm3", "upgrades-helm4",
	"flux-upgrades", "flux-failed-migration", "flux-hook-output-logs-control",
	"argocd-upgrades", "argocd-failed-migration", "argocd-selective-sync", "argocd-hook-mode",
}

var report struct {
	sync.Mutex
	started   time.Time
	scenarios []scenarioResult
	final     bool
}

func init() { report.started = time.Now() }

func reportPath() string { return filepath.Join(env.results, "e2e-report.json") }

// startReport removes an earlier run's report and writes this run's, every scenario not run yet: a run that
// dies leaves a report that says so.
func startReport() error {
	if err := os.Remove(reportPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the previous report: %w", err)
	}
	report.Lock()
	defer report.Unlock()
	_, _, err := saveReport()
	return err
}

// addResult records a finished scenario and rewrites the report at once.
func addResult(r scenarioResult) {
	report.Lock()
	defer report.Unlock()
	report.scenarios = append(report.scenarios, r)
	if _, _, err := saveReport(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e report:", err)
	}
}

// saveReport writes the JSON report: every expected scenario with its result ("pass", "fail" or "not run"),
// and the verdict: "pass" only when the run ended and every expected scenario ran and passed, "fail" when
// one failed, "incomplete" while running or when one did not run. Called with report locked.
func saveReport() (verdict string, notRun []string, err error) {
	sort.SliceStable(report.scenarios, func(i, j int) bool { return report.scenarios[i].Scenario < report.scenarios[j].Scenario })
	ran := map[string]bool{}
	verdict = "pass"
	for _, s := range report.scenarios {
		ran[s.Scenario] = true
		if s.Result != "pass" {
			verdict = "fail"
		}
	}
	for _, name := range expectedScenarios {
		if !ran[name] {
			notRun = append(notRun, name)
		}
	}
	if verdict == "pass" && (len(notRun) > 0 || !report.final) {
		verdict = "incomplete"
	}
	all := append([]scenarioResult(nil), report.scenarios...)
	for _, name := range notRun {
		all = append(all, scenarioResult{Scenario: name, Result: "not run"})
	}
	doc := map[string]any{
		"startedAt": report.started.UTC().Format(time.RFC3339),
		"wallSec":   time.Since(report.started).Round(time.Second).Seconds(),
		"finished":  report.final,
		"verdict":   verdict,
		"notRun":    notRun,
		"scenarios": all,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", nil, fmt.Errorf("encoding the report: %w", err)
	}
	tmp := reportPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return "", nil, fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, reportPath()); err != nil {
		return "", nil, fmt.Errorf("writing %s: %w", reportPath(), err)
	}
	return verdict, notRun, nil
}

// writeReport writes the final JSON report and prints the summary table.
func writeReport() error {
	report.Lock()
	defer report.Unlock()
	report.final = true
	verdict, notRun, err := saveReport()
	if err != nil {
		return err
	}
	path := reportPath()
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
	for _, name := range notRun {
		_, _ = fmt.Fprintf(tw, "%s\tNOT RUN\t\t\t\t\t\t\n", name)
	}
	_ = tw.Flush()
	fmt.Printf("verdict: %s; report: %s (whole run %s)\n", strings.ToUpper(verdict), path, time.Since(report.started).Round(time.Second))
	return nil
}

func median(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%.1fs", s[len(s)/2])
}

func resultOf(failed bool) string {
	if failed {
		return "fail"
	}
	return "pass"
}
