package record_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/premigrate/premigrate/internal/record"
)

func run(n int, outcome string, tail ...string) record.Run {
	return record.Run{
		Started: now.Add(time.Duration(n) * time.Minute), Took: 1500 * time.Millisecond, Identity: fmt.Sprintf("id%08d", n),
		Job: "shop-migrate", Pod: "shop-migrate-x", Outcome: outcome, Tail: tail,
	}
}

func TestTheHistoryKeepsTheNewestRunsEachWithItsOutcomeAndLastOutputLines(t *testing.T) {
	h := ""
	for n := 1; n <= 4; n++ {
		h = record.AppendRun(h, run(n, "succeeded, recorded", fmt.Sprintf("applied version %d", n), "done"), 3)
	}
	want := "" +
		"2026-03-04T05:08:07Z  identity id00000002  job shop-migrate  pod shop-migrate-x  succeeded, recorded after 1.5s\n    applied version 2\n    done\n" +
		"2026-03-04T05:09:07Z  identity id00000003  job shop-migrate  pod shop-migrate-x  succeeded, recorded after 1.5s\n    applied version 3\n    done\n" +
		"2026-03-04T05:10:07Z  identity id00000004  job shop-migrate  pod shop-migrate-x  succeeded, recorded after 1.5s\n    applied version 4\n    done\n"
	if h != want {
		t.Errorf("history:\n%s\nwant:\n%s", h, want)
	}
}

func TestARunsOutputIsCutToItsLastLinesAndEachLineToItsBound(t *testing.T) {
	var tail []string
	for i := 1; i <= record.TailLines+5; i++ {
		tail = append(tail, fmt.Sprintf("line %d", i))
	}
	tail[len(tail)-1] = strings.Repeat("é", record.TailLineBytes) // two bytes each: cut on a rune boundary
	h := record.AppendRun("", run(1, "failed: exit 1, nothing recorded", tail...), 10)
	lines := strings.Split(strings.TrimSuffix(h, "\n"), "\n")
	if len(lines) != 1+record.TailLines {
		t.Fatalf("%d lines, want the run's line and its last %d output lines:\n%s", len(lines), record.TailLines, h)
	}
	if lines[1] != "    line 6" {
		t.Errorf("first output line kept %q, want line 6 (the last %d)", lines[1], record.TailLines)
	}
	last := strings.TrimPrefix(lines[len(lines)-1], "    ")
	if !strings.HasSuffix(last, " …") || len(strings.TrimSuffix(last, " …")) > record.TailLineBytes || !strings.HasPrefix(last, "éé") {
		t.Errorf("a long line is kept as %q (%d bytes): want at most %d bytes of it, marked as cut", last, len(last), record.TailLineBytes)
	}
}

func TestWriteRunCreatesTheHistoryConfigMapThenAddsToIt(t *testing.T) {
	cs := fake.NewClientset()
	client := cs.CoreV1().ConfigMaps(ns)
	o := record.HistoryOptions{ConfigMap: "shop-migration-runs", Keep: 2, Create: &record.Metadata{Labels: map[string]string{"app.kubernetes.io/instance": "shop"}},
		Owner: &metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: "u1"}}
	for n := 1; n <= 3; n++ {
		if err := record.WriteRun(context.Background(), client, o, run(n, "succeeded, recorded")); err != nil {
			t.Fatal(err)
		}
	}
	cm, err := client.Get(context.Background(), "shop-migration-runs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels["app.kubernetes.io/instance"] != "shop" || len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].Name != name {
		t.Errorf("created with labels %v owners %v", cm.Labels, cm.OwnerReferences)
	}
	h := cm.Data[record.HistoryKey]
	if strings.Count(h, "identity ") != 2 || !strings.Contains(h, "id00000002") || !strings.Contains(h, "id00000003") {
		t.Errorf("history keeps %q, want the newest 2 runs", h)
	}
}

func TestWriteRunGivesAHistoryCreatedWithoutItsOwnerTheOwnerOnceItExists(t *testing.T) {
	cs := fake.NewClientset()
	client := cs.CoreV1().ConfigMaps(ns)
	o := record.HistoryOptions{ConfigMap: "shop-migration-runs", Keep: 10}
	// a pre-install hook's run: the release's ConfigMap does not exist yet
	if err := record.WriteRun(context.Background(), client, o, run(1, "succeeded, recorded")); err != nil {
		t.Fatal(err)
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: "u1"}
	o.Owner = &owner
	if err := record.WriteRun(context.Background(), client, o, run(2, "succeeded, recorded")); err != nil {
		t.Fatal(err)
	}
	cm, err := client.Get(context.Background(), "shop-migration-runs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0] != owner {
		t.Fatalf("the history is owned by %v after a run that found the release's ConfigMap, want %v", cm.OwnerReferences, owner)
	}
	// an owner it has is never replaced
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: "u2"}
	o.Owner = &other
	if err := record.WriteRun(context.Background(), client, o, run(3, "succeeded, recorded")); err != nil {
		t.Fatal(err)
	}
	if cm, _ = client.Get(context.Background(), "shop-migration-runs", metav1.GetOptions{}); len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0] != owner {
		t.Errorf("the history's owner became %v, want it kept as %v", cm.OwnerReferences, owner)
	}
}
