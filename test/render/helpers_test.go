// Package render tests the premigrate chart without a cluster: every template is rendered with the
// Helm SDK and every document is decoded strictly into its typed Kubernetes object.
package render

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/premigrate/premigrate/test/framework"
)

const (
	chartDir    = "../../charts/premigrate"
	releaseName = "demo"
	namespace   = "apps"
	fullname    = "demo-premigrate"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// kubeVersion is the cluster version the tests render for.
var kubeVersion = chartutil.KubeVersion{Version: "v1.37.0", Major: "1", Minor: "37"}

// renderOptions selects what a render sees.
type renderOptions struct {
	// values is a YAML document of user values.
	values string
	// upgrade renders with .Release.IsUpgrade (else .Release.IsInstall).
	upgrade bool
	// release overrides the release name.
	release string
	// existing objects are what `lookup` finds in the cluster. An upgrade also finds the release's records
	// ConfigMap, with Helm's ownership, as every upgrade after an install does, unless noRecords is set.
	existing []runtime.Object
	// noRecords renders an upgrade that finds no records ConfigMap (migrations enabled later, deleted by hand).
	noRecords bool
	// noCluster renders the way helm template, --dry-run=client and Argo CD do: every lookup
	// finds nothing but the existing objects (else the namespace's kube-root-ca.crt is found, as on every
	// cluster).
	noCluster bool
	// secretFromRelease renders with no Secret database.existingSecret in the cluster: the release brings it
	// (extraObjects, an ExternalSecret). Otherwise a render that sees the cluster finds it there, as it is
	// before the release on every cluster with an external database.
	secretFromRelease bool
	// kubeVersion overrides the cluster version (.Capabilities.KubeVersion), e.g. "v1.33.0".
	kubeVersion string
	// chart is the chart's folder; empty means charts/premigrate. The library comes from its sources.
	chart string
	// records names the records ConfigMap an upgrade finds; empty means the premigrate chart's.
	records string
	// chartVersion overrides the chart's version (a release of the chart after this one).
	chartVersion string
}

// object is one rendered document, decoded strictly.
type object struct {
	source string
	kind   string
	obj    runtime.Object
	meta   metav1.Object
}

func (o object) name() string { return o.meta.GetName() }

// result is a whole render.
type result struct {
	files   map[string]string
	objects []object
	notes   string
}

// kinds are the kinds the chart may render, with their only accepted apiVersion. HTTPRoute (Gateway API, not
// in k8s.io/api) is decoded as unstructured; kubeconform checks it against the CRD's schema (hack/lint.sh).
var kinds = map[string]struct {
	apiVersion string
	make       func() runtime.Object
}{
	"Deployment":          {"apps/v1", func() runtime.Object { return &appsv1.Deployment{} }},
	"StatefulSet":         {"apps/v1", func() runtime.Object { return &appsv1.StatefulSet{} }},
	"Job":                 {"batch/v1", func() runtime.Object { return &batchv1.Job{} }},
	"CronJob":             {"batch/v1", func() runtime.Object { return &batchv1.CronJob{} }},
	"Pod":                 {"v1", func() runtime.Object { return &corev1.Pod{} }},
	"Service":             {"v1", func() runtime.Object { return &corev1.Service{} }},
	"ServiceAccount":      {"v1", func() runtime.Object { return &corev1.ServiceAccount{} }},
	"ConfigMap":           {"v1", func() runtime.Object { return &corev1.ConfigMap{} }},
	"Secret":              {"v1", func() runtime.Object { return &corev1.Secret{} }},
	"PodDisruptionBudget": {"policy/v1", func() runtime.Object { return &policyv1.PodDisruptionBudget{} }},
	"Role":                {"rbac.authorization.k8s.io/v1", func() runtime.Object { return &rbacv1.Role{} }},
	"RoleBinding":         {"rbac.authorization.k8s.io/v1", func() runtime.Object { return &rbacv1.RoleBinding{} }},
	"Ingress":             {"networking.k8s.io/v1", func() runtime.Object { return &networkingv1.Ingress{} }},
	"HorizontalPodAutoscaler": {"autoscaling/v2", func() runtime.Object {
		return &autoscalingv2.HorizontalPodAutoscaler{}
	}},
	"HTTPRoute": {"gateway.networking.k8s.io/v1", func() runtime.Object { return &unstructured.Unstructured{} }},
	"ValidatingAdmissionPolicy": {"admissionregistration.k8s.io/v1", func() runtime.Object {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{}
	}},
	"ValidatingAdmissionPolicyBinding": {"admissionregistration.k8s.io/v1", func() runtime.Object {
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	}},
}

// fakeCluster answers the chart's `lookup` calls from a fake dynamic client.
type fakeCluster struct{ client dynamic.Interface }

func (f fakeCluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	return f.client.Resource(gv.WithResource(strings.ToLower(kind) + "s")), true, nil
}

// libDir is the library chart the chart depends on.
const libDir = "../../charts/premigrate-lib"

// loadChart loads the chart with the library from its sources, never from a packaged copy under charts/
// that `helm dependency build` may have left behind, so the tests always render the library as it is now.
func loadChart(dir string) (*chart.Chart, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	lib, err := loader.Load(libDir)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", libDir, err)
	}
	ch.SetDependencies(lib)
	return ch, nil
}

// renderValues runs the chart's templates the way `helm install/upgrade` does, but in process.
func renderValues(o renderOptions) (*result, error) {
	dir := o.chart
	if dir == "" {
		dir = chartDir
	}
	ch, err := loadChart(dir)
	if err != nil {
		return nil, err
	}
	if o.chartVersion != "" {
		ch.Metadata.Version = o.chartVersion
	}
	vals, err := chartutil.ReadValues([]byte(o.values))
	if err != nil {
		return nil, fmt.Errorf("test values: %w", err)
	}
	name := o.release
	if name == "" {
		name = releaseName
	}
	revision := 1
	if o.upgrade {
		revision = 2
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kubeVersion
	if o.kubeVersion != "" {
		v, err := chartutil.ParseKubeVersion(o.kubeVersion)
		if err != nil {
			return nil, fmt.Errorf("test kube version: %w", err)
		}
		caps.KubeVersion = *v
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name:      name,
		Namespace: namespace,
		Revision:  revision,
		IsInstall: !o.upgrade,
		IsUpgrade: o.upgrade,
	}, caps)
	if err != nil {
		return nil, err
	}
	existing := slices.Clone(o.existing)
	if o.upgrade && !o.noRecords {
		existing = append(existing, ownedRecords(name, o.records))
	}
	if !o.noCluster {
		existing = append(existing, kubeRootCA())
		if secret, err := vals.PathValue("database.existingSecret"); err == nil && secret != "" && !o.secretFromRelease {
			existing = append(existing, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(secret), Namespace: namespace}})
		}
	}
	cluster := fakeCluster{client: dynamicfake.NewSimpleDynamicClient(scheme.Scheme, existing...)}
	files, err := engine.RenderWithClientProvider(ch, top, cluster)
	if err != nil {
		return nil, err
	}
	return decode(files)
}

// kubeRootCA is the ConfigMap every namespace of a cluster has, by which the chart tells a render that reaches
// a cluster from one that does not.
func kubeRootCA() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: namespace}}
}

// recordsUID is the UID of the records ConfigMap an upgrade finds.
const recordsUID = "3f1c7e0a-records-uid"

// ownedRecords is the records ConfigMap of release name as an install leaves it: a release object.
func ownedRecords(name, records string) *corev1.ConfigMap {
	if records == "" {
		records = framework.Fullname(name) + "-migrations"
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: records, Namespace: namespace, UID: recordsUID,
		Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
		Annotations: map[string]string{"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": namespace},
	}}
}

// decode keeps the non-empty files and decodes each document strictly.
func decode(files map[string]string) (*result, error) {
	r := &result{files: map[string]string{}}
	names := make([]string, 0, len(files))
	for name, content := range files {
		if strings.TrimSpace(content) == "" {
			continue
		}
		r.files[name] = content
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		content := r.files[name]
		if strings.HasSuffix(name, "NOTES.txt") {
			r.notes = content
			continue
		}
		docs := releaseutil.SplitManifests(content)
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			doc := docs[k]
			if strings.TrimSpace(doc) == "" {
				continue
			}
			obj, err := decodeStrict(doc)
			if err != nil {
				return nil, fmt.Errorf("%s: %w\n%s", name, err, doc)
			}
			r.objects = append(r.objects, object{source: name, kind: obj.GetObjectKind().GroupVersionKind().Kind, obj: obj, meta: obj.(metav1.Object)})
		}
	}
	return r, nil
}

// decodeStrict decodes one YAML document into its typed object; unknown or duplicate fields fail.
func decodeStrict(doc string) (runtime.Object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		return nil, err
	}
	k, ok := kinds[tm.Kind]
	if !ok {
		return nil, fmt.Errorf("unexpected kind %q", tm.Kind)
	}
	if tm.APIVersion != k.apiVersion {
		return nil, fmt.Errorf("%s has apiVersion %q, want %q", tm.Kind, tm.APIVersion, k.apiVersion)
	}
	obj := k.make()
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		return nil, fmt.Errorf("strict decoding of %s: %w", tm.Kind, err)
	}
	return obj, nil
}

// render renders or fails the test.
func render(t *testing.T, o renderOptions) *result {
	t.Helper()
	r, err := renderValues(o)
	if err != nil {
		t.Fatalf("render failed: %v", err)
	}
	return r
}

func (r *result) find(kind, name string) (object, bool) {
	for _, o := range r.objects {
		if o.kind == kind && o.name() == name {
			return o, true
		}
	}
	return object{}, false
}

func (r *result) ofKind(kind string) []object {
	var out []object
	for _, o := range r.objects {
		if o.kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func mustFind[T runtime.Object](t *testing.T, r *result, kind, name string) T {
	t.Helper()
	o, ok := r.find(kind, name)
	if !ok {
		t.Fatalf("no %s %q rendered; have %s", kind, name, r.summary())
	}
	return o.obj.(T)
}

func (r *result) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	return mustFind[*appsv1.Deployment](t, r, "Deployment", fullname)
}

// job returns the only migration Job.
func (r *result) job(t *testing.T) *batchv1.Job {
	t.Helper()
	jobs := r.ofKind("Job")
	if len(jobs) != 1 {
		t.Fatalf("want exactly one Job, have %s", r.summary())
	}
	return jobs[0].obj.(*batchv1.Job)
}

func (r *result) summary() string {
	var parts []string
	for _, o := range r.objects {
		parts = append(parts, o.kind+"/"+o.name())
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// podTemplates returns the pod metadata and spec of every workload and Pod, by a readable name.
func (r *result) podTemplates() map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for _, o := range r.objects {
		key := o.kind + "/" + o.name()
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			out[key] = &v.Spec.Template
		case *appsv1.StatefulSet:
			out[key] = &v.Spec.Template
		case *batchv1.Job:
			out[key] = &v.Spec.Template
		case *corev1.Pod:
			out[key] = &corev1.PodTemplateSpec{ObjectMeta: v.ObjectMeta, Spec: v.Spec}
		}
	}
	return out
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func envVar(env []corev1.EnvVar, name string) (corev1.EnvVar, bool) {
	for _, e := range env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

func envNames(env []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.Name)
	}
	return out
}

// identityOf is the identity the chart rendered on the migration Job.
// isPlainJobName reports whether name is <prefix>-migrate-<10 hex characters>: a plain Job, named by the hash of
// its spec (premigrate-lib.computeJobHash), so that a changed pod template is a new Job.
func isPlainJobName(prefix, name string) bool {
	h, ok := strings.CutPrefix(name, prefix+"-migrate-")
	return ok && regexpHex10(h)
}

func identityOf(t *testing.T, r *result) string {
	t.Helper()
	id := r.job(t).Labels["premigrate.io/identity"]
	if len(id) != 10 {
		t.Fatalf("identity label %q is not 10 characters", id)
	}
	return id
}

// existingPasswordSecret is the embedded database's Secret as a previous release left it.
func existingPasswordSecret(password string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: fullname + "-postgresql", Namespace: namespace},
		Data:       map[string][]byte{"password": []byte(password), "url": []byte("unused")},
	}
}

func readChartFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
