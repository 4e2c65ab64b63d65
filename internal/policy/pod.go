package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/record"
)

// Job is what the pod side knows of one Job of its identity (by its exact name, with the identity's label).
type Job struct {
	Name string
	// Complete and CompletedAt (the API server's time); Failed with the condition's reason and message.
	Complete        bool
	CompletedAt     time.Time
	Failed          bool
	Reason, Message string
}

// Pod is what a gated pod's waiter knows when it decides.
type Pod struct {
	Identity string
	// Records are the records that count (nil: their ConfigMap does not exist), RecordsKnown whether they have
	// been listed at all: until then a record may exist that the waiter has not seen.
	Records      map[string]string
	RecordsKnown bool
	// Jobs of the identity, JobsKnown whether they have been listed at all.
	Jobs      []Job
	JobsKnown bool
	// Database is the database the pod will use (the zero ID accepts every record and every Job).
	Database dbid.ID
}

// PodStart is the rule of `gate wait`: a pod starts when its identity is recorded on the database it will use
// and no identity deployed after it contracted that database's schema, or, with no record of it, when its Job
// completed after that database was created. It is held when the record was pruned with its Job gone, or the
// Job failed with no record; otherwise it waits. A record of another database vetoes every Job: they are the
// old run's.
func PodStart(p Pod) Decision {
	if p.RecordsKnown && p.Records != nil {
		switch s, e, undecodable, why := Stand(p.Records, p.Identity, p.Database); s {
		case Here:
			if undecodable {
				return Decision{Verdict: Go, Reason: RecordedHere, Why: "recorded (its record does not decode: when and where are unknown)"}
			}
			if later := ContractedAfter(p.Records, p.Identity, p.Database); len(later) > 0 {
				by := later[len(later)-1]
				c, _ := record.ContractBegan(p.Records[by])
				if !c.Done {
					return Decision{Verdict: Hold, Reason: SchemaContracted, Other: by, Entry: e, Contract: c, Why: fmt.Sprintf(
						"it ran on this database, but identity %s, deployed after it, started contracting the schema (its contract step, Job %s, at %s) "+
							"and has not completed it (it runs, or it failed or was stopped halfway): what its code uses may be gone",
						by, c.Job, at(c.At))}
				}
				return Decision{Verdict: Hold, Reason: SchemaContracted, Other: by, Entry: e, Contract: c, Why: fmt.Sprintf(
					"it ran on this database, but identity %s, deployed after it, contracted the schema (its contract step, Job %s, at %s): what its code uses may be gone",
					by, c.Job, at(c.At))}
			}
			return Decision{Verdict: Go, Reason: RecordedHere, Entry: e, Why: fmt.Sprintf("recorded (completed at %s by Job %s)", at(e.CompletedAt), e.Job)}
		case Elsewhere:
			return Decision{Verdict: Wait, Reason: RecordedElsewhere, Entry: e, Why: "the database changed since (" + why + "): waiting for its migration to run again"}
		}
	}
	if p.Database.Bound() && !p.RecordsKnown {
		return Decision{Verdict: Wait, Reason: RecordsUnknown, Why: "the records have not been read yet"}
	}
	jobs := slices.Clone(p.Jobs)
	slices.SortFunc(jobs, func(a, b Job) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for _, j := range jobs {
		if here, _ := p.Database.Describes("", j.CompletedAt); j.Complete && here {
			return Decision{Verdict: Go, Reason: JobComplete, Other: j.Name, Why: fmt.Sprintf("Job %s is Complete", j.Name)}
		}
	}
	if !p.RecordsKnown {
		return Decision{Verdict: Wait, Reason: RecordsUnknown, Why: "the records have not been read yet"}
	}
	if p.JobsKnown && p.Records != nil && record.WasPruned(p.Records, p.Identity) {
		return Decision{Verdict: Hold, Reason: RecordPruned, Why: "it ran on this database, but its record was pruned and its Job is gone"}
	}
	for _, j := range jobs {
		if j.Failed {
			return Decision{Verdict: Hold, Reason: JobFailed, Other: j.Name, Why: fmt.Sprintf("Job %s is Failed: %s: %s", j.Name, j.Reason, j.Message)}
		}
	}
	return Decision{Verdict: Wait, Reason: NotRecorded, Why: "it is not recorded yet"}
}

// ContractedAfter returns, sorted, the identities recorded on database db whose contract step began (it
// started: it runs, succeeded, failed or was stopped halfway) and whose migration was deployed after identity's
// (its Job's creation, else its completion). A contract recorded on another database did not change this one.
// None when identity's own record is missing or does not decode.
func ContractedAfter(data map[string]string, identity string, db dbid.ID) []string {
	own, found, err := record.Lookup(data, identity)
	if !found || err != nil {
		return nil
	}
	var out []string
	for k, v := range data {
		if k == identity || k == record.PrunedKey {
			continue
		}
		if _, ok := record.ContractBegan(v); !ok {
			continue
		}
		e, err := record.Decode(v)
		if err != nil || !deployedAt(e).After(deployedAt(own)) {
			continue
		}
		if here, _ := db.Describes(e.Database, e.CompletedAt); here {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func deployedAt(e record.Entry) time.Time {
	if !e.JobCreated.IsZero() {
		return e.JobCreated
	}
	return e.CompletedAt
}

// Contract is the rule of a contract step, on the records: it runs only after the migration it completes was
// recorded on this database (else it is refused), and only once (its contract recorded: done).
func Contract(data map[string]string, identity string, db dbid.ID) Decision {
	s, e, _, why := Stand(data, identity, db)
	if s != Here {
		return Decision{Verdict: Refuse, Reason: NotRecorded, Entry: e,
			Why: "its migration is not recorded on this database (" + why + "): a contract runs only after the migration it completes"}
	}
	if c, ok := record.ContractOf(data[identity]); ok {
		return Decision{Verdict: Done, Reason: ContractDone, Entry: e, Contract: c, Why: fmt.Sprintf("Job %s at %s", c.Job, at(c.At))}
	}
	return Decision{Verdict: Go, Reason: RecordedHere, Entry: e, Why: "its migration is recorded on this database and its contract has not run"}
}

// RequireContract is the rule of a migration that requires the previous version's contract: it may run when it is
// recorded here already, when nothing was deployed before it on this database, or when the identity deployed
// last before it ran its contract step; otherwise it is refused.
func RequireContract(data map[string]string, identity string, db dbid.ID) Decision {
	if s, e, _, _ := Stand(data, identity, db); s == Here {
		return Decision{Verdict: Done, Reason: RecordedHere, Entry: e, Why: "it is recorded on this database already: nothing to hold back"}
	}
	onThis := func(e record.Entry) bool { ok, _ := db.Describes(e.Database, e.CompletedAt); return ok }
	prev, e, ok := record.Previous(data, identity, onThis)
	if !ok {
		return Decision{Verdict: Go, Reason: NoPrevious, Why: "no other migration is recorded on this database: no contract to wait for"}
	}
	if c, ok := record.ContractOf(data[prev]); ok {
		return Decision{Verdict: Go, Reason: PreviousContracted, Other: prev, Entry: e, Contract: c,
			Why: fmt.Sprintf("the contract of %s, the identity deployed before it, ran (Job %s at %s)", prev, c.Job, at(c.At))}
	}
	return Decision{Verdict: Refuse, Reason: PreviousNotContracted, Other: prev, Entry: e, Why: fmt.Sprintf(
		"the identity deployed before it, %s (migrated by Job %s, completed %s), has not run its contract step", prev, e.Job, at(e.CompletedAt))}
}
