package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/record"
)

func TestRunAsksTheDatabaseThroughTheCheckBeforeBelievingARecord(t *testing.T) {
	const recorded = `{"completedAt":"2026-01-02T03:04:05.000Z","job":"shop-app-migrate-old"}`
	tests := []struct {
		name     string
		record   string // empty: the identity is not recorded
		check    string // the check's shell script
		code     int
		checked  bool // the check ran
		migrates bool
		says     string
	}{
		{name: "recorded, and the database has it: nothing runs", record: recorded, check: "exit 0",
			checked: true, says: "and the database has it (the check"},
		{name: "recorded, but the database does not have it (restored from a dump): the migration runs again", record: recorded,
			check: "echo schema 2 is older than 3; exit 1", checked: true, migrates: true, says: "but the database does not have it"},
		{name: "not recorded: the migration runs, the check is not asked", check: "exit 0", migrates: true, says: "succeeded"},
		{name: "a check that cannot be started fails the run, and nothing runs", record: recorded, check: "exit 127",
			code: exitcode.Failed, checked: true, says: "could not be run (exit 127): not running the migration; fix the check (migration.check)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := recordsConfigMap()
			if tt.record != "" {
				cm.Data = map[string]string{identity: tt.record}
			}
			h := newHarness(cm)
			dir := t.TempDir()
			checked, migrated := filepath.Join(dir, "checked"), filepath.Join(dir, "migrated")
			check, err := json.Marshal([]string{"/bin/sh", "-c", "touch " + checked + "; " + tt.check})
			if err != nil {
				t.Fatal(err)
			}
			if got := h.run(runArgs("--check", string(check), "--", "/bin/sh", "-c", "touch "+migrated)...); got != tt.code {
				t.Fatalf("exit code = %d, want %d; stderr:\n%s", got, tt.code, &h.stderr)
			}
			if _, err := os.Stat(checked); (err == nil) != tt.checked {
				t.Errorf("the check ran = %v, want %v; stderr:\n%s", err == nil, tt.checked, &h.stderr)
			}
			if _, err := os.Stat(migrated); (err == nil) != tt.migrates {
				t.Errorf("the migration ran = %v, want %v; stderr:\n%s", err == nil, tt.migrates, &h.stderr)
			}
			if !strings.Contains(h.stderr.String(), tt.says) {
				t.Errorf("stderr does not say %q:\n%s", tt.says, &h.stderr)
			}
			if !tt.migrates {
				return
			}
			got, err := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migrations", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			entry, found, err := record.Lookup(got.Data, identity)
			if !found || err != nil || entry.Job != "shop-app-migrate" {
				t.Errorf("the run is not recorded anew by its own Job: %+v found=%v err=%v", entry, found, err)
			}
		})
	}
}

func TestRunRefusesACheckThatIsNotACommandAsAJSONArray(t *testing.T) {
	for _, bad := range []string{"migrate status", "[]", `[""]`, `{"cmd":"x"}`} {
		h := newHarness(recordsConfigMap())
		if got := h.run(runArgs("--check", bad, "--", "/bin/sh", "-c", "true")...); got != exitcode.Usage {
			t.Errorf("--check %s: exit code = %d, want %d (usage); stderr:\n%s", bad, got, exitcode.Usage, &h.stderr)
		}
	}
}
