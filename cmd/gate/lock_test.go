package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/record"
)

var jobCreated = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

// migrationJob is the Job of the migration under test, created at jobCreated.
func migrationJob() *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "shop-app-migrate", Namespace: "shop", CreationTimestamp: metav1.NewTime(jobCreated)}}
}

func TestRunNeverRunsAMigrationAfterOneDeployedLaterSucceeded(t *testing.T) {
	cases := []struct {
		name       string
		otherJob   time.Time
		noJob      bool // the Job cannot be read: this pod's start bounds its creation
		wantCode   int
		wantRanCmd bool
	}{
		{name: "a Job created later succeeded: refused", otherJob: jobCreated.Add(10 * time.Second), wantCode: exitcode.Refused},
		{name: "a Job created earlier succeeded: runs", otherJob: jobCreated.Add(-10 * time.Second), wantCode: exitcode.OK, wantRanCmd: true},
		{name: "a Job created in the same second: not ordered, runs", otherJob: jobCreated, wantCode: exitcode.OK, wantRanCmd: true},
		{name: "this Job unreadable, a Job created after this pod started succeeded: refused", otherJob: time.Now().Add(time.Hour), noJob: true, wantCode: exitcode.Refused},
		{name: "this Job unreadable, a Job created before this pod started succeeded: runs", otherJob: time.Now().Add(-time.Minute), noJob: true, wantCode: exitcode.OK, wantRanCmd: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			other, err := record.Entry{CompletedAt: tc.otherJob.Add(time.Minute), Job: "shop-app-migrate-other", JobCreated: tc.otherJob}.Encode()
			if err != nil {
				t.Fatal(err)
			}
			cm := recordsConfigMap()
			cm.Data = map[string]string{"0ther00000": other}
			h := newHarness(cm, migrationJob())
			if tc.noJob {
				h = newHarness(cm)
			}
			marker := filepath.Join(t.TempDir(), "ran")
			if got := h.run(runArgs("--", "/bin/sh", "-c", "touch "+marker)...); got != tc.wantCode {
				t.Fatalf("exit code = %d, want %d; stderr:\n%s", got, tc.wantCode, &h.stderr)
			}
			if _, err := os.Stat(marker); (err == nil) != tc.wantRanCmd {
				t.Errorf("the migration command ran: %v, want %v; stderr:\n%s", err == nil, tc.wantRanCmd, &h.stderr)
			}
			if tc.wantCode == exitcode.Refused {
				for _, want := range []string{"0ther00000", "shop-app-migrate-other", "created later", "never runs after one deployed after it"} {
					if !strings.Contains(h.stderr.String(), want) {
						t.Errorf("the refusal does not say %q:\n%s", want, &h.stderr)
					}
				}
			}
			got, _ := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migrations", metav1.GetOptions{})
			if _, held := record.HolderOf(got); held {
				t.Errorf("the migration lock is still held after the run: %v", got.Annotations)
			}
			if e, found, _ := record.Lookup(got.Data, identity); tc.wantRanCmd && !tc.noJob && (!found || !e.JobCreated.Equal(jobCreated)) {
				t.Errorf("record %+v (found %v), want one that stores the Job's creation time %s", e, found, jobCreated)
			}
		})
	}
}

func TestRunWaitsForTheMigrationThatHoldsTheLockAndThenDecidesOnTheRecordsAsTheyAre(t *testing.T) {
	holder, err := json.Marshal(record.Holder{Identity: identity, Job: "shop-app-migrate-twin", Pod: "twin", Acquired: time.Now(), Renewed: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	cm := recordsConfigMap()
	cm.Annotations = map[string]string{record.LockAnnotation: string(holder)}
	h := newHarness(cm, migrationJob())
	// the holder, a Job of the same identity (a GitOps tool re-applied it), completes while we wait
	go func() {
		time.Sleep(1500 * time.Millisecond)
		done := recordsConfigMap()
		done.Data = map[string]string{identity: `{"completedAt":"2026-05-06T07:09:00.000Z","job":"shop-app-migrate-twin"}`}
		if _, err := h.cs.CoreV1().ConfigMaps("shop").Update(context.Background(), done, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}()
	marker := filepath.Join(t.TempDir(), "ran")
	if got := h.run(runArgs("--", "/bin/sh", "-c", "touch "+marker)...); got != exitcode.OK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", got, &h.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the migration ran again although its twin recorded it while this one waited for the lock")
	}
	for _, want := range []string{"holds the lock", "shop-app-migrate-twin", "recorded by Job shop-app-migrate-twin", "while this one waited"} {
		if !strings.Contains(h.stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, &h.stderr)
		}
	}
}
