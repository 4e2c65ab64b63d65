//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strconv"
)

// The depth knobs: how many upgrades the scenarios that repeat one run. make test-matrix runs every one
// (unset); make test (the CI tier) runs fewer (Makefile: E2E_UPGRADES=4, E2E_GITOPS_UPGRADES=2): the
// statistical depth is the matrix's, and every repetition in CI still changes the identity, runs a
// migration and rolls the pods out. A value that is not a whole number from 1 to the most there are stops
// the run naming it: never a silent return to another depth.

// upgradesKnob reads the knob name: the number of repetitions to run, most when it is unset.
func upgradesKnob(name string, most int) int {
	v := os.Getenv(name)
	if v == "" {
		return most
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		fmt.Fprintf(os.Stderr, "e2e: %s=%q: want a whole number from 1 to %d\n", name, v, most)
		os.Exit(2)
	}
	return n
}

// gitopsUpgradeSteps is how many upgrades the Flux and Argo CD upgrade scenarios run (gitopsUpgrade: the
// demo's v2..v6).
const gitopsUpgradeSteps = 5

// upgradeCount is how many of upgradeSteps the upgrades under load run (E2E_UPGRADES).
func upgradeCount() int { return upgradesKnob("E2E_UPGRADES", len(upgradeSteps)) }

// gitopsUpgradeCount is how many upgrades each GitOps controller's upgrade scenario runs (E2E_GITOPS_UPGRADES).
func gitopsUpgradeCount() int { return upgradesKnob("E2E_GITOPS_UPGRADES", gitopsUpgradeSteps) }
