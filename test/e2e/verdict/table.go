package verdict

import (
	"fmt"
	"strings"
)

// Row is one scenario's line of a run's table.
type Row struct {
	Promise, Scenario, Tier, Result, Helm string
	WallSec, CPUSec                       float64
}

// Summary is what the table's heading says of the run.
type Summary struct {
	Asked     string // what the run asked for: "tier ci (40 of 96 scenarios)", "the whole suite (tier matrix)"
	Commit    string // the commit the run's tree came from, "+ changes" when it had uncommitted ones
	StartedAt string // RFC 3339
	Verdict   string
	WallSec   float64 // the whole run
	BusySec   float64 // the machine's busy CPU seconds during the run
	BusyPct   float64
}

// Table is the run's Markdown table (make test-matrix commits it as docs/matrix.md): one row per scenario in the
// order given (by promise), with its tier, result, wall and CPU seconds, under a heading that says what ran,
// on which commit, and the verdict.
func Table(s Summary, rows []Row) string {
	var b strings.Builder
	b.WriteString("# The cluster scenarios' last run\n\n")
	b.WriteString("Written by the cluster tests (`results/e2e-report.md`); `make test-matrix` copies it here. CPU is the machine's busy\n")
	b.WriteString("time while the scenario ran, split among the scenarios running at the same moment.\n\n")
	fmt.Fprintf(&b, "- run: %s\n- commit: %s\n- started: %s\n- verdict: **%s**, %d scenarios, %.0f min %.0f s in all\n",
		s.Asked, s.Commit, s.StartedAt, strings.ToUpper(s.Verdict), len(rows), float64(int(s.WallSec)/60), float64(int(s.WallSec)%60))
	if s.BusySec > 0 {
		fmt.Fprintf(&b, "- machine: busy %.0f %% of the run, %.0f CPU-seconds\n", s.BusyPct, s.BusySec)
	}
	var wall, cpu float64
	b.WriteString("\n| promise | scenario | tier | result | helm | wall s | CPU s |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		helm := r.Helm
		if helm == "" {
			helm = "-"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | %.0f | %.0f |\n", r.Promise, r.Scenario, r.Tier, r.Result, helm, r.WallSec, r.CPUSec)
		wall += r.WallSec
		cpu += r.CPUSec
	}
	fmt.Fprintf(&b, "| **all** | | | | | %.0f | %.0f |\n", wall, cpu)
	return b.String()
}
