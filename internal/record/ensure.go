package record

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Metadata is what a records ConfigMap created by the gate carries: the
// labels and annotations the chart renders on it, including Helm's ownership
// metadata (app.kubernetes.io/managed-by, meta.helm.sh/release-name and
// -namespace), so that Helm adopts it as the release object it renders.
type Metadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ParseMetadata reads the JSON form of Metadata ({"labels":{…},"annotations":{…}}).
func ParseMetadata(s string) (*Metadata, error) {
	var m Metadata
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("records ConfigMap metadata %q: want {\"labels\":{...},\"annotations\":{...}}: %w", s, err)
	}
	return &m, nil
}

// Helm's ownership metadata: what Helm 3 and 4 check before they adopt an existing object as one of the
// release's.
var (
	ownershipLabels      = []string{"app.kubernetes.io/managed-by"}
	ownershipAnnotations = []string{"meta.helm.sh/release-name", "meta.helm.sh/release-namespace"}
)

// ownership is the part of m that makes Helm adopt the release's ConfigMap, and the only part the gate writes
// on it. The rest of the chart's metadata (helm.sh/chart, app.kubernetes.io/version, ...) Helm applies itself
// at the upgrade the gate runs for. Had the gate written those labels too, it would co-own them, and Helm 4's
// server-side apply of another chart version (a rollback, --rollback-on-failure) would fail on a field-manager
// conflict with premigrate-gate and leave the rollback half applied.
func (m *Metadata) ownership() *Metadata {
	own := &Metadata{Labels: map[string]string{}, Annotations: map[string]string{}}
	for _, k := range ownershipLabels {
		if v, ok := m.Labels[k]; ok {
			own.Labels[k] = v
		}
	}
	for _, k := range ownershipAnnotations {
		if v, ok := m.Annotations[k]; ok {
			own.Annotations[k] = v
		}
	}
	return own
}

// carriedBy reports whether cm has every label and annotation of m.
func (m *Metadata) carriedBy(cm *corev1.ConfigMap) bool {
	for k, v := range m.Labels {
		if cm.Labels[k] != v {
			return false
		}
	}
	for k, v := range m.Annotations {
		if cm.Annotations[k] != v {
			return false
		}
	}
	return true
}

// isHook reports whether cm carries a helm.sh/hook annotation.
func isHook(cm *corev1.ConfigMap) bool {
	for k := range cm.Annotations {
		if strings.HasPrefix(k, "helm.sh/hook") {
			return true
		}
	}
	return false
}

func merge(into, from map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	maps.Copy(into, from)
	return into
}

func (m *Metadata) configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      maps.Clone(m.Labels),
		Annotations: maps.Clone(m.Annotations),
	}}
}

// Ensure returns the records ConfigMap called name, creating it empty with
// Helm's ownership metadata from m when it does not exist (m nil: a missing
// ConfigMap is returned as nil, with no error). An existing ConfigMap that
// lacks that ownership metadata gets it, and loses any helm.sh/hook
// annotation, its data untouched: one created by hand, or the pre-install
// hook of a chart before 0.2.0, which Helm would otherwise refuse to adopt
// as the release object it now is. The rest of m is Helm's to apply (see
// ownership).
func Ensure(ctx context.Context, client ConfigMapClient, name string, m *Metadata) (cm *corev1.ConfigMap, created bool, err error) {
	var own *Metadata
	if m != nil {
		own = m.ownership()
	}
	cm, err = client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		if own == nil || (own.carriedBy(cm) && !isHook(cm)) {
			return cm, false, nil
		}
		updated := cm.DeepCopy()
		updated.Labels = merge(updated.Labels, own.Labels)
		updated.Annotations = merge(updated.Annotations, own.Annotations)
		for k := range updated.Annotations {
			if strings.HasPrefix(k, "helm.sh/hook") { // no longer a hook: a release object from now on
				delete(updated.Annotations, k)
			}
		}
		cm, err = client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return nil, false, fmt.Errorf("give ConfigMap %s the release's metadata: %w", name, err)
		}
		return cm, false, nil
	case !apierrors.IsNotFound(err):
		return nil, false, fmt.Errorf("get ConfigMap %s: %w", name, err)
	case own == nil:
		return nil, false, nil
	}
	cm, err = client.Create(ctx, own.configMap(name), metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsAlreadyExists(err) {
		cm, err = client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, false, fmt.Errorf("get ConfigMap %s after a concurrent create: %w", name, err)
		}
		return cm, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("create ConfigMap %s: %w", name, err)
	}
	return cm, true, nil
}
