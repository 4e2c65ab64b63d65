// Package policy holds premigrate's rules as pure functions: whether a migration runs, is done or is refused;
// whether a pod may start; whether a contract step or a migration that requires the previous contract may run.
// Each rule takes what was read (the records as data, the database the gate names now, the Job's creation
// time, the Jobs it sees) and returns a Decision. Nothing here reads a clock, a client or the environment: the
// callers do the I/O, the waiting and the retrying, and turn a Decision into a log line and an exit code.
package policy

import (
	"fmt"
	"time"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/record"
)

// Verdict is what a rule says to do.
type Verdict uint8

const (
	// Wait: not decided yet (the pod side keeps watching; a contract waits for its rollout).
	Wait Verdict = iota
	// Go: run the command, or start the pod.
	Go
	// Done: nothing to do, and that is success (already recorded, the contract already ran).
	Done
	// Ask: the record says done, but the user's check must confirm it against the database (AfterCheck).
	Ask
	// Refuse: this must not run for this deploy, whatever is retried; Reason says why.
	Refuse
	// Hold: a pod must not start (its migration failed, its record was pruned, a later contract removed its
	// schema); unlike Wait, watching longer does not change it until something is deployed.
	Hold
)

func (v Verdict) String() string {
	switch v {
	case Wait:
		return "wait"
	case Go:
		return "go"
	case Done:
		return "done"
	case Ask:
		return "ask"
	case Refuse:
		return "refuse"
	case Hold:
		return "hold"
	}
	return fmt.Sprintf("Verdict(%d)", v)
}

// Reason is a stable name for why a rule decided as it did: it is what Events, conditions and tests match.
type Reason string

// The reasons.
const (
	NotRecorded           Reason = "NotRecorded"           // no record of the identity
	RecordedHere          Reason = "Recorded"              // recorded on this database
	RecordedElsewhere     Reason = "RecordedElsewhere"     // recorded, on another database
	RecordPruned          Reason = "RecordPruned"          // ran on this database, its record pruned since
	DeployedLater         Reason = "DeployedLater"         // a migration deployed after this one already ran here
	CheckSaysNo           Reason = "CheckSaysNo"           // recorded, but the user's check says the database lacks it
	JobComplete           Reason = "JobComplete"           // no record, but the identity's Job completed on this database
	JobFailed             Reason = "JobFailed"             // the identity's Job failed and nothing records it
	SchemaContracted      Reason = "SchemaContracted"      // a later identity's contract ran on this database
	ContractDone          Reason = "ContractDone"          // the contract step already ran
	PreviousNotContracted Reason = "PreviousNotContracted" // the identity deployed before has not run its contract
	NoPrevious            Reason = "NoPrevious"            // nothing was deployed before on this database
	PreviousContracted    Reason = "PreviousContracted"    // the identity deployed before ran its contract
	RecordsUnknown        Reason = "RecordsUnknown"        // the records have not been read yet (pod side)
	RecordsFull           Reason = "RecordsFull"           // the record the run must write would not fit in its ConfigMap

	// How a command ended (Conclude).
	Succeeded       Reason = "Succeeded"       // exit 0, lock held, not stopped, on the database it started on
	CommandFailed   Reason = "CommandFailed"   // a non-zero exit
	LockLost        Reason = "LockLost"        // the release's migration lock was lost while it ran
	Stopped         Reason = "Stopped"         // exit 0 after the gate was asked to stop
	DatabaseUnnamed Reason = "DatabaseUnnamed" // the database could not be named again after it ran
	DatabaseChanged Reason = "DatabaseChanged" // the database named after it ran is not the one named before
)

// Decision is a rule's answer: what to do, why (a stable Reason), and the words for a log line.
type Decision struct {
	Verdict Verdict
	Reason  Reason
	// Entry is the record the decision rests on, when it rests on one (the identity's, or Other's).
	Entry record.Entry
	// Other is the other identity a decision names: the one deployed later, deployed before, or that contracted.
	Other string
	// Contract is the contract step a decision names (its own, or Other's), when it names one.
	Contract record.Contract
	// Why says it in words, without the identity's name or where the records are (the caller has both).
	Why string
}

func (d Decision) String() string {
	return fmt.Sprintf("%s (%s): %s", d.Verdict, d.Reason, d.Why)
}

func at(t time.Time) string {
	if t.IsZero() {
		return "at an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

// Standing is where one identity stands in a set of records, seen from the database the gate names now.
type Standing uint8

const (
	// Absent: no key of the identity, and it was never pruned.
	Absent Standing = iota
	// Pruned: no key, but the identity is listed as pruned: it ran on this database once.
	Pruned
	// Here: recorded, on this database (or the gate names no database, or the record has no database to check).
	Here
	// Elsewhere: recorded on another database than the one named now.
	Elsewhere
)

// Stand says where identity stands in data, seen from database db. A record whose value does not decode (edited
// by hand) still counts as recorded, and here: the key's presence is the record, and a migration must never
// run twice on a guess; undecodable is true then, and Entry is empty.
func Stand(data map[string]string, identity string, db dbid.ID) (s Standing, e record.Entry, undecodable bool, why string) {
	e, found, err := record.Lookup(data, identity)
	switch {
	case !found && record.WasPruned(data, identity):
		return Pruned, record.Entry{}, false, "its record was pruned"
	case !found:
		return Absent, record.Entry{}, false, "it is not recorded"
	case err != nil:
		return Here, record.Entry{}, true, "its record does not decode: " + err.Error()
	}
	if ok, why := db.Describes(e.Database, e.CompletedAt); !ok {
		return Elsewhere, e, false, why
	}
	return Here, e, false, ""
}
