//go:build e2e

package e2e

import (
	"github.com/premigrate/premigrate/test/framework"
)

// recordLoad puts the load's numbers in the scenario's line of the report.
func recordLoad(res *scenarioResult, rep framework.LoadReport) {
	res.FailedRequests, res.SentRequests, res.LongestGapMs = &rep.Failed, rep.Sent, rep.LongestGapMs
	if res.Numbers == nil {
		res.Numbers = map[string]float64{}
	}
	res.Numbers["slowestRequestMs"] = float64(rep.SlowestMs)
	res.Numbers["loadGeneratorStallMs"] = float64(rep.LongestStallMs)
}
