package gate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/record"
)

// The sources answer in any order: the release's ConfigMap can arrive before the store's first list.
func TestARecordInTheReleasesConfigMapDecidesNothingUntilTheStoreIsKnownToBeAbsent(t *testing.T) {
	const identity = "abc123def0"
	anchor := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-app-migrations"},
		Data:       map[string]string{identity: `{"completedAt":"2026-01-02T03:04:05Z","job":"shop-app-migrate-abc123def0"}`},
	}
	store := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shop-app-records"}, Data: map[string]string{}}
	newView := func() *view {
		return &view{identity: identity, recs: record.Records{From: anchor.Name}, anchorName: anchor.Name, storeName: store.Name, known: map[string]bool{}}
	}

	v := newView()
	v.setConfigMap(anchor.Name, anchor)
	if d := v.decide(); d.outcome != 0 {
		t.Fatalf("release's ConfigMap known, store not yet: outcome %v, want to keep waiting", d.outcome)
	}
	v.setConfigMap(store.Name, store)
	if d := v.decide(); d.outcome != 0 {
		t.Fatalf("store known without the record: outcome %v, want to keep waiting (the store supersedes the release's ConfigMap)", d.outcome)
	}

	v = newView()
	v.setConfigMap(anchor.Name, anchor)
	v.setConfigMap(store.Name, nil)
	if d := v.decide(); d.outcome != Succeeded {
		t.Fatalf("store known to be absent: outcome %v, want %v from the release's ConfigMap", d.outcome, Succeeded)
	}
}
