package policy

import (
	"errors"
	"fmt"
	"strings"
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
func rec(db string, created, done int) string {
	v, err := record.Entry{CompletedAt: t0.Add(time.Duration(done) * time.Minute), Job: "job", Database: db,
		JobCreated: t0.Add(time.Duration(created) * time.Minute)}.Encode()
	if err != nil {
		panic(err)
	}
	return v
}

// contractStarted adds the start of a contract step, and no success, to a record value.
func contractStarted(v string) string {
	return v[:len(v)-1] + `,"contractStartedAt":"2026-12-01T10:59:00.000Z","contractStartJob":"contract-job"}`
}

// contracted adds a contract step to a record value.
func contracted(v string) string {
	return v[:len(v)-1] + `,"contractedAt":"2026-12-01T11:00:00.000Z","contractJob":"contract-job"}`
}

func TestStandSaysWhetherAnIdentityIsRecordedOnTheDatabaseNamedNow(t *testing.T) {
	for _, c := range []struct {
		name        string
		data        map[string]string
		db          dbid.ID
		want        Standing
		undecodable bool
	}{
		{"no records at all", nil, here, Absent, false},
		{"another identity only", map[string]string{"b": rec(here.Value, 1, 2)}, here, Absent, false},
		{"pruned", map[string]string{record.PrunedKey: "x a"}, here, Pruned, false},
		{"recorded here", map[string]string{"a": rec(here.Value, 1, 2)}, here, Here, false},
		{"recorded on the database before", map[string]string{"a": rec(before, 1, 2)}, here, Elsewhere, false},
		{"recorded with no database before this one was created", map[string]string{"a": rec("", -9, -8)}, here, Elsewhere, false},
		{"recorded anywhere, no database named", map[string]string{"a": rec(before, 1, 2)}, dbid.ID{}, Here, false},
		{"a value edited by hand counts as recorded", map[string]string{"a": "yes"}, here, Here, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _, undecodable, _ := Stand(c.data, "a", c.db)
			assert.Equal(t, c.want, s)
			assert.Equal(t, c.undecodable, undecodable)
		})
	}
}

func TestBeforeRunRunsOnlyWhatThisDatabaseHasNotRecorded(t *testing.T) {
	for _, c := range []struct {
		name   string
		data   map[string]string
		check  Check
		want   Verdict
		reason Reason
	}{
		{"nothing recorded runs", nil, NoCheck, Go, NotRecorded},
		{"recorded here is done", map[string]string{"a": rec(here.Value, 1, 2)}, NoCheck, Done, RecordedHere},
		{"recorded here with a check asks the database", map[string]string{"a": rec(here.Value, 1, 2)}, Unasked, Ask, RecordedHere},
		{"recorded on another database runs again", map[string]string{"a": rec(before, 1, 2)}, NoCheck, Go, RecordedElsewhere},
		{"pruned is refused", map[string]string{record.PrunedKey: "a"}, NoCheck, Refuse, RecordPruned},
		{"edited by hand is done, never run twice", map[string]string{"a": "{"}, NoCheck, Done, RecordedHere},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := BeforeRun(Run{Identity: "a", Records: c.data, Database: here, Check: c.check})
			assert.Equal(t, c.want, d.Verdict, d.String())
			assert.Equal(t, c.reason, d.Reason, d.String())
		})
	}
}

// full is a records ConfigMap's data of n records of 1 KiB-long Job names: n = 1000 is about 1.1 MiB.
func full(n int) map[string]string {
	data := make(map[string]string, n)
	long := strings.Repeat("j", 1000)
	for i := range n {
		v, err := record.Entry{CompletedAt: t0, Job: long, Database: here.Value}.Encode()
		if err != nil {
			panic(err)
		}
		data[fmt.Sprintf("%010x", i)] = v
	}
	return data
}

func TestARunWhoseRecordWouldNotFitIsRefusedBeforeItRuns(t *testing.T) {
	for _, c := range []struct {
		name   string
		data   map[string]string
		keep   int
		want   Verdict
		reason Reason
	}{
		{"a few records fit", full(10), 0, Go, NotRecorded},
		{"keeping every record, a full ConfigMap refuses the run", full(1010), 0, Refuse, RecordsFull},
		{"a bound that prunes the oldest makes room", full(1010), 20, Go, NotRecorded},
		{"a bound too high for the entries' size still refuses", full(1010), 5000, Refuse, RecordsFull},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := BeforeRun(Run{Identity: "a", Records: c.data, Database: here, Job: "job", Keep: c.keep})
			assert.Equal(t, c.want, d.Verdict, d.String())
			assert.Equal(t, c.reason, d.Reason, d.String())
			d = UnderLock(Run{Identity: "a", Records: c.data, Database: here, Job: "job", Keep: c.keep})
			assert.Equal(t, c.want, d.Verdict, "under the lock: "+d.String())
		})
	}
	d := BeforeRun(Run{Identity: "a", Records: full(1010), Database: here, Job: "job"})
	assert.Contains(t, d.Why, "set migration.keepRecords")
}

func TestUnderTheLockAMigrationNeverRunsAfterOneDeployedAfterIt(t *testing.T) {
	created := t0.Add(5 * time.Minute)
	for _, c := range []struct {
		name    string
		data    map[string]string
		created time.Time
		check   Check
		want    Verdict
		reason  Reason
		other   string
	}{
		{"nothing recorded runs", nil, created, NoCheck, Go, NotRecorded, ""},
		{"recorded meanwhile is done", map[string]string{"a": rec(here.Value, 5, 6)}, created, NoCheck, Done, RecordedHere, ""},
		{"pruned meanwhile is refused", map[string]string{record.PrunedKey: "a"}, created, NoCheck, Refuse, RecordPruned, ""},
		{"recorded meanwhile with a check asks the database", map[string]string{"a": rec(here.Value, 5, 6)}, created, Unasked, Ask, RecordedHere, ""},
		{"recorded meanwhile, denied by the check, still never runs after a later deploy", map[string]string{"a": rec(here.Value, 5, 6), "b": rec(here.Value, 7, 8)}, created, Denies, Refuse, DeployedLater, "b"},
		{"recorded meanwhile, denied by the check, runs again", map[string]string{"a": rec(here.Value, 5, 6)}, created, Denies, Go, CheckSaysNo, ""},
		{"edited by hand meanwhile is done, never run twice", map[string]string{"a": "{"}, created, NoCheck, Done, RecordedHere, ""},
		{"an earlier deploy does not stop it", map[string]string{"b": rec(here.Value, 1, 2)}, created, NoCheck, Go, NotRecorded, ""},
		{"a later deploy refuses it, the latest named", map[string]string{"b": rec(here.Value, 6, 7), "c": rec(here.Value, 8, 9)}, created, NoCheck, Refuse, DeployedLater, "c"},
		{"a later deploy on another database does not", map[string]string{"b": rec(before, 6, 7)}, created, NoCheck, Go, NotRecorded, ""},
		{"a later deploy refuses it even when its own record is of another database", map[string]string{"a": rec(before, 1, 2), "b": rec(here.Value, 6, 7)}, created, NoCheck, Refuse, DeployedLater, "b"},
		{"an unknown creation time sees no later deploy", map[string]string{"b": rec(here.Value, 6, 7)}, time.Time{}, NoCheck, Go, NotRecorded, ""},
		{"the same second is not later", map[string]string{"b": rec(here.Value, 5, 7)}, created, NoCheck, Go, NotRecorded, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := UnderLock(Run{Identity: "a", Records: c.data, Database: here, JobCreated: c.created, Check: c.check})
			assert.Equal(t, c.want, d.Verdict, d.String())
			assert.Equal(t, c.reason, d.Reason, d.String())
			assert.Equal(t, c.other, d.Other, d.String())
		})
	}
}

func TestConcludeRecordsOnlyAnExitZeroThatProvesTheMigrationRanOnThatDatabase(t *testing.T) {
	other := dbid.ID{Value: "pod/db-0@uid-3"}
	for _, c := range []struct {
		name       string
		ended      Ended
		record     bool
		exit       Exit
		namesAgain bool
	}{
		{"exit 0 is recorded", Ended{Database: here, After: here}, true, ExitOK, true},
		{"exit 0 with no database is recorded", Ended{}, true, ExitOK, false},
		{"a failure exits with the command's code", Ended{Code: 4, Database: here, After: here}, false, ExitCommand, false},
		{"a lost lock is a failure even at exit 0", Ended{LockLost: true, Database: here, After: here}, false, ExitFailed, false},
		{"exit 0 after SIGTERM proves nothing", Ended{Stopped: true, Database: here, After: here}, false, ExitInterrupted, false},
		{"a database that cannot be named again", Ended{Database: here, AfterErr: errors.New("gone")}, false, ExitFailed, true},
		{"a database that changed while it ran", Ended{Database: here, After: other}, false, ExitFailed, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Conclude(c.ended)
			assert.Equal(t, c.record, got.Record, got.Reason)
			assert.Equal(t, c.exit, got.Exit, got.Reason)
			assert.Equal(t, c.namesAgain, NeedsDatabaseAgain(c.ended), "whether the database is named again")
		})
	}
}
