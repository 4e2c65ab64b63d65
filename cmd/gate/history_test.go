package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/record"
)

// Each run that started the migration command leaves, in the --history ConfigMap, its outcome, duration,
// Job and pod and the last lines of its output (both streams), whatever its outcome; the newest
// --history-keep runs are kept, and the ConfigMap is owned by the release's records ConfigMap. (A run whose
// identity is already recorded starts no command and adds nothing.)
func TestEveryRunLeavesItsOutcomeAndLastOutputLinesInTheHistory(t *testing.T) {
	h := newHarness(recordsConfigMap())
	h.env.getenv = func(k string) string {
		return map[string]string{"POD_NAMESPACE": "shop", "HOSTNAME": "shop-app-migrate-x1"}[k]
	}
	hist := func(script string) int {
		return h.run(runArgs("--history", "shop-app-migration-runs", "--history-keep", "2", "--", "/bin/sh", "-c", script)...)
	}
	if got := hist("echo connecting; echo cannot reach the database >&2; exit 1"); got != 1 {
		t.Fatalf("the failing run exited %d, want 1; stderr:\n%s", got, &h.stderr)
	}
	if got := hist(`for i in $(seq 1 30); do echo "applied version $i"; done`); got != exitcode.OK {
		t.Fatalf("the succeeding run exited %d, want 0; stderr:\n%s", got, &h.stderr)
	}
	cm, err := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migration-runs", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no history ConfigMap: %v", err)
	}
	runs := cm.Data[record.HistoryKey]
	for _, want := range []string{
		"identity " + identity + "  job shop-app-migrate  pod shop-app-migrate-x1  failed: exit 1, nothing recorded after ",
		"    connecting\n", // stdout and stderr, each line as it arrives (their order across the streams is not kept)
		"    cannot reach the database\n",
		"succeeded, recorded after ",
		"    applied version 30\n",
	} {
		if !strings.Contains(runs, want) {
			t.Errorf("the history lacks %q:\n%s", want, runs)
		}
	}
	if strings.Contains(runs, fmt.Sprintf("applied version %d\n", 30-record.TailLines)) {
		t.Errorf("the history keeps more than the last %d output lines of a run:\n%s", record.TailLines, runs)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].Name != "shop-app-migrations" {
		t.Errorf("the history's owners %v, want the release's records ConfigMap", cm.OwnerReferences)
	}
	third := h.run("run", "--identity", "fedcba9876", "--records", "shop-app-migrations", "--job", "shop-app-migrate",
		"--history", "shop-app-migration-runs", "--history-keep", "2", "--", "/bin/sh", "-c", "echo third")
	if got := third; got != exitcode.OK {
		t.Fatalf("the third run exited %d; stderr:\n%s", got, &h.stderr)
	}
	cm, _ = h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migration-runs", metav1.GetOptions{})
	if runs := cm.Data[record.HistoryKey]; strings.Contains(runs, "cannot reach the database") || strings.Count(runs, "  identity ") != 2 {
		t.Errorf("with --history-keep 2 the history keeps:\n%s", runs)
	}
}
