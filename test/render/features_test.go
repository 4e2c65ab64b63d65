package render

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The objects an application chart offers beside the Deployment are all off by default.
func TestTheOptionalAppObjectsAreOffByDefault(t *testing.T) {
	r := render(t, renderOptions{})
	for _, kind := range []string{"Ingress", "HTTPRoute", "HorizontalPodAutoscaler"} {
		if objs := r.ofKind(kind); len(objs) != 0 {
			t.Errorf("the defaults render a %s: %s", kind, r.summary())
		}
	}
	if _, ok := r.files["premigrate/templates/extra-objects.yaml"]; ok {
		t.Errorf("the defaults render extra objects:\n%s", r.files["premigrate/templates/extra-objects.yaml"])
	}
	pod := r.deployment(t).Spec.Template.Spec
	app := container(t, pod.Containers, "app")
	if app.StartupProbe != nil || len(app.VolumeMounts) != 0 || pod.PriorityClassName != "" || len(pod.TopologySpreadConstraints) != 0 {
		t.Errorf("the defaults set startupProbe %+v, mounts %+v, priorityClassName %q or spread %+v",
			app.StartupProbe, app.VolumeMounts, pod.PriorityClassName, pod.TopologySpreadConstraints)
	}
}

func TestTheAppPodTakesExtraVolumesSchedulingAndAStartupProbe(t *testing.T) {
	t.Run("extra volumes join the gate's token volume and are mounted in the app container", func(t *testing.T) {
		for _, c := range []struct {
			values string
			want   []string
		}{
			{"", []string{"premigrate-gate-token", "tmp", "config"}},
			{"gate: {mode: none}", []string{"tmp", "config"}},
		} {
			r := render(t, renderOptions{values: c.values + `
extraVolumes: [{name: tmp, emptyDir: {}}, {name: config, configMap: {name: app-config}}]
extraVolumeMounts: [{name: tmp, mountPath: /tmp}, {name: config, mountPath: /etc/app, readOnly: true}]
`})
			pod := r.deployment(t).Spec.Template.Spec
			var names []string
			for _, v := range pod.Volumes {
				names = append(names, v.Name)
			}
			if !equalStrings(names, c.want) {
				t.Errorf("values %q: volumes %v, want %v", c.values, names, c.want)
			}
			app := container(t, pod.Containers, "app")
			if len(app.VolumeMounts) != 2 || app.VolumeMounts[0].MountPath != "/tmp" || !app.VolumeMounts[1].ReadOnly {
				t.Errorf("values %q: app mounts %+v", c.values, app.VolumeMounts)
			}
			for _, ic := range pod.InitContainers {
				for _, m := range ic.VolumeMounts {
					if m.Name == "tmp" || m.Name == "config" {
						t.Errorf("values %q: init container %s mounts the app's volume %s", c.values, ic.Name, m.Name)
					}
				}
			}
		}
	})

	t.Run("a topology spread constraint without a selector spreads the app pods", func(t *testing.T) {
		r := render(t, renderOptions{values: `
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
  - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {tier: web}}}
`})
		d := r.deployment(t)
		spread := d.Spec.Template.Spec.TopologySpreadConstraints
		if len(spread) != 2 {
			t.Fatalf("constraints %+v", spread)
		}
		if spread[0].TopologyKey != "topology.kubernetes.io/zone" || spread[0].WhenUnsatisfiable != corev1.ScheduleAnyway ||
			spread[0].LabelSelector == nil || !reflect.DeepEqual(spread[0].LabelSelector.MatchLabels, d.Spec.Selector.MatchLabels) {
			t.Errorf("first constraint %+v, want the Deployment's selector %v", spread[0], d.Spec.Selector.MatchLabels)
		}
		if spread[1].MaxSkew != 2 || !reflect.DeepEqual(spread[1].LabelSelector.MatchLabels, map[string]string{"tier": "web"}) {
			t.Errorf("second constraint %+v, want its own selector kept", spread[1])
		}
	})

	t.Run("priorityClassName and the startup probe reach the app pod", func(t *testing.T) {
		r := render(t, renderOptions{values: `
priorityClassName: business-critical
startupProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 2, failureThreshold: 60}
`})
		pod := r.deployment(t).Spec.Template.Spec
		if pod.PriorityClassName != "business-critical" {
			t.Errorf("priorityClassName %q", pod.PriorityClassName)
		}
		p := container(t, pod.Containers, "app").StartupProbe
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != intstr.FromString("http") || p.FailureThreshold != 60 {
			t.Errorf("startupProbe %+v", p)
		}
		// the migration pod takes the app's priority class (migration.priorityClassName null), never its probe
		if jp := r.job(t).Spec.Template.Spec; jp.PriorityClassName != "business-critical" || container(t, jp.Containers, "migrate").StartupProbe != nil {
			t.Errorf("the migration pod has priority class %q (want the app's) or a startup probe", jp.PriorityClassName)
		}
	})
}

func TestTheIngressSendsEveryPathToTheServicePort(t *testing.T) {
	r := render(t, renderOptions{values: `
service: {port: 8081}
ingress:
  enabled: true
  className: nginx
  annotations: {cert-manager.io/cluster-issuer: letsencrypt}
  hosts:
    - host: app.example.com
      paths: [{path: /, pathType: Prefix}, {path: /api/exact, pathType: Exact}]
    - paths: [{path: /other}]
  tls: [{hosts: [app.example.com], secretName: app-tls}]
`})
	ing := mustFind[*networkingv1.Ingress](t, r, "Ingress", fullname)
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
		t.Errorf("ingressClassName %v", ing.Spec.IngressClassName)
	}
	if ing.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" {
		t.Errorf("annotations %v", ing.Annotations)
	}
	if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "app-tls" || !equalStrings(ing.Spec.TLS[0].Hosts, []string{"app.example.com"}) {
		t.Errorf("tls %+v", ing.Spec.TLS)
	}
	if len(ing.Spec.Rules) != 2 || ing.Spec.Rules[0].Host != "app.example.com" || ing.Spec.Rules[1].Host != "" {
		t.Fatalf("rules %+v", ing.Spec.Rules)
	}
	type route struct {
		path, pathType string
	}
	var got []route
	for _, rule := range ing.Spec.Rules {
		for _, p := range rule.HTTP.Paths {
			got = append(got, route{p.Path, string(*p.PathType)})
			if b := p.Backend.Service; b == nil || b.Name != fullname || b.Port.Number != 8081 {
				t.Errorf("path %s: backend %+v, want Service %s port 8081", p.Path, p.Backend, fullname)
			}
		}
	}
	if want := []route{{"/", "Prefix"}, {"/api/exact", "Exact"}, {"/other", "Prefix"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("paths %v, want %v (pathType defaulting to Prefix)", got, want)
	}
	if ing.Labels["app.kubernetes.io/component"] != "app" {
		t.Errorf("labels %v", ing.Labels)
	}

	def := mustFind[*networkingv1.Ingress](t, render(t, renderOptions{values: "ingress: {enabled: true}"}), "Ingress", fullname)
	if def.Spec.IngressClassName != nil || len(def.Spec.Rules) != 1 || def.Spec.Rules[0].Host != "premigrate.local" {
		t.Errorf("default Ingress %+v", def.Spec)
	}
}

func TestTheHTTPRouteAttachesToTheGatewaysAndDefaultsToTheService(t *testing.T) {
	const gateway = "httpRoute: {enabled: true, parentRefs: [{name: gw, namespace: infra, sectionName: https}]"
	backend := []any{map[string]any{"name": fullname, "port": int64(80)}}
	for _, c := range []struct {
		name, values string
		want         []any
	}{
		{"the default rule sends / to the Service", gateway + "}", []any{map[string]any{
			"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}},
			"backendRefs": backend,
		}}},
		{"no rules send everything to the Service", gateway + ", rules: []}", []any{map[string]any{"backendRefs": backend}}},
		{"a rule's own backendRefs are kept", gateway + `, rules: [
  {matches: [{path: {type: Exact, value: /v2}}], backendRefs: [{name: other, port: 8080}]},
  {matches: [{headers: [{name: x-canary, value: "1"}]}]}]}`, []any{
			map[string]any{
				"matches":     []any{map[string]any{"path": map[string]any{"type": "Exact", "value": "/v2"}}},
				"backendRefs": []any{map[string]any{"name": "other", "port": int64(8080)}},
			},
			map[string]any{
				"matches":     []any{map[string]any{"headers": []any{map[string]any{"name": "x-canary", "value": "1"}}}},
				"backendRefs": backend,
			},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, renderOptions{values: c.values})
			route := mustFind[*unstructured.Unstructured](t, r, "HTTPRoute", fullname)
			rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
			if !reflect.DeepEqual(rules, c.want) {
				t.Errorf("rules\n%v\nwant\n%v", rules, c.want)
			}
			parents, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
			if want := []any{map[string]any{"name": "gw", "namespace": "infra", "sectionName": "https"}}; !reflect.DeepEqual(parents, want) {
				t.Errorf("parentRefs %v", parents)
			}
		})
	}

	r := render(t, renderOptions{values: `
httpRoute: {enabled: true, parentRefs: [{name: gw}], hostnames: [app.example.com], annotations: {a: b}}
`})
	route := mustFind[*unstructured.Unstructured](t, r, "HTTPRoute", fullname)
	if hosts, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames"); !equalStrings(hosts, []string{"app.example.com"}) {
		t.Errorf("hostnames %v", hosts)
	}
	if route.GetAnnotations()["a"] != "b" || route.GetLabels()["app.kubernetes.io/component"] != "app" {
		t.Errorf("metadata %v %v", route.GetAnnotations(), route.GetLabels())
	}
}

func TestTheAutoscalerOwnsTheReplicaCount(t *testing.T) {
	for _, c := range []struct {
		name, values string
		metrics      map[corev1.ResourceName]int32
	}{
		{"cpu by default", "", map[corev1.ResourceName]int32{corev1.ResourceCPU: 80}},
		{"cpu and memory", "targetCPUUtilizationPercentage: 60, targetMemoryUtilizationPercentage: 75",
			map[corev1.ResourceName]int32{corev1.ResourceCPU: 60, corev1.ResourceMemory: 75}},
		{"memory only", "targetCPUUtilizationPercentage: null, targetMemoryUtilizationPercentage: 90",
			map[corev1.ResourceName]int32{corev1.ResourceMemory: 90}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, renderOptions{values: "autoscaling: {enabled: true, minReplicas: 3, maxReplicas: 7, " + c.values + "}"})
			hpa := mustFind[*autoscalingv2.HorizontalPodAutoscaler](t, r, "HorizontalPodAutoscaler", fullname)
			ref := hpa.Spec.ScaleTargetRef
			if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != fullname {
				t.Errorf("scaleTargetRef %+v", ref)
			}
			if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 7 {
				t.Errorf("replicas %v..%d", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
			}
			got := map[corev1.ResourceName]int32{}
			for _, m := range hpa.Spec.Metrics {
				if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil ||
					m.Resource.Target.Type != autoscalingv2.UtilizationMetricType || m.Resource.Target.AverageUtilization == nil {
					t.Fatalf("metric %+v", m)
				}
				got[m.Resource.Name] = *m.Resource.Target.AverageUtilization
			}
			if !reflect.DeepEqual(got, c.metrics) {
				t.Errorf("metrics %v, want %v", got, c.metrics)
			}
			if d := r.deployment(t); d.Spec.Replicas != nil {
				t.Errorf("the Deployment sets replicas %d beside the autoscaler", *d.Spec.Replicas)
			}
			if !strings.Contains(r.notes, "3 to 7 replicas") {
				t.Errorf("the notes do not give the autoscaler's range:\n%s", r.notes)
			}
		})
	}

	t.Run("the budget's default follows minReplicas, not replicaCount", func(t *testing.T) {
		for _, c := range []struct {
			values string
			want   bool
		}{
			{"replicaCount: 1\nautoscaling: {enabled: true, minReplicas: 2}", true},
			{"replicaCount: 3\nautoscaling: {enabled: true, minReplicas: 1}", false},
			{"replicaCount: 3\nautoscaling: {enabled: true, minReplicas: 1}\npodDisruptionBudget: {enabled: true}", true},
			{"replicaCount: 1\nautoscaling: {enabled: false, minReplicas: 5}", false},
		} {
			r := render(t, renderOptions{values: c.values})
			if got := len(r.ofKind("PodDisruptionBudget")) == 1; got != c.want {
				t.Errorf("values %q: budget %v, want %v", c.values, got, c.want)
			}
		}
	})
}

func TestExtraObjectsAreRenderedThroughTplOneDocumentEach(t *testing.T) {
	r := render(t, renderOptions{values: `
extraObjects:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: '{{ include "premigrate.fullname" . }}-extra'}
    data: {release: '{{ .Release.Name }}'}
  - |
    apiVersion: v1
    kind: Secret
    metadata:
      name: {{ .Release.Name }}-token
    stringData:
      namespace: {{ .Release.Namespace }}
`})
	cm := mustFind[*corev1.ConfigMap](t, r, "ConfigMap", fullname+"-extra")
	if cm.Data["release"] != releaseName {
		t.Errorf("configmap data %v", cm.Data)
	}
	sec := mustFind[*corev1.Secret](t, r, "Secret", releaseName+"-token")
	if sec.StringData["namespace"] != namespace {
		t.Errorf("secret stringData %v", sec.StringData)
	}
	n := 0
	for _, o := range r.objects {
		if o.source == "premigrate/templates/extra-objects.yaml" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("extra-objects.yaml rendered %d documents, want 2", n)
	}
}

// The chart ignores `enabled`; it is in the schema so that a parent chart's `condition: premigrate.enabled`
// passes the closed schema.
func TestTheEnabledKeyIsAcceptedForAParentChartsCondition(t *testing.T) {
	if p, _ := loadSchema(t).props()["enabled"].(map[string]any); p["type"] != "boolean" {
		t.Errorf("schema of enabled %v, want a boolean", p)
	}
	for _, v := range []string{"enabled: true", "enabled: false"} {
		r := render(t, renderOptions{values: v})
		r.deployment(t)
	}
}

// hack/lint-features-values.yaml, which hack/lint.sh lints and validates with kubeconform, turns every optional
// object on, so the HTTPRoute, the Ingress and the autoscaler are checked against their schemas.
func TestTheLintFeaturesValuesTurnEveryOptionalObjectOn(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "hack", "lint-features-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, upgrade := range []bool{false, true} {
		r := render(t, renderOptions{values: string(b), upgrade: upgrade})
		for _, kind := range []string{"Ingress", "HTTPRoute", "HorizontalPodAutoscaler"} {
			if len(r.ofKind(kind)) != 1 {
				t.Errorf("upgrade=%v: no %s in %s", upgrade, kind, r.summary())
			}
		}
		if _, ok := r.files["premigrate/templates/extra-objects.yaml"]; !ok {
			t.Errorf("upgrade=%v: no extra objects", upgrade)
		}
	}
}
