// Package exitcode holds the gate's exit codes, each with one meaning (docs/design.md, "The gate"), and the
// rule by which a migration command's own exit code passes through the gate.
package exitcode

import (
	"fmt"
	"slices"
)

const (
	// OK: the command did what it was asked, or found nothing to do.
	OK = 0
	// Failed: the migration failed (gate wait), or the command failed.
	Failed = 1
	// Usage: a mistake on the command line.
	Usage = 2
	// Refused: the gate refuses to run what must not run (a migration pruned, or deployed before one that
	// already ran; a contract before its migration; a migration before the previous contract). A Job's
	// podFailurePolicy fails the Job at once on it, beside the user's own migration.failFastExitCodes: a
	// refusal is an answer no retry changes.
	Refused = 3
	// Timeout: the gate gave up waiting (gate wait, gate probe, a contract's rollout).
	Timeout = 4
	// Interrupted: the gate was asked to stop (SIGTERM, SIGINT).
	Interrupted = 130
)

// Command is the gate's exit for a command that exited code (not 0): the command's own code, so that the
// user's fail-fast codes and the Job's status name it, unless it is a code the gate keeps for itself in the
// Job's fail-at-once rule (Refused) and the user did not list it as fail-fast (failFast): then Failed, so that
// a failure the user wants retried is retried, and why in words ("" when the code passes as it is).
func Command(code int, failFast []int) (int, string) {
	if code != Refused || slices.Contains(failFast, code) {
		return code, ""
	}
	return Failed, fmt.Sprintf("exiting %d instead of %d: the gate keeps %d for its own refusals, which fail the Job at once; "+
		"list %d in migration.failFastExitCodes to fail the Job at once on it too", Failed, code, code, code)
}
