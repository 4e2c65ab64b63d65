package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// A value the library reads can reach it as nil although the chart's values.yaml gives it a default:
//
//   - a null (or ~) in a values file, or --set key=null: Helm deletes the key from the release's values (the
//     chart's default does not come back), the schema sees no key (none is required), and the premigrate
//     chart still passes the key to the library, as nil;
//   - helm upgrade --reuse-values from a release of an older chart: Helm renders with the old chart's values
//     as the chart's values, so a key the old chart did not have (e.g. migration.hookOutputLogs, new in
//     0.3.0) is missing from .Values altogether;
//   - an adopter that passes its values straight to the library (README: dict "root" . "values"
//     .Values.migrations), where a null the user gives is kept as a nil value under its key.
//
// Each must render the library's documented default, not "<nil>", no field, or false.

// adopterFullname is the name prefix of the adopter chart below (release demo, chart adopter).
const adopterFullname = "demo-adopter"

// adopterChart is a chart that takes the library as its README says: its own values subtree, passed as is.
func adopterChart(t *testing.T) *chart.Chart {
	t.Helper()
	lib, err := loader.Load(libDir)
	require.NoError(t, err)
	ch := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "adopter", Version: "1.0.0", AppVersion: "1.0.0"},
		Templates: []*chart.File{{
			Name: "templates/migration.yaml",
			Data: []byte(`{{- include "premigrate-lib.all" (dict "root" . "values" .Values.migrations) }}` + "\n"),
		}},
		Values: map[string]any{"migrations": map[string]any{
			"image":   map[string]any{"repository": "registry.example.com/adopter"},
			"command": []any{"/app/migrate"},
			"gate":    map[string]any{"serviceAccountName": "adopter"},
		}},
	}
	ch.SetDependencies(lib)
	return ch
}

// renderUpgrade renders a loaded chart as an upgrade that finds the release's records ConfigMap (so the
// migration is a pre-upgrade hook), with the user's values, as renderValues does.
func renderUpgrade(t *testing.T, ch *chart.Chart, values, records string) *result {
	t.Helper()
	vals, err := chartutil.ReadValues([]byte(values))
	require.NoError(t, err)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kubeVersion
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 2, IsUpgrade: true,
	}, caps)
	require.NoError(t, err)
	cluster := fakeCluster{client: dynamicfake.NewSimpleDynamicClient(scheme.Scheme, ownedRecords(releaseName, records), kubeRootCA())}
	files, err := engine.RenderWithClientProvider(ch, top, cluster)
	require.NoError(t, err)
	r, err := decode(files)
	require.NoError(t, err)
	return r
}

// yamlAt is a values document that sets the dotted path to the YAML scalar value.
func yamlAt(path, value string) string {
	var b strings.Builder
	for i, k := range strings.Split(path, ".") {
		b.WriteString("\n" + strings.Repeat("  ", i) + k + ":")
	}
	return strings.TrimPrefix(b.String(), "\n") + " " + value + "\n"
}

// deleteAt deletes the dotted path from values.
func deleteAt(t *testing.T, values map[string]any, path string) {
	t.Helper()
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		next, ok := values[k].(map[string]any)
		require.True(t, ok, "the chart's values have no table %q in %s", k, path)
		values = next
	}
	last := keys[len(keys)-1]
	require.Contains(t, values, last, "the chart's values have no %s", path)
	delete(values, last)
}

// migrateArg is the value that follows flag in the migrate container's command (gate run's flags).
func migrateArg(t *testing.T, job *batchv1.Job, flag string) string {
	t.Helper()
	cmd := container(t, job.Spec.Template.Spec.Containers, "migrate").Command
	for i, c := range cmd {
		if c == "--" {
			break
		}
		if c == flag && i+1 < len(cmd) {
			return cmd[i+1]
		}
	}
	t.Fatalf("no %s in the migrate command %q", flag, cmd)
	return ""
}

// valueOf is what p points to, or "nil", for readable failures.
func valueOf[T any](p *T) any {
	if p == nil {
		return "nil"
	}
	return *p
}

// asYAML is v as YAML, for readable comparisons of objects full of pointers.
func asYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// failJobRules are the podFailurePolicy rules that fail the Job at once.
func failJobRules(job *batchv1.Job) []batchv1.PodFailurePolicyRule {
	var out []batchv1.PodFailurePolicyRule
	if job.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, r := range job.Spec.PodFailurePolicy.Rules {
		if r.Action == batchv1.PodFailurePolicyActionFailJob {
			out = append(out, r)
		}
	}
	return out
}

// The library's documented defaults, as rendered.
var (
	failFastOn3 = []batchv1.PodFailurePolicyRule{{
		Action:      batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: ptr("migrate"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3}},
	}}
	restrictedPod = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	restrictedContainer = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
)

func TestANullOrMissingMigrationValueRendersTheLibrarysDefault(t *testing.T) {
	cases := []struct {
		// key is the library's value; chartKey the premigrate chart's value that maps onto it.
		key, chartKey string
		check         func(t *testing.T, r *result, job *batchv1.Job)
	}{
		{"enabled", "migration.enabled", func(t *testing.T, r *result, job *batchv1.Job) {
			// the Job rendered (job is not nil); the app pods, where the chart has them, wait for it
			for _, d := range r.ofKind("Deployment") {
				if d.name() == fullname {
					container(t, d.obj.(*appsv1.Deployment).Spec.Template.Spec.InitContainers, "wait-for-migration")
				}
			}
		}},
		{"backoffLimit", "migration.backoffLimit", func(t *testing.T, _ *result, job *batchv1.Job) {
			assert.Equal(t, any(int32(2)), valueOf(job.Spec.BackoffLimit), "the Job retries twice (nil is the API's 6)")
		}},
		{"activeDeadlineSeconds", "migration.activeDeadlineSeconds", func(t *testing.T, r *result, job *batchv1.Job) {
			assert.Equal(t, any(int64(900)), valueOf(job.Spec.ActiveDeadlineSeconds), "the Job has a deadline of 900 s (nil is none)")
			for _, d := range r.ofKind("Deployment") {
				if d.name() == fullname {
					assert.Equal(t, any(int32(1020)), valueOf(d.obj.(*appsv1.Deployment).Spec.ProgressDeadlineSeconds),
						"the rollout waits for the migration's deadline plus two minutes")
				}
			}
		}},
		{"hookWeight", "migration.hookWeight", func(t *testing.T, _ *result, job *batchv1.Job) {
			assert.Equal(t, "0", job.Annotations["helm.sh/hook-weight"])
		}},
		{"hookDeletePolicy", "migration.hookDeletePolicy", func(t *testing.T, _ *result, job *batchv1.Job) {
			assert.Equal(t, "before-hook-creation", job.Annotations["helm.sh/hook-delete-policy"])
		}},
		{"hookOutputLogs", "migration.hookOutputLogs", func(t *testing.T, _ *result, job *batchv1.Job) {
			assert.Equal(t, "hook-failed", job.Annotations["helm.sh/hook-output-log-policy"], "Helm prints the failed hook's log")
		}},
		{"failFastExitCodes", "migration.failFastExitCodes", func(t *testing.T, _ *result, job *batchv1.Job) {
			// the gate's refusal (exit 3) fails the Job at once for every image; the demo also lists its own refusal (3),
			// passed through; another app's codes are its own, and the gate turns its 3 into 1 (retried)
			assert.Equal(t, asYAML(t, failFastOn3), asYAML(t, failJobRules(job)), "exit code 3 of migrate fails the Job at once")
			if strings.Contains(container(t, job.Spec.Template.Spec.Containers, "migrate").Image, "/premigrate/demo:") {
				assert.Equal(t, "3", migrateArg(t, job, "--fail-fast-exit-codes"), "the demo's own refusal passes through")
			} else {
				assert.NotContains(t, container(t, job.Spec.Template.Spec.Containers, "migrate").Command, "--fail-fast-exit-codes",
					"no code of another app's migration fails the Job at once")
			}
		}},
		{"keepRecords", "migration.keepRecords", func(t *testing.T, _ *result, job *batchv1.Job) {
			assert.Equal(t, "20", migrateArg(t, job, "--keep"), "gate run keeps 20 records (\"<nil>\" makes it exit 2)")
		}},
		{"pod.securityContext", "podSecurityContext", func(t *testing.T, _ *result, job *batchv1.Job) {
			assert.Equal(t, asYAML(t, restrictedPod), asYAML(t, job.Spec.Template.Spec.SecurityContext), "the migration pod is restricted")
		}},
		{"pod.containerSecurityContext", "securityContext", func(t *testing.T, _ *result, job *batchv1.Job) {
			assert.Equal(t, asYAML(t, restrictedContainer), asYAML(t, container(t, job.Spec.Template.Spec.Containers, "migrate").SecurityContext),
				"the migrate container is restricted")
			assert.Equal(t, asYAML(t, restrictedContainer), asYAML(t, container(t, job.Spec.Template.Spec.InitContainers, "install-gate").SecurityContext),
				"the install-gate container is restricted")
		}},
	}
	for _, c := range cases {
		routes := []struct {
			name   string
			render func(t *testing.T) *result
		}{
			{"null in a values file", func(t *testing.T) *result {
				return render(t, renderOptions{values: yamlAt(c.chartKey, "null"), upgrade: true})
			}},
			{"--set " + c.chartKey + "=null", func(t *testing.T) *result {
				vals := map[string]any{}
				require.NoError(t, strvals.ParseInto(c.chartKey+"=null", vals))
				b, err := yaml.Marshal(vals)
				require.NoError(t, err)
				return render(t, renderOptions{values: string(b), upgrade: true})
			}},
			{"--reuse-values from a chart without " + c.chartKey, func(t *testing.T) *result {
				ch, err := loadChart(chartDir)
				require.NoError(t, err)
				deleteAt(t, ch.Values, c.chartKey)
				return renderUpgrade(t, ch, "", "")
			}},
			{"null given straight to the library", func(t *testing.T) *result {
				return renderUpgrade(t, adopterChart(t), yamlAt("migrations."+c.key, "null"), adopterFullname+"-migrations")
			}},
		}
		for _, route := range routes {
			t.Run(c.key+"/"+route.name, func(t *testing.T) {
				r := route.render(t)
				job := r.job(t)
				require.Equal(t, "pre-upgrade", job.Annotations["helm.sh/hook"], "the upgrade renders the hook Job")
				c.check(t, r, job)
			})
		}
	}
}

func TestAnExplicitFalseZeroOrEmptyMigrationValueIsKeptNotDefaulted(t *testing.T) {
	cases := []struct {
		name, chartValues, libValues string
		check                        func(t *testing.T, r *result)
	}{
		{"enabled false renders no Job", "migration: {enabled: false}\n", "migrations: {enabled: false}\n",
			func(t *testing.T, r *result) { assert.Empty(t, r.ofKind("Job")) }},
		{"backoffLimit 0 never retries", "migration: {backoffLimit: 0}\n", "migrations: {backoffLimit: 0}\n",
			func(t *testing.T, r *result) { assert.Equal(t, any(int32(0)), valueOf(r.job(t).Spec.BackoffLimit)) }},
		{"hookWeight -5 is the hook's weight", "migration: {hookWeight: -5}\n", "migrations: {hookWeight: -5}\n",
			func(t *testing.T, r *result) { assert.Equal(t, "-5", r.job(t).Annotations["helm.sh/hook-weight"]) }},
		{"hookOutputLogs false drops the output log policy", "migration: {hookOutputLogs: false}\n", "migrations: {hookOutputLogs: false}\n",
			func(t *testing.T, r *result) {
				job := r.job(t)
				assert.Equal(t, "pre-upgrade", job.Annotations["helm.sh/hook"])
				assert.NotContains(t, job.Annotations, "helm.sh/hook-output-log-policy")
			}},
		{"failFastExitCodes [] fails no exit code of the app at once, only the gate's refusal", "migration: {failFastExitCodes: []}\n", "migrations: {failFastExitCodes: []}\n",
			func(t *testing.T, r *result) {
				assert.Equal(t, asYAML(t, failFastOn3), asYAML(t, failJobRules(r.job(t))))
				assert.NotContains(t, container(t, r.job(t).Spec.Template.Spec.Containers, "migrate").Command, "--fail-fast-exit-codes")
			}},
		{"keepRecords 1 keeps one record", "migration: {keepRecords: 1}\n", "migrations: {keepRecords: 1}\n",
			func(t *testing.T, r *result) { assert.Equal(t, "1", migrateArg(t, r.job(t), "--keep")) }},
		{"an empty pod security context drops the restricted one", "", "migrations: {pod: {securityContext: {}}}\n",
			func(t *testing.T, r *result) { assert.Nil(t, r.job(t).Spec.Template.Spec.SecurityContext) }},
		{"an empty container security context drops the restricted one", "", "migrations: {pod: {containerSecurityContext: {}}}\n",
			func(t *testing.T, r *result) {
				assert.Nil(t, container(t, r.job(t).Spec.Template.Spec.Containers, "migrate").SecurityContext)
			}},
		{"ttlSecondsAfterFinished null keeps the Job (null is its default)", "migration: {ttlSecondsAfterFinished: null}\n", "migrations: {ttlSecondsAfterFinished: null}\n",
			func(t *testing.T, r *result) { assert.Nil(t, r.job(t).Spec.TTLSecondsAfterFinished) }},
	}
	for _, c := range cases {
		// none for the security contexts: Helm merges a user's {} into the chart's default table, so the
		// premigrate chart's podSecurityContext and securityContext change field by field, never to {}
		if c.chartValues != "" {
			t.Run(c.name+"/premigrate chart", func(t *testing.T) {
				c.check(t, render(t, renderOptions{values: c.chartValues, upgrade: true}))
			})
		}
		t.Run(c.name+"/given straight to the library", func(t *testing.T) {
			c.check(t, renderUpgrade(t, adopterChart(t), c.libValues, adopterFullname+"-migrations"))
		})
	}
}

func TestAnInitContainerOrSidecarWithANullSecurityContextGetsTheRestrictedOne(t *testing.T) {
	initContainers := "initContainers: [{name: fetch-secrets, image: 'busybox:1', securityContext: null}]"
	sidecars := "sidecars: [{name: db-proxy, image: 'proxy:1', restartPolicy: Always, securityContext: null}]"
	renders := []struct {
		name   string
		render func(t *testing.T) *result
	}{
		{"premigrate chart", func(t *testing.T) *result {
			return render(t, renderOptions{values: "migration:\n  " + initContainers + "\n  " + sidecars + "\n", upgrade: true})
		}},
		{"given straight to the library", func(t *testing.T) *result {
			values := "migrations:\n  pod:\n    " + initContainers + "\n    " + sidecars + "\n"
			return renderUpgrade(t, adopterChart(t), values, adopterFullname+"-migrations")
		}},
	}
	for _, r := range renders {
		t.Run(r.name, func(t *testing.T) {
			job := r.render(t).job(t)
			for _, c := range []string{"fetch-secrets", "db-proxy"} {
				assert.Equal(t, asYAML(t, restrictedContainer), asYAML(t, container(t, job.Spec.Template.Spec.InitContainers, c).SecurityContext), c)
			}
		})
	}
}
