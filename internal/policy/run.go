package policy

import (
	"fmt"
	"time"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/record"
)

// Run is what `gate run` knows when it decides whether its migration runs.
type Run struct {
	// Identity is the migration's identity, Records the records as read (nil: none exist yet).
	Identity string
	Records  map[string]string
	// Database is the database the gate names now (the zero ID: records are not bound to one).
	Database dbid.ID
	// Check is what the user's check (a command that asks the database whether the migration is applied)
	// has said: NoCheck when there is none, Unasked until it ran.
	Check Check
	// JobCreated is when this migration's Job was created (the order of deploys); zero when unknown, and then
	// no record is seen as deployed later.
	JobCreated time.Time
	// Job is the Job that would record the run, and Keep how many records the ConfigMap keeps (<= 0: all): what
	// the record written after the run will take (record.Room).
	Job  string
	Keep int
}

// Check is the state of the user's check of a record against the database.
type Check uint8

const (
	// NoCheck: the user gave none; a record on this database is believed.
	NoCheck Check = iota
	// Unasked: there is a check and it has not run: a rule that needs it says Ask.
	Unasked
	// Agrees: the check says the database has the migration.
	Agrees
	// Denies: the check says the database does not have it (a database restored from a dump taken before it).
	Denies
)

// BeforeRun is the rule before the release's migration lock is taken: a migration recorded on this database is
// done (or Ask, with a check); one recorded on another database, or not at all, runs; one whose record was
// pruned is refused, since it ran here and a rollback or revert that far back would run an older migration
// against a newer schema.
func BeforeRun(in Run) Decision {
	return room(in, beforeRun(in))
}

func beforeRun(in Run) Decision {
	s, e, undecodable, why := Stand(in.Records, in.Identity, in.Database)
	switch s {
	case Pruned:
		return Decision{Verdict: Refuse, Reason: RecordPruned,
			Why: "it ran on this database, but its record was pruned, and a rollback or revert this far back would run an older migration against a newer schema"}
	case Absent:
		return Decision{Verdict: Go, Reason: NotRecorded, Why: why}
	case Elsewhere:
		return Decision{Verdict: Go, Reason: RecordedElsewhere, Entry: e, Why: "the database changed since (" + why + ")"}
	}
	return recorded(in, e, undecodable, "it is already recorded on this database")
}

// room refuses a run that would go ahead when the record it must write after it does not fit in the records'
// ConfigMap: a migration that ran and cannot be recorded leaves its pods waiting for a record that never comes,
// and runs again on the next deploy. Any other decision stands.
func room(in Run, d Decision) Decision {
	if d.Verdict != Go {
		return d
	}
	size, fits := record.Room(in.Records, in.Identity, in.Job, in.Database.Value, in.Keep)
	if fits {
		return d
	}
	return Decision{Verdict: Refuse, Reason: RecordsFull, Entry: d.Entry, Why: fmt.Sprintf(
		"its record would bring the records ConfigMap to %d bytes, and the API server refuses a ConfigMap over %d (less a margin of a few KiB); "+
			"nothing ran: %s", size, record.MaxConfigMapBytes, record.RoomHint(in.Keep))}
}

// recorded is the decision on a record made on this database: done, Ask while a check has not answered, and
// Go (CheckSaysNo) when the check denies it.
func recorded(in Run, e record.Entry, undecodable bool, how string) Decision {
	when := fmt.Sprintf("completed %s by Job %s", at(e.CompletedAt), e.Job)
	if undecodable {
		when = "completed at an unknown time (its record does not decode)"
	}
	switch in.Check {
	case Unasked:
		return Decision{Verdict: Ask, Reason: RecordedHere, Entry: e, Why: how + ", " + when + ": asking the database through the check"}
	case Denies:
		return Decision{Verdict: Go, Reason: CheckSaysNo, Entry: e,
			Why: how + ", " + when + ", but the check says the database does not have it (a database restored from a dump taken before it?)"}
	}
	return Decision{Verdict: Done, Reason: RecordedHere, Entry: e, Why: how + ", " + when}
}

// UnderLock is the rule again once the release's migration lock is held, on the records read under it: another
// Job may have recorded the identity, or a migration deployed after this one may have run, while this one
// waited. The identity recorded here is done (or Ask); its record pruned is refused; a migration deployed later
// that already succeeded on this database refuses this one, since a migration never runs after one deployed
// after it; else it runs.
func UnderLock(in Run) Decision {
	s, e, undecodable, _ := Stand(in.Records, in.Identity, in.Database)
	switch s {
	case Here:
		if d := recorded(in, e, undecodable, "it was recorded on this database while this Job waited for the lock"); d.Verdict != Go {
			return d
		}
	case Pruned:
		return BeforeRun(in)
	}
	if id, later, ok := DeployedAfter(in.Records, in.Identity, in.JobCreated, in.Database); ok {
		return Decision{Verdict: Refuse, Reason: DeployedLater, Other: id, Entry: later, Why: fmt.Sprintf(
			"migration %s of Job %s, created later (%s), already succeeded on this database at %s, and a migration never runs after one deployed after it",
			id, later.Job, at(later.JobCreated), at(later.CompletedAt))}
	}
	return BeforeRun(in)
}

// DeployedAfter finds, among the records made on database db, the other migration whose Job was created last
// and after created (at the API server's second: Jobs created within one second are not ordered). Records
// without a Job creation time, or that do not decode, are left out; a zero created finds none.
func DeployedAfter(data map[string]string, identity string, created time.Time, db dbid.ID) (id string, e record.Entry, ok bool) {
	if created.IsZero() {
		return "", record.Entry{}, false
	}
	for k, v := range data {
		if k == identity || k == record.PrunedKey {
			continue
		}
		en, err := record.Decode(v)
		if err != nil || en.JobCreated.IsZero() || !en.JobCreated.After(created) {
			continue
		}
		if here, _ := db.Describes(en.Database, en.CompletedAt); !here {
			continue
		}
		if !ok || en.JobCreated.After(e.JobCreated) || (en.JobCreated.Equal(e.JobCreated) && k > id) {
			id, e, ok = k, en, true
		}
	}
	return id, e, ok
}

// Ended is how a command (a migration or a contract) ended, and what was true when it did.
type Ended struct {
	// Code is the command's exit code.
	Code int
	// LockLost: the release's migration lock was lost while it ran (another migration may have started).
	LockLost bool
	// Stopped: the gate was asked to stop (SIGTERM) while it ran.
	Stopped bool
	// Database is the database named before the command ran; After the one named again after it, and
	// AfterErr why it could not be (both unused when Database is unbound).
	Database dbid.ID
	After    dbid.ID
	AfterErr error
}

// Exit is how the gate's process ends, as a class: the caller maps it to its exit codes.
type Exit uint8

const (
	// ExitOK: success.
	ExitOK Exit = iota
	// ExitFailed: the gate failed (a retry may succeed).
	ExitFailed
	// ExitCommand: the command failed: exit with its own code.
	ExitCommand
	// ExitInterrupted: the gate was asked to stop.
	ExitInterrupted
)

// Conclusion is what to do once a command ended: record it or not, how to exit, why (Reason), and the outcome
// in a few words for the run history.
type Conclusion struct {
	Record  bool
	Exit    Exit
	Reason  Reason
	Outcome string
}

// NeedsDatabaseAgain reports whether Conclude needs the database named again after the command ended: only when a
// record would otherwise be written and records are bound to a database.
func NeedsDatabaseAgain(e Ended) bool {
	return !e.LockLost && e.Code == 0 && !e.Stopped && e.Database.Bound()
}

// Conclude decides whether a command that ended is recorded. Only an exit 0, with the lock held throughout,
// not after a request to stop (a tool that traps SIGTERM and exits 0 may have stopped halfway), and on the
// database it started on is recorded: a false record releases pods and skips every retry, a missing one only
// repeats an idempotent command.
func Conclude(e Ended) Conclusion {
	switch {
	case e.LockLost:
		return Conclusion{Exit: ExitFailed, Reason: LockLost,
			Outcome: fmt.Sprintf("failed: exit %d, the migration lock was lost while it ran, nothing recorded", e.Code)}
	case e.Code != 0:
		return Conclusion{Exit: ExitCommand, Reason: CommandFailed, Outcome: fmt.Sprintf("failed: exit %d, nothing recorded", e.Code)}
	case e.Stopped:
		return Conclusion{Exit: ExitInterrupted, Reason: Stopped, Outcome: "stopped: exit 0 after the gate was asked to stop, nothing recorded"}
	case e.Database.Bound() && e.AfterErr != nil:
		return Conclusion{Exit: ExitFailed, Reason: DatabaseUnnamed, Outcome: "succeeded, not recorded: the database could not be named again"}
	case e.Database.Bound() && e.After.Value != e.Database.Value:
		return Conclusion{Exit: ExitFailed, Reason: DatabaseChanged, Outcome: "succeeded, not recorded: the database changed while it ran"}
	}
	return Conclusion{Record: true, Exit: ExitOK, Reason: Succeeded, Outcome: "succeeded, recorded"}
}
