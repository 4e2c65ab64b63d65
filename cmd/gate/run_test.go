package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRunRecordsTheIdentityOnlyWhenTheMigrationCommandSucceeds(t *testing.T) {
	cases := []struct {
		name       string
		script     string
		wantCode   int
		wantRecord bool
		wantOutput string
	}{
		{name: "success", script: "echo applied version 2", wantCode: 0, wantRecord: true, wantOutput: "applied version 2"},
		{name: "failure", script: "echo injected failure >&2; exit 1", wantCode: 1, wantOutput: "injected failure"},
		{name: "refusal keeps its exit code", script: "echo refusing destructive migration >&2; exit 3", wantCode: 3, wantOutput: "refusing destructive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(recordsConfigMap())
			got := h.run("run", "--identity", identity, "--records", "shop-app-migrations", "--job", "shop-app-migrate",
				"--", "/bin/sh", "-c", tc.script)
			if got != tc.wantCode {
				t.Fatalf("exit code = %d, want %d; stderr:\n%s", got, tc.wantCode, &h.stderr)
			}
			if out := h.stdout.String() + h.stderr.String(); !strings.Contains(out, tc.wantOutput) {
				t.Errorf("the command's output %q was not passed through:\n%s", tc.wantOutput, out)
			}
			cm, err := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migrations", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := cm.Data[identity]; ok != tc.wantRecord {
				t.Errorf("record present = %v, want %v (data %v)", ok, tc.wantRecord, cm.Data)
			}
		})
	}
}

func TestRunNeedsACommandAndACommandThatStarts(t *testing.T) {
	h := newHarness(recordsConfigMap())
	if got := h.run("run", "--identity", identity, "--records", "shop-app-migrations", "--job", "j"); got != exitUsage {
		t.Errorf("without a command: exit code %d, want %d", got, exitUsage)
	}
	if got := h.run("run", "--identity", identity, "--records", "shop-app-migrations", "--job", "j", "--", "/does/not/exist"); got != 127 {
		t.Errorf("with a missing command: exit code %d, want 127", got)
	}
}

func TestCopyWritesAnExecutableCopyOfItself(t *testing.T) {
	h := newHarness()
	to := filepath.Join(t.TempDir(), "gate")
	if got := h.run("copy", "--to", to); got != 0 {
		t.Fatalf("exit code = %d; stderr:\n%s", got, &h.stderr)
	}
	fi, err := os.Stat(to)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o111 == 0 || fi.Size() == 0 {
		t.Errorf("copy is %v, %d bytes: want a non-empty executable", fi.Mode(), fi.Size())
	}
}
