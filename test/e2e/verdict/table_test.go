package verdict

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestARunsTableNamesWhatRanItsCommitAndEveryScenariosTierResultWallAndCPU(t *testing.T) {
	got := Table(Summary{Asked: "the whole suite (tier matrix)", Commit: "55b8618abcde", StartedAt: "2026-12-07T03:00:00Z",
		Verdict: Pass, WallSec: 3725, BusySec: 6000, BusyPct: 91},
		[]Row{
			{Promise: "no app pod starts before its migration ran", Scenario: "ttl-failed", Tier: "ci", Result: Pass, Helm: "kubectl", WallSec: 70.4, CPUSec: 50.2},
			{Promise: "no app pod starts before its migration ran", Scenario: "ttl-failed-scheduling-gate", Tier: "matrix", Result: NotRun},
		})
	assert.Contains(t, got, "- run: the whole suite (tier matrix)\n- commit: 55b8618abcde\n")
	assert.Contains(t, got, "- verdict: **PASS**, 2 scenarios, 62 min 5 s in all\n- machine: busy 91 % of the run, 6000 CPU-seconds\n")
	assert.Contains(t, got, "| no app pod starts before its migration ran | `ttl-failed` | ci | pass | kubectl | 70 | 50 |\n")
	assert.Contains(t, got, "| `ttl-failed-scheduling-gate` | matrix | not run | - | 0 | 0 |\n")
	assert.Contains(t, got, "| **all** | | | | | 70 | 50 |\n")
}
