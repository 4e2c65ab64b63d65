package record_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/premigrate/premigrate/internal/record"
)

func namedConfigMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
}

func TestTheRecordsThatCountAreTheStoresOnceItExistsElseTheAnchors(t *testing.T) {
	anchor := namedConfigMap("shop-migrations", map[string]string{"old": "{}"})
	store := namedConfigMap("shop-migration-records", map[string]string{"new": "{}"})
	for _, c := range []struct {
		name     string
		where    record.Where
		objects  []runtime.Object
		wantFrom string
		wantData map[string]string
	}{
		{"the store when it exists", record.Where{Anchor: anchor.Name, Store: store.Name}, []runtime.Object{anchor, store}, store.Name, store.Data},
		{"the anchor until the store exists", record.Where{Anchor: anchor.Name, Store: store.Name}, []runtime.Object{anchor}, anchor.Name, anchor.Data},
		{"the anchor without a store", record.Where{Anchor: anchor.Name}, []runtime.Object{anchor, store}, anchor.Name, anchor.Data},
		{"none when neither exists", record.Where{Anchor: anchor.Name, Store: store.Name}, nil, anchor.Name, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.where.Read(context.Background(), fake.NewClientset(c.objects...).CoreV1().ConfigMaps(ns))
			require.NoError(t, err)
			assert.Equal(t, c.wantFrom, got.From)
			assert.Equal(t, c.wantData, got.Data)
		})
	}
}

func TestAWatcherKnowsTheRecordsOnlyOnceItListedWhatCouldHoldThem(t *testing.T) {
	w := record.Where{Anchor: "a", Store: "s"}
	anchor := namedConfigMap("a", map[string]string{"old": "{}"})
	_, known := w.Choose(anchor, nil, true, false)
	assert.False(t, known, "the store may hold newer records: not listed yet")
	r, known := w.Choose(anchor, nil, true, true)
	assert.True(t, known)
	assert.Equal(t, "a", r.From)
	r, known = w.Choose(nil, namedConfigMap("s", nil), false, true)
	assert.True(t, known, "an existing store is the answer, whatever the anchor")
	assert.Equal(t, map[string]string{}, r.Data, "an existing store without data holds no records, not none")
	assert.Equal(t, "s", w.Holder())
	assert.Equal(t, "a", record.Where{Anchor: "a"}.Holder())
}
