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
		pod    func(t *testing.T) Pod
		want   Verdict
		reason Reason
	}{
		{"recorded here starts", func(t *testing.T) Pod {
			return Pod{Records: map[string]string{"a": rec(t, here.Value, 1, 2)}, RecordsKnown: true}
		}, Go, RecordedHere},
		{"recorded on another database waits, and its Job does not count", func(t *testing.T) Pod {
			return Pod{Records: map[string]string{"a": rec(t, before, 1, 2)}, RecordsKnown: true, Jobs: []Job{complete}, JobsKnown: true}
		}, Wait, RecordedElsewhere},
		{"no Job counts before the records are read", func(*testing.T) Pod {
			return Pod{Jobs: []Job{complete}, JobsKnown: true}
		}, Wait, RecordsUnknown},
		{"a Job complete on this database starts it", func(*testing.T) Pod {
			return Pod{RecordsKnown: true, Jobs: []Job{complete}, JobsKnown: true}
		}, Go, JobComplete},
		{"a Job complete before this database was created does not", func(*testing.T) Pod {
			return Pod{RecordsKnown: true, Jobs: []Job{completeBefore}, JobsKnown: true}
		}, Wait, NotRecorded},
		{"a failed Job holds it", func(*testing.T) Pod {
			return Pod{RecordsKnown: true, Jobs: []Job{failed}, JobsKnown: true}
		}, Hold, JobFailed},
		{"a pruned record with its Job gone holds it", func(*testing.T) Pod {
			return Pod{Records: map[string]string{record.PrunedKey: "a"}, RecordsKnown: true, JobsKnown: true}
		}, Hold, RecordPruned},
		{"a pruned record waits until the Jobs are listed", func(*testing.T) Pod {
			return Pod{Records: map[string]string{record.PrunedKey: "a"}, RecordsKnown: true}
		}, Wait, NotRecorded},
		{"a later identity's contract on this database holds it", func(t *testing.T) Pod {
			return Pod{Records: map[string]string{"a": rec(t, here.Value, 1, 2), "b": contracted(rec(t, here.Value, 3, 4))}, RecordsKnown: true}
		}, Hold, SchemaContracted},
		{"an earlier identity's contract does not", func(t *testing.T) Pod {
			return Pod{Records: map[string]string{"a": rec(t, here.Value, 3, 4), "b": contracted(rec(t, here.Value, 1, 2))}, RecordsKnown: true}
		}, Go, RecordedHere},
		{"a later identity's contract on another database does not", func(t *testing.T) Pod {
			return Pod{Records: map[string]string{"a": rec(t, here.Value, 1, 2), "b": contracted(rec(t, before, 3, 4))}, RecordsKnown: true}
		}, Go, RecordedHere},
		{"nothing yet waits", func(*testing.T) Pod { return Pod{RecordsKnown: true, JobsKnown: true} }, Wait, NotRecorded},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.pod(t)
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
		data func(t *testing.T) map[string]string
		want Verdict
	}{
		{"not recorded is refused", func(*testing.T) map[string]string { return nil }, Refuse},
		{"recorded on another database is refused", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, before, 1, 2)} }, Refuse},
		{"recorded here runs", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, here.Value, 1, 2)} }, Go},
		{"contracted already is done", func(t *testing.T) map[string]string { return map[string]string{"a": contracted(rec(t, here.Value, 1, 2))} }, Done},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Contract(c.data(t), "a", here)
			assert.Equal(t, c.want, d.Verdict, d.String())
		})
	}
}

func TestAMigrationThatRequiresThePreviousContractWaitsForTheLastDeployOnThisDatabase(t *testing.T) {
	for _, c := range []struct {
		name   string
		data   func(t *testing.T) map[string]string
		want   Verdict
		reason Reason
		other  string
	}{
		{"a first deploy runs", func(*testing.T) map[string]string { return nil }, Go, NoPrevious, ""},
		{"recorded here already is done", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, here.Value, 5, 6)} }, Done, RecordedHere, ""},
		{"the previous deploy not contracted refuses it", func(t *testing.T) map[string]string {
			return map[string]string{"b": contracted(rec(t, here.Value, 1, 2)), "c": rec(t, here.Value, 3, 4)}
		}, Refuse, PreviousNotContracted, "c"},
		{"the previous deploy contracted lets it run", func(t *testing.T) map[string]string {
			return map[string]string{"b": rec(t, here.Value, 1, 2), "c": contracted(rec(t, here.Value, 3, 4))}
		}, Go, PreviousContracted, "c"},
		{"a deploy on another database is not the previous one", func(t *testing.T) map[string]string {
			return map[string]string{"b": contracted(rec(t, here.Value, 1, 2)), "c": rec(t, before, 3, 4)}
		}, Go, PreviousContracted, "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := RequireContract(c.data(t), "a", here)
			assert.Equal(t, c.want, d.Verdict, d.String())
			assert.Equal(t, c.reason, d.Reason, d.String())
			assert.Equal(t, c.other, d.Other, d.String())
		})
	}
}

func TestAnUnboundDatabaseAcceptsEveryRecord(t *testing.T) {
	d := PodStart(Pod{Identity: "a", Records: map[string]string{"a": rec(t, before, 1, 2)}, RecordsKnown: true, Database: dbid.ID{}})
	assert.Equal(t, Go, d.Verdict, d.String())
}
