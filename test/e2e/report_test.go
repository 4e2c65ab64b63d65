package e2e

import (
	"encoding/json"
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

var report struct {
	sync.Mutex
	started   time.Time
	scenarios []scenarioResult
}

func init() { report.started = time.Now() }

func addResult(r scenarioResult) {
	report.Lock()
	defer report.Unlock()
	report.scenarios = append(report.scenarios, r)
}

// writeReport writes the JSON report and prints the summary table.
func writeReport() error {
	report.Lock()
	defer report.Unlock()
	sort.SliceStable(report.scenarios, func(i, j int) bool { return report.scenarios[i].Scenario < report.scenarios[j].Scenario })
	doc := map[string]any{
		"startedAt": report.started.UTC().Format(time.RFC3339),
		"wallSec":   time.Since(report.started).Round(time.Second).Seconds(),
		"scenarios": report.scenarios,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	path := filepath.Join(env.results, "e2e-report.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
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
	_ = tw.Flush()
	fmt.Printf("report: %s (whole run %s)\n", path, time.Since(report.started).Round(time.Second))
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
