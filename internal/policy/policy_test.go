package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/record"
)

var (
	t0     = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	here   = dbid.ID{Value: "pod/db-0@uid-2", Since: t0}
	before = "pod/db-0@uid-1" // the database's previous incarnation
)

// rec is one record: completed at t0+done minutes on database db, its Job created at t0+created minutes.
func rec(t *testing.T, db string, created, done int) string {
	t.Helper()
	v, err := record.Entry{CompletedAt: t0.Add(time.Duration(done) * time.Minute), Job: "job", Database: db,
		JobCreated: t0.Add(time.Duration(created) * time.Minute)}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// contracted adds a contract step to a record value.
func contracted(v string) string {
	return v[:len(v)-1] + `,"contractedAt":"2026-12-01T11:00:00.000Z","contractJob":"contract-job"}`
}

func TestStandSaysWhetherAnIdentityIsRecordedOnTheDatabaseNamedNow(t *testing.T) {
	for _, c := range []struct {
		name        string
		data        func(t *testing.T) map[string]string
		db          dbid.ID
		want        Standing
		undecodable bool
	}{
		{"no records at all", func(*testing.T) map[string]string { return nil }, here, Absent, false},
		{"another identity only", func(t *testing.T) map[string]string { return map[string]string{"b": rec(t, here.Value, 1, 2)} }, here, Absent, false},
		{"pruned", func(*testing.T) map[string]string { return map[string]string{record.PrunedKey: "x a"} }, here, Pruned, false},
		{"recorded here", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, here.Value, 1, 2)} }, here, Here, false},
		{"recorded on the database before", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, before, 1, 2)} }, here, Elsewhere, false},
		{"recorded with no database before this one was created", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, "", -9, -8)} }, here, Elsewhere, false},
		{"recorded anywhere, no database named", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, before, 1, 2)} }, dbid.ID{}, Here, false},
		{"a value edited by hand counts as recorded", func(*testing.T) map[string]string { return map[string]string{"a": "yes"} }, here, Here, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _, undecodable, _ := Stand(c.data(t), "a", c.db)
			assert.Equal(t, c.want, s)
			assert.Equal(t, c.undecodable, undecodable)
		})
	}
}

func TestBeforeRunRunsOnlyWhatThisDatabaseHasNotRecorded(t *testing.T) {
	for _, c := range []struct {
		name    string
		data    func(t *testing.T) map[string]string
		checked bool
		want    Verdict
		reason  Reason
	}{
		{"nothing recorded runs", func(*testing.T) map[string]string { return nil }, false, Go, NotRecorded},
		{"recorded here is done", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, here.Value, 1, 2)} }, false, Done, RecordedHere},
		{"recorded here with a check asks the database", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, here.Value, 1, 2)} }, true, Ask, RecordedHere},
		{"recorded on another database runs again", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, before, 1, 2)} }, false, Go, RecordedElsewhere},
		{"pruned is refused", func(*testing.T) map[string]string { return map[string]string{record.PrunedKey: "a"} }, false, Refuse, RecordPruned},
		{"edited by hand is done, never run twice", func(*testing.T) map[string]string { return map[string]string{"a": "{"} }, false, Done, RecordedHere},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := BeforeRun(Run{Identity: "a", Records: c.data(t), Database: here, Checked: c.checked})
			assert.Equal(t, c.want, d.Verdict, d.String())
			assert.Equal(t, c.reason, d.Reason, d.String())
		})
	}
}

func TestAfterCheckBelievesTheDatabaseOverTheRecord(t *testing.T) {
	ask := Decision{Verdict: Ask, Reason: RecordedHere}
	assert.Equal(t, Done, AfterCheck(ask, true).Verdict)
	no := AfterCheck(ask, false)
	assert.Equal(t, Go, no.Verdict)
	assert.Equal(t, CheckSaysNo, no.Reason)
	refused := Decision{Verdict: Refuse, Reason: RecordPruned}
	assert.Equal(t, refused, AfterCheck(refused, false), "only an Ask is the check's to answer")
}

func TestUnderTheLockAMigrationNeverRunsAfterOneDeployedAfterIt(t *testing.T) {
	created := t0.Add(5 * time.Minute)
	for _, c := range []struct {
		name    string
		data    func(t *testing.T) map[string]string
		created time.Time
		want    Verdict
		reason  Reason
		other   string
	}{
		{"nothing recorded runs", func(*testing.T) map[string]string { return nil }, created, Go, NotRecorded, ""},
		{"recorded meanwhile is done", func(t *testing.T) map[string]string { return map[string]string{"a": rec(t, here.Value, 5, 6)} }, created, Done, RecordedHere, ""},
		{"pruned meanwhile is refused", func(*testing.T) map[string]string { return map[string]string{record.PrunedKey: "a"} }, created, Refuse, RecordPruned, ""},
		{"an earlier deploy does not stop it", func(t *testing.T) map[string]string { return map[string]string{"b": rec(t, here.Value, 1, 2)} }, created, Go, NotRecorded, ""},
		{"a later deploy refuses it, the latest named", func(t *testing.T) map[string]string {
			return map[string]string{"b": rec(t, here.Value, 6, 7), "c": rec(t, here.Value, 8, 9)}
		}, created, Refuse, DeployedLater, "c"},
		{"a later deploy on another database does not", func(t *testing.T) map[string]string { return map[string]string{"b": rec(t, before, 6, 7)} }, created, Go, NotRecorded, ""},
		{"a later deploy refuses it even when its own record is of another database", func(t *testing.T) map[string]string {
			return map[string]string{"a": rec(t, before, 1, 2), "b": rec(t, here.Value, 6, 7)}
		}, created, Refuse, DeployedLater, "b"},
		{"an unknown creation time sees no later deploy", func(t *testing.T) map[string]string { return map[string]string{"b": rec(t, here.Value, 6, 7)} }, time.Time{}, Go, NotRecorded, ""},
		{"the same second is not later", func(t *testing.T) map[string]string { return map[string]string{"b": rec(t, here.Value, 5, 7)} }, created, Go, NotRecorded, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := UnderLock(Run{Identity: "a", Records: c.data(t), Database: here, JobCreated: c.created})
			assert.Equal(t, c.want, d.Verdict, d.String())
			assert.Equal(t, c.reason, d.Reason, d.String())
			assert.Equal(t, c.other, d.Other, d.String())
		})
	}
}

func TestConcludeRecordsOnlyAnExitZeroThatProvesTheMigrationRanOnThatDatabase(t *testing.T) {
	other := dbid.ID{Value: "pod/db-0@uid-3"}
	for _, c := range []struct {
		name   string
		ended  Ended
		record bool
		exit   Exit
	}{
		{"exit 0 is recorded", Ended{Database: here, After: here}, true, ExitOK},
		{"exit 0 with no database is recorded", Ended{}, true, ExitOK},
		{"a failure exits with the command's code", Ended{Code: 4, Database: here, After: here}, false, ExitCommand},
		{"a lost lock is a failure even at exit 0", Ended{LockLost: true, Database: here, After: here}, false, ExitFailed},
		{"exit 0 after SIGTERM proves nothing", Ended{Stopped: true, Database: here, After: here}, false, ExitInterrupted},
		{"a database that cannot be named again", Ended{Database: here, AfterErr: errors.New("gone")}, false, ExitFailed},
		{"a database that changed while it ran", Ended{Database: here, After: other}, false, ExitFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Conclude(c.ended)
			assert.Equal(t, c.record, got.Record, got.Why)
			assert.Equal(t, c.exit, got.Exit, got.Why)
		})
	}
}
