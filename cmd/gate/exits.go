package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Exit codes (docs/design.md, "The gate"). A Job's podFailurePolicy fails the Job at once on exitRefused, beside
// the user's own migration.failFastExitCodes: a refusal is an answer no retry changes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	// exitRefused: the gate refuses to run what must not run (a migration pruned, or deployed before one that
	// already ran; a contract before its migration; a migration before the previous contract).
	exitRefused = 3
	// exitTimeout: the gate gave up waiting (gate wait, gate probe, a contract's rollout).
	exitTimeout     = 4
	exitInterrupted = 130
)

// exitCodes is a flag of exit codes, comma-separated (--fail-fast-exit-codes 3,7).
type exitCodes struct{ codes *[]int }

func (f exitCodes) String() string {
	if f.codes == nil {
		return ""
	}
	parts := make([]string, len(*f.codes))
	for i, c := range *f.codes {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

func (f exitCodes) Set(s string) error {
	*f.codes = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		c, err := strconv.Atoi(p)
		if err != nil || c < 1 || c > 255 {
			return fmt.Errorf("%q is not an exit code (1 to 255)", p)
		}
		*f.codes = append(*f.codes, c)
	}
	return nil
}

// commandExit is the gate's exit for a command that exited code (not 0): the command's own code, so that the
// user's fail-fast codes and the Job's status name it, unless it is a code the gate keeps for itself in the
// Job's fail-at-once rule (exitRefused) and the user did not list it as fail-fast (failFast): then 1, so that a
// failure the user wants retried is retried, and why in words ("" when the code passes as it is).
func commandExit(code int, failFast []int) (int, string) {
	if code != exitRefused || slices.Contains(failFast, code) {
		return code, ""
	}
	return exitFailed, fmt.Sprintf("exiting %d instead of %d: the gate keeps %d for its own refusals, which fail the Job at once; "+
		"list %d in migration.failFastExitCodes to fail the Job at once on it too", exitFailed, code, code, code)
}
