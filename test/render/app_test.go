package render

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Behaviour 1: the app is a Deployment with a Service, a PodDisruptionBudget and a ServiceAccount.
func TestTheAppRunsAsADeploymentWithItsServiceBudgetAndServiceAccount(t *testing.T) {
	t.Run("the image is repository:tag, the tag defaulting to the appVersion", func(t *testing.T) {
		app := container(t, render(t, renderOptions{}).deployment(t).Spec.Template.Spec.Containers, "app")
		if app.Image != "ghcr.io/premigrate/demo:0.3.0" {
			t.Errorf("image = %q, want ghcr.io/premigrate/demo:0.3.0", app.Image)
		}
		app = container(t, render(t, renderOptions{values: "image: {tag: v3}"}).deployment(t).Spec.Template.Spec.Containers, "app")
		if app.Image != "ghcr.io/premigrate/demo:v3" {
			t.Errorf("image = %q, want ghcr.io/premigrate/demo:v3", app.Image)
		}
	})

	t.Run("a digest wins over the tag", func(t *testing.T) {
		r := render(t, renderOptions{values: "image: {tag: v3, digest: " + testDigest + "}"})
		app := container(t, r.deployment(t).Spec.Template.Spec.Containers, "app")
		if want := "ghcr.io/premigrate/demo@" + testDigest; app.Image != want {
			t.Errorf("image = %q, want %q", app.Image, want)
		}
	})

	t.Run("command, args, env, envFrom and resources reach the app container", func(t *testing.T) {
		r := render(t, renderOptions{values: `
command: [/demo]
args: [serve, --verbose]
env: [{name: SHUTDOWN_DELAY, value: 7s}]
envFrom: [{configMapRef: {name: extra}}]
resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 128Mi}}
imagePullSecrets: [{name: regcred}]
`})
		d := r.deployment(t)
		app := container(t, d.Spec.Template.Spec.Containers, "app")
		if !equalStrings(app.Command, []string{"/demo"}) || !equalStrings(app.Args, []string{"serve", "--verbose"}) {
			t.Errorf("command/args = %v %v", app.Command, app.Args)
		}
		if !equalStrings(envNames(app.Env), []string{"DATABASE_URL", "SHUTDOWN_DELAY", "PREMIGRATE_IDENTITY"}) {
			t.Errorf("env = %v, want DATABASE_URL, SHUTDOWN_DELAY, then PREMIGRATE_IDENTITY", envNames(app.Env))
		}
		if e, _ := envVar(app.Env, "PREMIGRATE_IDENTITY"); e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
			e.ValueFrom.FieldRef.FieldPath != "metadata.annotations['premigrate.io/identity']" {
			t.Errorf("PREMIGRATE_IDENTITY = %+v, want the pod's identity annotation", e)
		}
		if len(app.EnvFrom) != 1 || app.EnvFrom[0].ConfigMapRef == nil || app.EnvFrom[0].ConfigMapRef.Name != "extra" {
			t.Errorf("envFrom = %+v", app.EnvFrom)
		}
		if app.Resources.Requests.Cpu().String() != "50m" || app.Resources.Limits.Memory().String() != "128Mi" {
			t.Errorf("resources = %+v", app.Resources)
		}
		if len(d.Spec.Template.Spec.ImagePullSecrets) != 1 || d.Spec.Template.Spec.ImagePullSecrets[0].Name != "regcred" {
			t.Errorf("imagePullSecrets = %+v", d.Spec.Template.Spec.ImagePullSecrets)
		}
	})

	t.Run("the default command and args are the demo's /demo serve", func(t *testing.T) {
		app := container(t, render(t, renderOptions{}).deployment(t).Spec.Template.Spec.Containers, "app")
		if !equalStrings(app.Command, []string{"/demo"}) || !equalStrings(app.Args, []string{"serve"}) {
			t.Errorf("command/args = %v %v, want [/demo] [serve]", app.Command, app.Args)
		}
	})

	t.Run("the probes follow the image: the demo's paths for the demo, a TCP connect for another app, yours taken whole", func(t *testing.T) {
		const other = "image: {repository: registry.example.com/my-app, tag: '1.0'}\ncommand: [/my-app]\n"
		httpGet := func(path string) *corev1.Probe {
			return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}}}
		}
		tcp := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}}
		for _, c := range []struct {
			name, values        string
			readiness, liveness *corev1.Probe // only the handler and the period are compared; nil: none
			readinessPeriod     int32
		}{
			{"the demo's image: GET /readyz every second and GET /healthz", "", httpGet("/readyz"), httpGet("/healthz"), 1},
			{"another image: a TCP connect to port http every second and no liveness probe", other, tcp, nil, 1},
			{"another image with probes of its own, taken whole", other + "readinessProbe: {httpGet: {path: /ready, port: http}, periodSeconds: 7}\nlivenessProbe: {httpGet: {path: /live, port: http}}\n", httpGet("/ready"), httpGet("/live"), 7},
			{"the demo's image with {} for no probes", "readinessProbe: {}\nlivenessProbe: {}\n", nil, nil, 0},
			{"the demo's image with another handler, not merged with the demo's", "readinessProbe: {tcpSocket: {port: http}}\n", tcp, httpGet("/healthz"), 0},
		} {
			t.Run(c.name, func(t *testing.T) {
				app := container(t, render(t, renderOptions{values: c.values}).deployment(t).Spec.Template.Spec.Containers, "app")
				for _, p := range []struct {
					what      string
					got, want *corev1.Probe
				}{{"readinessProbe", app.ReadinessProbe, c.readiness}, {"livenessProbe", app.LivenessProbe, c.liveness}} {
					switch {
					case p.want == nil && p.got != nil:
						t.Errorf("%s = %+v, want none", p.what, p.got)
					case p.want != nil && (p.got == nil || !equality.Semantic.DeepEqual(p.got.ProbeHandler, p.want.ProbeHandler)):
						t.Errorf("%s = %+v, want the handler %+v", p.what, p.got, p.want.ProbeHandler)
					}
				}
				if c.readinessPeriod != 0 && app.ReadinessProbe != nil && app.ReadinessProbe.PeriodSeconds != c.readinessPeriod {
					t.Errorf("readinessProbe.periodSeconds = %d, want %d", app.ReadinessProbe.PeriodSeconds, c.readinessPeriod)
				}
			})
		}
	})

	t.Run("replicas, a surge-only rolling update and the grace period are set", func(t *testing.T) {
		d := render(t, renderOptions{}).deployment(t)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
		}
		s := d.Spec.Strategy
		if s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
			*s.RollingUpdate.MaxUnavailable != intstr.FromInt32(0) || *s.RollingUpdate.MaxSurge != intstr.FromInt32(1) {
			t.Errorf("strategy = %+v", s)
		}
		if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
			t.Errorf("terminationGracePeriodSeconds = %v", g)
		}
		d = render(t, renderOptions{values: "replicaCount: 5\nterminationGracePeriodSeconds: 45"}).deployment(t)
		if *d.Spec.Replicas != 5 || *d.Spec.Template.Spec.TerminationGracePeriodSeconds != 45 {
			t.Errorf("replicas %d grace %d", *d.Spec.Replicas, *d.Spec.Template.Spec.TerminationGracePeriodSeconds)
		}
	})

	t.Run("the budget exists only with more than one replica unless forced", func(t *testing.T) {
		for _, c := range []struct {
			values string
			want   bool
		}{
			{"", true},
			{"replicaCount: 1", false},
			{"replicaCount: 1\npodDisruptionBudget: {enabled: true}", true},
			{"replicaCount: 3\npodDisruptionBudget: {enabled: false}", false},
		} {
			r := render(t, renderOptions{values: c.values})
			pdbs := r.ofKind("PodDisruptionBudget")
			if (len(pdbs) == 1) != c.want {
				t.Errorf("values %q: budgets %s, want present=%v", c.values, r.summary(), c.want)
			}
		}
		r := render(t, renderOptions{values: "podDisruptionBudget: {minAvailable: 50%, maxUnavailable: null}"})
		pdb := mustFind[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", fullname)
		if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.String() != "50%" || pdb.Spec.MaxUnavailable != nil {
			t.Errorf("budget spec = %+v", pdb.Spec)
		}
		r = render(t, renderOptions{})
		pdb = mustFind[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", fullname)
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("default budget spec = %+v", pdb.Spec)
		}
		if !selects(pdb.Spec.Selector.MatchLabels, r.deployment(t).Spec.Template.Labels) {
			t.Errorf("budget selector %v does not select the app pods", pdb.Spec.Selector.MatchLabels)
		}
	})

	t.Run("the Service targets the app pods on the http port", func(t *testing.T) {
		r := render(t, renderOptions{values: "service: {port: 8081, annotations: {a: b}}"})
		svc := mustFind[*corev1.Service](t, r, "Service", fullname)
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8081 || svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
			t.Errorf("ports = %+v", svc.Spec.Ports)
		}
		if svc.Annotations["a"] != "b" {
			t.Errorf("annotations = %v", svc.Annotations)
		}
		d := r.deployment(t)
		if !selects(svc.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("service selector %v does not select the app pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
		}
		job := r.job(t)
		if selects(svc.Spec.Selector, job.Spec.Template.Labels) || selects(d.Spec.Selector.MatchLabels, job.Spec.Template.Labels) {
			t.Error("the app selectors also select the migration pods")
		}
		app := container(t, d.Spec.Template.Spec.Containers, "app")
		if len(app.Ports) != 1 || app.Ports[0].Name != "http" || app.Ports[0].ContainerPort != 8080 {
			t.Errorf("container ports = %+v", app.Ports)
		}
	})

	t.Run("the API token is mounted in the gate's container only, and only when the gate needs it", func(t *testing.T) {
		for _, c := range []struct {
			values string
			want   bool
		}{
			{"", true},
			{"gate: {mode: command}", false},
			{"gate: {mode: none}", false},
			{"migration: {enabled: false}", false},
		} {
			r := render(t, renderOptions{values: c.values})
			pod := r.deployment(t).Spec.Template.Spec
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Errorf("values %q: the pod automounts the token (%v): the app container would hold it", c.values, pod.AutomountServiceAccountToken)
			}
			var token *corev1.Volume
			for i := range pod.Volumes {
				if pod.Volumes[i].Name == "premigrate-gate-token" {
					token = &pod.Volumes[i]
				}
			}
			if (token != nil) != c.want {
				t.Errorf("values %q: token volume %v, want %v", c.values, token != nil, c.want)
			}
			if token != nil && (token.Projected == nil || len(token.Projected.Sources) != 3 || token.Projected.Sources[0].ServiceAccountToken == nil) {
				t.Errorf("values %q: token volume %+v, want a projected token, CA and namespace", c.values, token)
			}
			for _, ctr := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
				mounted := false
				for _, m := range ctr.VolumeMounts {
					mounted = mounted || m.Name == "premigrate-gate-token"
				}
				if want := c.want && ctr.Name == "wait-for-migration"; mounted != want {
					t.Errorf("values %q: container %s mounts the token: %v, want %v", c.values, ctr.Name, mounted, want)
				}
			}
			if pod.ServiceAccountName != fullname {
				t.Errorf("serviceAccountName = %q", pod.ServiceAccountName)
			}
		}
		r := render(t, renderOptions{values: "serviceAccount: {create: false, name: shared}"})
		if _, ok := r.find("ServiceAccount", fullname); ok {
			t.Error("ServiceAccount rendered with create=false")
		}
		if n := r.deployment(t).Spec.Template.Spec.ServiceAccountName; n != "shared" {
			t.Errorf("serviceAccountName = %q, want shared", n)
		}
	})

	t.Run("the database URL comes from the embedded or the external Secret", func(t *testing.T) {
		app := container(t, render(t, renderOptions{}).deployment(t).Spec.Template.Spec.Containers, "app")
		assertSecretEnv(t, app.Env, "DATABASE_URL", fullname+"-postgresql", "url")
		r := render(t, renderOptions{values: `
postgresql: {enabled: false}
database: {existingSecret: prod-db, existingSecretKey: dsn, urlEnvName: PG_URL}
`})
		app = container(t, r.deployment(t).Spec.Template.Spec.Containers, "app")
		assertSecretEnv(t, app.Env, "PG_URL", "prod-db", "dsn")
		if _, ok := envVar(app.Env, "DATABASE_URL"); ok {
			t.Error("DATABASE_URL still set with urlEnvName PG_URL")
		}
		if len(r.ofKind("StatefulSet")) != 0 || len(r.ofKind("Secret")) != 0 {
			t.Errorf("external database still renders the embedded one: %s", r.summary())
		}
	})

	t.Run("every object carries the recommended labels", func(t *testing.T) {
		r := render(t, renderOptions{})
		for _, o := range r.objects {
			l := o.meta.GetLabels()
			for k, want := range map[string]string{
				"app.kubernetes.io/name":       "premigrate",
				"app.kubernetes.io/instance":   releaseName,
				"app.kubernetes.io/version":    "0.3.0",
				"app.kubernetes.io/managed-by": "Helm",
				"helm.sh/chart":                "premigrate-0.3.0",
			} {
				if l[k] != want {
					t.Errorf("%s/%s label %s = %q, want %q", o.kind, o.name(), k, l[k], want)
				}
			}
			if l["app.kubernetes.io/component"] == "" {
				t.Errorf("%s/%s has no component label", o.kind, o.name())
			}
		}
	})

	t.Run("every template file renders at most one object", func(t *testing.T) {
		for _, values := range []string{"", "migration: {mode: job}\npostgresql: {auth: {password: pw}}", "migration: {mode: argocd}\npostgresql: {auth: {password: pw}}", "gate: {mode: command}"} {
			r := render(t, renderOptions{values: values})
			per := map[string]int{}
			for _, o := range r.objects {
				per[o.source]++
			}
			for src, n := range per {
				if n > 1 {
					t.Errorf("values %q: %s renders %d objects", values, src, n)
				}
			}
			for name := range r.files {
				if !strings.HasSuffix(name, "NOTES.txt") && per[name] == 0 {
					t.Errorf("values %q: %s rendered text but no object", values, name)
				}
			}
		}
	})

	t.Run("long release names keep every name and the job-name label within 63 characters", func(t *testing.T) {
		long := strings.Repeat("r", 53)
		r := render(t, renderOptions{release: long, values: "migration: {mode: job}\npostgresql: {auth: {password: pw}}"})
		for _, o := range r.objects {
			if len(o.name()) > 63 {
				t.Errorf("%s name %q is %d characters", o.kind, o.name(), len(o.name()))
			}
		}
		if n := r.job(t).Name; len(n) > 63 || !strings.Contains(n, "-migrate-") {
			t.Errorf("job name %q", n)
		}
	})

	t.Run("two long release names that share their first 40 characters never share a resource name", func(t *testing.T) {
		deploymentName := func(release string) string {
			for _, o := range render(t, renderOptions{release: release}).objects {
				if o.kind == "Deployment" {
					return o.name()
				}
			}
			t.Fatalf("release %s renders no Deployment", release)
			return ""
		}
		prefix := strings.Repeat("payments-europe-", 3) // 48 characters
		a, b := deploymentName(prefix+"blue"), deploymentName(prefix+"green")
		if a == b || len(a) > 40 || len(b) > 40 {
			t.Errorf("fullnames %q and %q: want two different names of at most 40 characters", a, b)
		}
		if short := deploymentName("shop"); short != "shop-premigrate" {
			t.Errorf("a short release name became %q, want it untouched", short)
		}
	})

	t.Run("the rollout's progress deadline outlasts the migration's own deadline", func(t *testing.T) {
		for _, c := range []struct {
			values string
			want   int32
		}{
			{"", 1020},
			{"migration: {activeDeadlineSeconds: 3600}", 3720},
			{"migration: {activeDeadlineSeconds: 60}", 600},
			{"gate: {mode: none}", 600},
			{"progressDeadlineSeconds: 2000", 2000},
		} {
			d := render(t, renderOptions{values: c.values}).deployment(t)
			if d.Spec.ProgressDeadlineSeconds == nil || *d.Spec.ProgressDeadlineSeconds != c.want {
				t.Errorf("values %q: progressDeadlineSeconds %v, want %d", c.values, d.Spec.ProgressDeadlineSeconds, c.want)
			}
		}
	})
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func assertSecretEnv(t *testing.T, env []corev1.EnvVar, name, secret, key string) {
	t.Helper()
	e, ok := envVar(env, name)
	if !ok {
		t.Fatalf("no env %s in %v", name, envNames(env))
	}
	if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Fatalf("env %s is not a secretKeyRef: %+v", name, e)
	}
	if ref := e.ValueFrom.SecretKeyRef; ref.Name != secret || ref.Key != key {
		t.Errorf("env %s = secret %s key %s, want %s key %s", name, ref.Name, ref.Key, secret, key)
	}
}
