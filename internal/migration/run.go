package migration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/premigrate/premigrate/internal/child"
	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/pgready"
	"github.com/premigrate/premigrate/internal/policy"
	"github.com/premigrate/premigrate/internal/record"
)

// RunConfig is what `gate run` runs, beside its Config.
type RunConfig struct {
	// WaitForPostgres is HOST:PORT of a PostgreSQL server to wait for before the command runs ("": none).
	WaitForPostgres        string
	WaitForPostgresTimeout time.Duration
	// Check asks the database whether a recorded migration is applied (gate run --check); nil: never asked.
	Check []string
	// FailFast are the command's exit codes that fail its Job at once (migration.failFastExitCodes).
	FailFast []int
	// History is the ConfigMap of the run history ("": none), HistoryKeep how many runs it keeps.
	History     string
	HistoryKeep int
	// Argv is the migration command.
	Argv []string
}

// Run is `gate run [flags] -- COMMAND [ARGS...]`: the migration container's entrypoint. It runs the
// user's migration command with the container's stdin, stdout and stderr (so its log is the container's log,
// which Helm prints when the hook fails), forwards SIGTERM to it, and records the identity only when the
// command exits 0. It exits with the command's exit code, so a Job podFailurePolicy on exit codes still works.
// An identity that is already recorded is never run again: a rollback, a GitOps revert or a Job re-created
// after its TTL would otherwise run an older migration against a newer schema.
func Run(ctx context.Context, cfg *Config, o *RunConfig, e *Env, c Clients) error {
	r := newRecorder(cfg, c)
	r.started, r.check = e.Now(), o.Check
	log := e.Log
	logf := cli.Logf(log)
	if err := r.resolve(ctx, o.WaitForPostgresTimeout, log); err != nil {
		return err
	}
	if done, err := r.checkRecorded(ctx, e, log); done {
		return err
	}
	lock, done, err := r.lock(ctx, e, log)
	if done {
		return err
	}
	defer func() {
		if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
			log.Warn(fmt.Sprintf("warning: %v: the next migration of this release waits until the lock expires", err))
		}
	}()
	if o.WaitForPostgres != "" {
		if err := pgready.Wait(ctx, o.WaitForPostgres, o.WaitForPostgresTimeout, logf); err != nil {
			log.Error(fmt.Sprintf("not running the migration: %v", err))
			if ctx.Err() != nil {
				return cli.Exit(exitcode.Interrupted, err)
			}
			return cli.Exit(exitcode.Failed, err)
		}
	}
	if ctx.Err() != nil {
		err := fmt.Errorf("the gate was asked to stop before the migration started: not running it: %w", context.Cause(ctx))
		log.Error(err.Error())
		return cli.Exit(exitcode.Interrupted, err)
	}
	// A lock that cannot be renewed, or is found to be another's, never stops the command (a migration stopped
	// halfway is worse than one finished); it only keeps its outcome from being recorded (conclude).
	start := e.Now()
	streams, tail := e.Streams, &outputTail{}
	if o.History != "" {
		streams.Out, streams.Err = io.MultiWriter(e.Out, tail), io.MultiWriter(e.Err, tail)
	}
	code := child.Run(ctx, o.Argv, streams, log)
	took := e.Now().Sub(start).Round(time.Millisecond)
	outcome, err := r.conclude(ctx, e, o, code, took, lock)
	r.writeHistory(ctx, o.History, o.HistoryKeep, record.Run{Started: start, Took: took, Identity: r.o.Identity, Job: r.o.Job,
		Pod: e.Getenv("HOSTNAME"), Outcome: outcome, Tail: tail.Lines()}, log)
	return err
}

// conclude asks the rule (policy.Conclude), once the migration command exited with code after took, whether to
// record the identity, and records it; it returns the run's outcome in words (for the run history) and its exit.
func (r *recorder) conclude(ctx context.Context, e *Env, o *RunConfig, code int, took time.Duration, lock *record.Lock) (string, error) {
	log := e.Log
	end := policy.Ended{Code: code, LockLost: lost(lock), Stopped: ctx.Err() != nil, Database: r.database}
	if policy.NeedsDatabaseAgain(end) {
		// the database the record will name must be the one the command migrated
		end.After, end.AfterErr = dbid.Resolve(ctx, r.spec, r.objects())
	}
	c := policy.Conclude(end)
	var err error
	switch c.Reason {
	case policy.LockLost:
		err = fmt.Errorf("migration command %q exited %d after %s, but the release's migration lock was lost while it ran: "+
			"not recording identity %s; the next run repeats it", o.Argv[0], code, took, r.o.Identity)
	case policy.CommandFailed:
		err = fmt.Errorf("migration command %q exited %d after %s: nothing recorded", o.Argv[0], code, took)
	case policy.Stopped:
		// Its exit 0 proves nothing: a tool that traps SIGTERM (a deadline, a deletion, a drain) and exits 0 may
		// have stopped halfway. A re-run of the migration is safe (the command must be idempotent); a false record
		// is not: it would release the pods and skip every retry.
		err = fmt.Errorf("migration command %q exited 0 after %s, but the gate was asked to stop while it ran: "+
			"not recording identity %s (an exit after SIGTERM does not prove the migration completed); the next run repeats it",
			o.Argv[0], took, r.o.Identity)
	case policy.DatabaseUnnamed:
		err = fmt.Errorf("naming the database again after migration %s ran: not recording it; the next run repeats it: %w", r.o.Identity, end.AfterErr)
	case policy.DatabaseChanged:
		err = fmt.Errorf("the database changed while migration %s ran (it was %s, it is now %s): not recording it; the next run repeats it",
			r.o.Identity, r.database.Value, end.After.Value)
	}
	if c.Reason != policy.LockLost && c.Reason != policy.CommandFailed && c.Reason != policy.Stopped {
		cli.Logf(log)("migration command %q succeeded in %s", o.Argv[0], took)
	}
	if !c.Record {
		log.Error(err.Error())
		return c.Outcome, exitOf(c, code, o.FailFast, err, log)
	}
	if err := r.write(ctx, e); err != nil {
		return "succeeded, not recorded: the records could not be written", err
	}
	return c.Outcome, nil
}

// lost reports whether the lock was lost (by now).
func lost(lock *record.Lock) bool {
	select {
	case <-lock.Lost():
		return true
	default:
		return false
	}
}

// exitOf is the exit of a conclusion that records nothing: the command's own code when it failed (commandExit).
func exitOf(c policy.Conclusion, code int, failFast []int, err error, log *slog.Logger) error {
	switch c.Exit {
	case policy.ExitCommand:
		exit, why := exitcode.Command(code, failFast)
		if why != "" {
			log.Warn(why)
		}
		return cli.Exit(exit, err)
	case policy.ExitInterrupted:
		return cli.Exit(exitcode.Interrupted, err)
	case policy.ExitOK:
		return nil
	}
	return cli.Exit(exitcode.Failed, err)
}

// checkRecorded reads the records ConfigMap (creating it when missing and --create-records is set) before the
// migration runs, retrying API errors up to --wait-for-configmap. It returns done=true with the exit code when
// the command must not run: the identity is already recorded (a nil error: exit 0), or the records cannot be
// read.
func (r *recorder) checkRecorded(ctx context.Context, e *Env, log *slog.Logger) (bool, error) {
	logf := cli.Logf(log)
	deadline := time.Now().Add(r.o.WaitForConfigMap)
	var (
		cm      *corev1.ConfigMap
		created bool
		data    map[string]string
		from    string
		err     error
	)
	for delay := 500 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		cm, created, err = r.ensure(ctx)
		if err == nil {
			var rs record.Records
			rs, err = r.where().ReadWith(ctx, r.clients.ConfigMaps, cm)
			data, from = rs.Data, rs.From
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return true, cli.Exit(exitcode.Interrupted, err)
		}
		if time.Now().After(deadline) {
			log.Error(fmt.Sprintf("not running the migration: cannot tell whether identity %s is already recorded: %v", r.o.Identity, err))
			return true, cli.Exit(exitcode.Failed, err)
		}
		logf("reading the records before the migration (retrying in %s): %v", delay, err)
		select {
		case <-ctx.Done():
			return true, cli.Exit(exitcode.Interrupted, ctx.Err())
		case <-time.After(delay):
		}
	}
	if created {
		logf("created ConfigMap %s/%s for the migration records", r.ns, r.o.Records)
	}
	in := policy.Run{Identity: r.o.Identity, Records: data, Database: r.database, Job: r.o.Job, Keep: r.o.Keep}
	d, err := r.decide(ctx, e, log, &in, policy.BeforeRun)
	if err != nil {
		return true, err
	}
	on := ""
	if r.database.Bound() {
		on = " on database " + r.database.Value
	}
	switch {
	case d.Verdict == policy.Refuse && d.Reason == policy.RecordsFull:
		err := fmt.Errorf("not running migration %s: %s (ConfigMap %s/%s)", r.o.Identity, d.Why, r.ns, from)
		log.Error(err.Error())
		return true, cli.Exit(exitcode.Refused, err)
	case d.Verdict == policy.Refuse:
		err := fmt.Errorf("migration %s ran on this database, but its record was pruned from ConfigMap %s/%s, which keeps the newest %d "+
			"(--keep, migration.keepRecords): not running it again, since a rollback or revert this far back would run an older migration "+
			"against a newer schema; raise migration.keepRecords, or, to run it anyway, remove %s from the %q key of that ConfigMap",
			r.o.Identity, r.ns, from, r.o.Keep, r.o.Identity, record.PrunedKey)
		log.Error(err.Error())
		return true, cli.Exit(exitcode.Refused, err)
	case d.Reason == policy.NotRecorded && data == nil:
		logf("ConfigMap %s/%s holds no records yet: identity %s is not recorded", r.ns, r.recordsAt(), r.o.Identity)
	case d.Reason == policy.RecordedElsewhere:
		logf("migration %s is recorded in ConfigMap %s/%s, but not on this database: %s: running it again on database %s",
			r.o.Identity, r.ns, from, d.Why, r.database.Value)
	case d.Reason == policy.CheckSaysNo:
		logf("migration %s is recorded%s in ConfigMap %s/%s (%s), but the database does not have it: the check %s says so "+
			"(a database restored from a dump taken before it?): running it again", r.o.Identity, on, r.ns, from, completed(d), r.checkText())
	case d.Verdict == policy.Done:
		agreed := ""
		if in.Check == policy.Agrees {
			agreed = ", and the database has it (the check " + r.checkText() + ")"
		}
		logf("migration %s is already recorded%s in ConfigMap %s/%s (%s)%s: not running it again "+
			"(a rollback, a revert, a reinstall onto kept data, or a Job re-created after its TTL); nothing to do",
			r.o.Identity, on, r.ns, from, completed(d), agreed)
		return true, nil
	}
	return false, nil
}

// completed says when and by which Job the record a decision rests on was made.
func completed(d policy.Decision) string {
	if d.Entry.CompletedAt.IsZero() {
		return "completed at an unknown time"
	}
	return fmt.Sprintf("completed at %s by Job %s", d.Entry.CompletedAt.Format(time.RFC3339), d.Entry.Job)
}
