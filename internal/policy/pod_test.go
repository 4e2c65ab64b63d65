package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/record"
)

func TestAPodStartsOnlyOnceItsMigrationRanOnTheDatabaseItWillUse(t *testing.T) {
	complete := Job{Name: "job-a", Complete: true, CompletedAt: t0.Add(time.Minute)}
	completeBefore := Job{Name: "job-a", Complete: true, CompletedAt: t0.Add(-time.Minute)}
	failed := Job{Name: "job-a", Failed: true, Reason: "BackoffLimitExceeded", Message: "too many"}
	for _, c := range []struct {
		name   string
		pod    Pod
		want   Verdict
		reason Reason
	}{
		{"recorded here starts", Pod{Records: map[string]string{"a": rec(here.Value, 1, 2)}, RecordsKnown: true}, Go, RecordedHere},
		{"recorded on another database waits, and its Job does not count", Pod{Records: map[string]string{"a": rec(before, 1, 2)}, RecordsKnown: true, Jobs: []Job{complete}, JobsKnown: true}, Wait, RecordedElsewhere},
		{"no Job counts before the records are read", Pod{Jobs: []Job{complete}, JobsKnown: true}, Wait, RecordsUnknown},
		{"a Job complete on this database starts it", Pod{RecordsKnown: true, Jobs: []Job{complete}, JobsKnown: true}, Go, JobComplete},
		{"a Job complete before this database was created does not", Pod{RecordsKnown: true, Jobs: []Job{completeBefore}, JobsKnown: true}, Wait, NotRecorded},
		{"a failed Job holds it", Pod{RecordsKnown: true, Jobs: []Job{failed}, JobsKnown: true}, Hold, JobFailed},
		{"a pruned record with its Job gone holds it", Pod{Records: map[string]string{record.PrunedKey: "a"}, RecordsKnown: true, JobsKnown: true}, Hold, RecordPruned},
		{"a pruned record waits until the Jobs are listed", Pod{Records: map[string]string{record.PrunedKey: "a"}, RecordsKnown: true}, Wait, NotRecorded},
		{"a later identity's contract on this database holds it", Pod{Records: map[string]string{"a": rec(here.Value, 1, 2), "b": contracted(rec(here.Value, 3, 4))}, RecordsKnown: true}, Hold, SchemaContracted},
		{"a later identity's contract that started and has not succeeded holds it", Pod{Records: map[string]string{"a": rec(here.Value, 1, 2), "b": contractStarted(rec(here.Value, 3, 4))}, RecordsKnown: true}, Hold, SchemaContracted},
		{"an earlier identity's contract does not", Pod{Records: map[string]string{"a": rec(here.Value, 3, 4), "b": contracted(rec(here.Value, 1, 2))}, RecordsKnown: true}, Go, RecordedHere},
		{"a later identity's contract on another database does not", Pod{Records: map[string]string{"a": rec(here.Value, 1, 2), "b": contracted(rec(before, 3, 4))}, RecordsKnown: true}, Go, RecordedHere},
		{"nothing yet waits", Pod{RecordsKnown: true, JobsKnown: true}, Wait, NotRecorded},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.pod
			p.Identity, p.Database = "a", here
			d := PodStart(p)
			assert.Equal(t, c.want, d.Verdict, d.String())
			assert.Equal(t, c.reason, d.Reason, d.String())
		})
	}
}

func TestAContractRunsOnceAndOnlyAfterItsMigrationWasRecordedOnThisDatabase(t *testing.T) {
	for _, c := range []struct {
		name string
		data map[string]string
		want Verdict
	}{
		{"not recorded is refused", nil, Refuse},
		{"recorded on another database is refused", map[string]string{"a": rec(before, 1, 2)}, Refuse},
		{"recorded here runs", map[string]string{"a": rec(here.Value, 1, 2)}, Go},
		{"contracted already is done", map[string]string{"a": contracted(rec(here.Value, 1, 2))}, Done},
		{"a contract that started and did not succeed runs again", map[string]string{"a": contractStarted(rec(here.Value, 1, 2))}, Go},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Contract(c.data, "a", here)
			assert.Equal(t, c.want, d.Verdict, d.String())
		})
	}
}

func TestAMigrationThatRequiresThePreviousContractWaitsForTheLastDeployOnThisDatabase(t *testing.T) {
	for _, c := range []struct {
		name   string
		data   map[string]string
		want   Verdict
		reason Reason
		other  string
	}{
		{"a first deploy runs", nil, Go, NoPrevious, ""},
		{"recorded here already is done", map[string]string{"a": rec(here.Value, 5, 6)}, Done, RecordedHere, ""},
		{"the previous deploy not contracted refuses it", map[string]string{"b": contracted(rec(here.Value, 1, 2)), "c": rec(here.Value, 3, 4)}, Refuse, PreviousNotContracted, "c"},
		{"the previous deploy's contract started and not done refuses it", map[string]string{"b": rec(here.Value, 1, 2), "c": contractStarted(rec(here.Value, 3, 4))}, Refuse, PreviousNotContracted, "c"},
		{"the previous deploy contracted lets it run", map[string]string{"b": rec(here.Value, 1, 2), "c": contracted(rec(here.Value, 3, 4))}, Go, PreviousContracted, "c"},
		{"a deploy on another database is not the previous one", map[string]string{"b": contracted(rec(here.Value, 1, 2)), "c": rec(before, 3, 4)}, Go, PreviousContracted, "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := RequireContract(c.data, "a", here)
			assert.Equal(t, c.want, d.Verdict, d.String())
			assert.Equal(t, c.reason, d.Reason, d.String())
			assert.Equal(t, c.other, d.Other, d.String())
		})
	}
}

func TestAnUnboundDatabaseAcceptsEveryRecord(t *testing.T) {
	d := PodStart(Pod{Identity: "a", Records: map[string]string{"a": rec(before, 1, 2)}, RecordsKnown: true, Database: dbid.ID{}})
	assert.Equal(t, Go, d.Verdict, d.String())
}
