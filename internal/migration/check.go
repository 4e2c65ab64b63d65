package migration

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/premigrate/premigrate/internal/child"
	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/policy"
)

// CheckTimeout bounds one run of the --check command: a check that does not answer is a broken check, not a
// database without its migration.
const CheckTimeout = 5 * time.Minute

// databaseAgrees runs the --check command, which asks the database itself whether this identity's migration is
// applied (exit 0: it is; any other exit: it is not): a record proves that the migration ran on this database
// once, not that the database still has it (a restore from a dump taken before it, under the same URL and
// claim, keeps the record true about the past and false about the present). It returns an error with the exit
// code when the check could not answer: it could not be started (126, 127), it timed out, or the gate was
// asked to stop.
func (r *recorder) databaseAgrees(ctx context.Context, e *Env, log *slog.Logger) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	start := e.Now()
	code := child.Run(cctx, r.check, e.Streams, log)
	took := e.Now().Sub(start).Round(time.Millisecond)
	var err error
	switch {
	case ctx.Err() != nil:
		err = cli.Exit(exitcode.Interrupted, fmt.Errorf("the gate was asked to stop while the check %s ran: not running the migration: %w",
			r.checkText(), context.Cause(ctx)))
	case cctx.Err() != nil:
		err = cli.Exit(exitcode.Failed, fmt.Errorf("the check %s did not answer within %s: not running the migration; fix the check (migration.check)",
			r.checkText(), CheckTimeout))
	case code == 126 || code == 127:
		err = cli.Exit(exitcode.Failed, fmt.Errorf("the check %s could not be run (exit %d): not running the migration; fix the check (migration.check)",
			r.checkText(), code))
	}
	if err != nil {
		log.Error(err.Error())
		return false, err
	}
	cli.Logf(log)("the check %s exited %d in %s", r.checkText(), code, took)
	return code == exitcode.OK, nil
}

// checkText is the --check command as the log shows it.
func (r *recorder) checkText() string {
	return "`" + strings.Join(r.check, " ") + "`"
}

// decide asks rule about in; when the rule asks the user's check (--check), it runs the check and asks the
// rule again with its answer (in.Check says which). An error is the check's, with its exit code.
func (r *recorder) decide(ctx context.Context, e *Env, log *slog.Logger, in *policy.Run, rule func(policy.Run) policy.Decision) (policy.Decision, error) {
	if len(r.check) > 0 {
		in.Check = policy.Unasked
	}
	d := rule(*in)
	if d.Verdict != policy.Ask {
		return d, nil
	}
	agrees, err := r.databaseAgrees(ctx, e, log)
	if err != nil {
		return policy.Decision{}, err
	}
	in.Check = policy.Denies
	if agrees {
		in.Check = policy.Agrees
	}
	return rule(*in), nil
}
