//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/test/framework"
)

// The scenario this file proves (the report lists it; a full run must run it once).
var recordsFullScenario = scenarios.Declare(framework.NeverSkipped, framework.CI, "records-full-refused-before-running")

// The library's keepRecords: 0 keeps every record, and a ConfigMap holds at most 1 MiB: at some deploy the
// record of a migration no longer fits. Written after the migration, that record would fail: the migration ran
// and is not recorded, its pods wait for a record that never comes, and the next deploy runs it again. The gate
// asks first (record.Room): the Job is refused at once (exit 3, one pod), before the command runs, naming the
// ConfigMap's size and keepRecords; the database (the ledger's own ledger_schema) shows nothing ran. A bound on
// keepRecords then prunes the oldest and the same deploy goes through. The records here are filled by the test,
// as 2,600 deploys would (Helm 3, the example chart on its external database).
func TestARunWhoseRecordWouldOverflowItsConfigMapIsRefusedBeforeItRuns(t *testing.T) {
	share(t, weightOne, 80*time.Second)
	res := scenario(t, recordsFullScenario, env.Helm3)
	ctx := context.Background()
	l := newLedger(t, env.Helm3)
	values := func(v, keep int) map[string]any {
		return map[string]any{"schemaVersion": v, "migrations": map[string]any{"keepRecords": keep}}
	}
	if out, err := l.deploy(values(1, 0), true); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	l.assertSchema(1, 2)
	store := l.name + "-ledger-migration-records"
	fillRecords(t, l.ns, store, record.MaxConfigMapBytes-60)

	start := time.Now()
	out, err := l.deploy(values(2, 0), true)
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	if err == nil {
		t.Fatalf("the upgrade whose record cannot fit succeeded:\n%s", out)
	}
	job, err := env.Client.BatchV1().Jobs(l.ns).Get(ctx, l.name+"-ledger-migrate", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the hook Job: %v", err)
	}
	if job.Status.Failed != 1 || !failedFor(job, "PodFailurePolicy") {
		t.Errorf("the refused Job has %d failed pods and conditions %+v: want 1, failed at once (the gate's exit 3)", job.Status.Failed, job.Status.Conditions)
	}
	logs, _ := env.Run.Stdout(t, env.Kubectl, "logs", "-n", l.ns, "job/"+job.Name, "-c", "migrate")
	if !strings.Contains(logs, "would bring the records ConfigMap to") || !strings.Contains(logs, "keepRecords") {
		t.Errorf("the refused Job's log does not name the ConfigMap's size and keepRecords:\n%s", logs)
	}
	if got := l.psql(`SELECT max(version) FROM ledger_schema`); got != "1" {
		t.Errorf("schema = %s after the refused upgrade, want 1: the migration ran although its record could not be written", got)
	}

	// a bound: the oldest records are pruned on the next run, which fits
	start = time.Now()
	if out, err := l.deploy(values(2, 20), true); err != nil {
		t.Fatalf("the upgrade with keepRecords 20: %v\n%s", err, out)
	}
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	res.Upgrades = 2
	l.assertSchema(2, 2)
	cm, err := env.Client.CoreV1().ConfigMaps(l.ns).Get(ctx, store, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := record.Size(cm.Data); n > 64<<10 {
		t.Errorf("the records ConfigMap holds %d bytes after keepRecords 20 pruned it, want well under 64 KiB", n)
	}
}

// fillRecords adds records of old, never-run identities to the store until its data is size bytes: each as
// gate run writes one, with a long Job name (about 400 bytes a record, as a chart's keepRecords: 0 piles up).
func fillRecords(t *testing.T, ns, name string, size int) {
	t.Helper()
	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the records: %v", err)
	}
	entry := func(i, jobLen int) (string, string) {
		job := fmt.Sprintf("filler-%d-", i)
		job += strings.Repeat("x", max(0, jobLen-len(job)))
		v, err := record.Entry{CompletedAt: time.Date(2020, 1, 1, 0, 0, i%60, 0, time.UTC), Job: job}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("f%09x", i), v
	}
	for i := 0; ; i++ {
		left := size - record.Size(cm.Data)
		k, v := entry(i, 300)
		if left >= 2*(len(k)+len(v)) {
			cm.Data[k] = v
			continue
		}
		// the last one takes exactly what is left
		k, v = entry(i, 300+left-(len(k)+len(v)))
		cm.Data[k] = v
		break
	}
	if got := record.Size(cm.Data); got != size {
		t.Fatalf("filled the records to %d bytes, want %d", got, size)
	}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("filling the records: %v", err)
	}
}
