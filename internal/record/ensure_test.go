package record_test

import (
	"context"
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/premigrate/premigrate/internal/record"
)

var helmOwned = &record.Metadata{
	Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
	Annotations: map[string]string{"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": ns},
}

func TestWriteCreatesAMissingConfigMapWithTheChartsMetadataAndTheRecord(t *testing.T) {
	cs := fake.NewClientset()
	o := options("abc")
	o.Create = helmOwned
	if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), o); err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Data["abc"]; !ok {
		t.Errorf("the created ConfigMap holds no record: %v", cm.Data)
	}
	if cm.Labels["app.kubernetes.io/managed-by"] != "Helm" || cm.Annotations["meta.helm.sh/release-name"] != "shop" {
		t.Errorf("the created ConfigMap lacks the chart's metadata: labels %v annotations %v", cm.Labels, cm.Annotations)
	}
}

func TestEnsureGivesAnExistingConfigMapTheReleasesMetadataAndKeepsItsRecords(t *testing.T) {
	old := configMap(map[string]string{"abc": "x"})
	old.Annotations = map[string]string{"helm.sh/hook": "pre-install"} // as a chart before 0.2.0 made it
	cs := fake.NewClientset(old)
	cm, created, err := record.Ensure(context.Background(), cs.CoreV1().ConfigMaps(ns), name, helmOwned)
	if err != nil || created || cm.Data["abc"] != "x" {
		t.Fatalf("Ensure = %+v, created %v, %v", cm, created, err)
	}
	got, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations["meta.helm.sh/release-name"] != "shop" || got.Labels["app.kubernetes.io/managed-by"] != "Helm" || got.Data["abc"] != "x" ||
		got.Annotations["helm.sh/hook"] != "" {
		t.Errorf("ConfigMap after Ensure: labels %v annotations %v data %v", got.Labels, got.Annotations, got.Data)
	}
	before := len(cs.Actions())
	if _, _, err := record.Ensure(context.Background(), cs.CoreV1().ConfigMaps(ns), name, helmOwned); err != nil {
		t.Fatal(err)
	}
	for _, a := range cs.Actions()[before:] {
		if a.GetVerb() != "get" {
			t.Errorf("a second Ensure did %s: a ConfigMap with the metadata is left alone", a.GetVerb())
		}
	}
}

// The chart's metadata of another chart version: Helm's ownership plus labels that change between versions.
var chartMetadata = &record.Metadata{
	Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "premigrate-0.3.0",
		"app.kubernetes.io/version": "0.3.0", "app.kubernetes.io/component": "migration"},
	Annotations: map[string]string{"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": ns},
}

func TestEnsureWritesOnlyHelmsOwnershipSoThatHelm4CanApplyAnotherChartVersionWithoutAConflict(t *testing.T) {
	t.Run("a release object of an older chart version is left alone", func(t *testing.T) {
		old := configMap(map[string]string{"abc": "x"})
		old.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "premigrate-0.2.0", "app.kubernetes.io/version": "0.2.0"}
		old.Annotations = map[string]string{"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": ns}
		cs := fake.NewClientset(old)
		if _, _, err := record.Ensure(context.Background(), cs.CoreV1().ConfigMaps(ns), name, chartMetadata); err != nil {
			t.Fatal(err)
		}
		for _, a := range cs.Actions() {
			if a.GetVerb() != "get" {
				t.Errorf("Ensure did %s on a ConfigMap Helm already owns: the gate would co-own the chart's labels", a.GetVerb())
			}
		}
	})
	t.Run("a missing ConfigMap is created with Helm's ownership alone", func(t *testing.T) {
		cs := fake.NewClientset()
		cm, created, err := record.Ensure(context.Background(), cs.CoreV1().ConfigMaps(ns), name, chartMetadata)
		if err != nil || !created {
			t.Fatalf("Ensure = %+v, created %v, %v", cm, created, err)
		}
		want := map[string]string{"app.kubernetes.io/managed-by": "Helm"}
		if !maps.Equal(cm.Labels, want) || cm.Annotations["meta.helm.sh/release-name"] != "shop" || len(cm.Annotations) != 2 {
			t.Errorf("created with labels %v annotations %v, want labels %v and Helm's two annotations", cm.Labels, cm.Annotations, want)
		}
	})
	t.Run("an adopted ConfigMap gets Helm's ownership alone", func(t *testing.T) {
		old := configMap(map[string]string{"abc": "x"})
		old.Annotations = map[string]string{"helm.sh/hook": "pre-install"}
		cs := fake.NewClientset(old)
		cm, _, err := record.Ensure(context.Background(), cs.CoreV1().ConfigMaps(ns), name, chartMetadata)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := cm.Labels["helm.sh/chart"]; ok || cm.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("adopted with labels %v, want Helm's ownership and no chart label", cm.Labels)
		}
	})
}

func TestEnsureCreatesAMissingConfigMapOnlyWhenGivenItsMetadata(t *testing.T) {
	cs := fake.NewClientset()
	cm, created, err := record.Ensure(context.Background(), cs.CoreV1().ConfigMaps(ns), name, nil)
	if err != nil || created || cm != nil {
		t.Fatalf("without metadata: Ensure = %+v, created %v, %v; want nothing created", cm, created, err)
	}
	cm, created, err = record.Ensure(context.Background(), cs.CoreV1().ConfigMaps(ns), name, helmOwned)
	if err != nil || !created || cm.Annotations["meta.helm.sh/release-namespace"] != ns {
		t.Fatalf("with metadata: Ensure = %+v, created %v, %v", cm, created, err)
	}
}

func TestParseMetadataNamesTheExpectedShapeOnBadInput(t *testing.T) {
	if _, err := record.ParseMetadata(`{"labels":`); err == nil {
		t.Fatal("a truncated document parsed")
	}
	m, err := record.ParseMetadata(`{"labels":{"a":"b"},"annotations":{"c":"d"}}`)
	if err != nil || m.Labels["a"] != "b" || m.Annotations["c"] != "d" {
		t.Fatalf("ParseMetadata = %+v, %v", m, err)
	}
}
