package render

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Behaviour 5: the gate holds the app pods until the migration for their identity succeeded.
func TestTheGateHoldsTheAppPodsUntilTheMigrationSucceeded(t *testing.T) {
	t.Run("job mode waits with the gate image for the identity", func(t *testing.T) {
		r := render(t, renderOptions{})
		id := identityOf(t, r)
		pod := r.deployment(t).Spec.Template
		if pod.Annotations["premigrate.io/identity"] != id {
			t.Errorf("pod identity annotation %q, want %q", pod.Annotations["premigrate.io/identity"], id)
		}
		if len(pod.Spec.InitContainers) != 1 {
			t.Fatalf("init containers %d", len(pod.Spec.InitContainers))
		}
		w := container(t, pod.Spec.InitContainers, "wait-for-migration")
		if w.Image != "ghcr.io/premigrate/gate:0.3.0" || !equalStrings(w.Command, []string{"/gate"}) {
			t.Errorf("gate image %q command %v", w.Image, w.Command)
		}
		want := []string{"wait", "--identity", id, "--records", fullname + "-migrations", "--store", fullname + "-migration-records",
			"--job", r.job(t).Name,
			"--timeout", "15m", "--progress-interval", "10s",
			"--database-object", "persistentvolumeclaim/data-" + fullname + "-postgresql-0"}
		if !equalStrings(w.Args, want) {
			t.Errorf("gate args\n got %v\nwant %v", w.Args, want)
		}
		if e, ok := envVar(w.Env, "POD_NAMESPACE"); !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
			t.Errorf("POD_NAMESPACE %+v", e)
		}
	})

	t.Run("the gate image, timeout and resources are configurable", func(t *testing.T) {
		r := render(t, renderOptions{values: `
gate:
  image: {repository: registry.local/gate, digest: ` + testDigest + `, pullPolicy: Never}
  delivery: imageVolume
  timeout: 30m
  progressInterval: 5s
  resources: {limits: {memory: 32Mi}}
`})
		w := container(t, r.deployment(t).Spec.Template.Spec.InitContainers, "wait-for-migration")
		if w.Image != "registry.local/gate@"+testDigest || w.ImagePullPolicy != corev1.PullNever {
			t.Errorf("image %q policy %q", w.Image, w.ImagePullPolicy)
		}
		if !containsSeq(w.Args, "--timeout", "30m") || !containsSeq(w.Args, "--progress-interval", "5s") {
			t.Errorf("args %v", w.Args)
		}
		if w.Resources.Limits.Memory().String() != "32Mi" {
			t.Errorf("resources %+v", w.Resources)
		}
		vols := r.job(t).Spec.Template.Spec.Volumes
		if len(vols) != 1 || vols[0].Image == nil || vols[0].Image.Reference != w.Image || vols[0].Image.PullPolicy != corev1.PullNever {
			t.Errorf("the Job's gate volume %+v is not the gate image %q with its pull policy", vols, w.Image)
		}
	})

	t.Run("job mode binds a read-only Role on its migration Job and the records ConfigMap to the app ServiceAccount", func(t *testing.T) {
		r := render(t, renderOptions{})
		role := mustFind[*rbacv1.Role](t, r, "Role", fullname+"-gate")
		if len(role.Rules) != 3 {
			t.Fatalf("rules %+v", role.Rules)
		}
		jobs, cms, claim := role.Rules[0], role.Rules[1], role.Rules[2]
		if !equalStrings(claim.APIGroups, []string{""}) || !equalStrings(claim.Resources, []string{"persistentvolumeclaims"}) ||
			!equalStrings(claim.ResourceNames, []string{"data-" + fullname + "-postgresql-0"}) || !equalStrings(claim.Verbs, []string{"get"}) {
			t.Errorf("the database's claim rule %+v: want get on that claim only", claim)
		}
		if !equalStrings(jobs.APIGroups, []string{"batch"}) || !equalStrings(jobs.Resources, []string{"jobs"}) ||
			!equalStrings(jobs.ResourceNames, []string{r.job(t).Name}) || !equalStrings(jobs.Verbs, []string{"get", "list", "watch"}) {
			t.Errorf("jobs rule %+v", jobs)
		}
		if !equalStrings(cms.APIGroups, []string{""}) || !equalStrings(cms.Resources, []string{"configmaps"}) ||
			!equalStrings(cms.ResourceNames, []string{fullname + "-migrations", fullname + "-migration-records"}) || !equalStrings(cms.Verbs, []string{"get", "list", "watch"}) {
			t.Errorf("configmaps rule %+v", cms)
		}
		rb := mustFind[*rbacv1.RoleBinding](t, r, "RoleBinding", fullname+"-gate")
		if rb.RoleRef.Name != fullname+"-gate" || len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" ||
			rb.Subjects[0].Name != r.deployment(t).Spec.Template.Spec.ServiceAccountName || rb.Subjects[0].Namespace != namespace {
			t.Errorf("binding %+v", rb)
		}
	})

	t.Run("command mode runs migrate status in the app image with the app env and needs no RBAC", func(t *testing.T) {
		r := render(t, renderOptions{values: `
image: {tag: v4}
env: [{name: DEMO_FLAG, value: "on"}]
envFrom: [{configMapRef: {name: extra}}]
gate: {mode: command}
`})
		w := container(t, r.deployment(t).Spec.Template.Spec.InitContainers, "wait-for-migration")
		if w.Image != "ghcr.io/premigrate/demo:v4" || !equalStrings(w.Args, []string{"migrate", "status"}) || !equalStrings(w.Command, []string{"/demo"}) {
			t.Errorf("image %q command %v args %v", w.Image, w.Command, w.Args)
		}
		if !equalStrings(envNames(w.Env), []string{"DATABASE_URL", "DEMO_FLAG"}) || len(w.EnvFrom) != 1 {
			t.Errorf("env %v envFrom %v", envNames(w.Env), w.EnvFrom)
		}
		for _, kind := range []string{"Role", "RoleBinding"} {
			if _, ok := r.find(kind, fullname+"-gate"); ok {
				t.Errorf("command mode renders %s %s-gate", kind, fullname)
			}
		}
		r = render(t, renderOptions{values: "command: [/demo]\ngate: {mode: command, args: [check]}"})
		w = container(t, r.deployment(t).Spec.Template.Spec.InitContainers, "wait-for-migration")
		if !equalStrings(w.Command, []string{"/demo"}) || !equalStrings(w.Args, []string{"check"}) {
			t.Errorf("command %v args %v", w.Command, w.Args)
		}
	})

	t.Run("none mode adds no init container and no RBAC but keeps the identity annotation", func(t *testing.T) {
		r := render(t, renderOptions{values: "gate: {mode: none}"})
		pod := r.deployment(t).Spec.Template
		if len(pod.Spec.InitContainers) != 0 {
			t.Errorf("init containers %v", pod.Spec.InitContainers)
		}
		if pod.Annotations["premigrate.io/identity"] != identityOf(t, r) {
			t.Error("identity annotation missing")
		}
		if _, ok := r.find("Role", fullname+"-gate"); ok {
			t.Error("none mode renders the gate Role")
		}
	})
}

func containsSeq(args []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(args); i++ {
		if equalStrings(args[i:i+len(seq)], seq) {
			return true
		}
	}
	return false
}

// gate.waitIn app: the app container itself waits (no wait-for-migration init container), through the gate
// binary of gate.delivery, with the gate's token at its own path, and a startup probe that covers the wait.
func TestTheAppContainerCanWaitForTheMigrationItself(t *testing.T) {
	tests := []struct {
		name          string
		values        string
		wantInit      []string
		wantBinaryVol string // "image" or "emptyDir"
		wantStartup   *corev1.Probe
	}{
		{name: "copied by install-gate", values: "gate: {waitIn: app}", wantInit: []string{"install-gate"}, wantBinaryVol: "emptyDir",
			wantStartup: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1020, TimeoutSeconds: 2}},
		{name: "mounted as an image volume", values: "gate: {waitIn: app, delivery: imageVolume}", wantBinaryVol: "image",
			wantStartup: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1020, TimeoutSeconds: 2}},
		{name: "with the startup probe of the values", values: "gate: {waitIn: app}\nstartupProbe: {tcpSocket: {port: http}, periodSeconds: 5, failureThreshold: 3}",
			wantInit: []string{"install-gate"}, wantBinaryVol: "emptyDir", wantStartup: &corev1.Probe{PeriodSeconds: 5, FailureThreshold: 3}},
		{name: "with a long migration deadline", values: "gate: {waitIn: app}\nmigration: {activeDeadlineSeconds: 3600}",
			wantInit: []string{"install-gate"}, wantBinaryVol: "emptyDir", wantStartup: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 3720, TimeoutSeconds: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, renderOptions{values: tt.values})
			id := identityOf(t, r)
			pod := r.deployment(t).Spec.Template.Spec
			var inits []string
			for _, c := range pod.InitContainers {
				inits = append(inits, c.Name)
			}
			if !equalStrings(inits, tt.wantInit) {
				t.Errorf("init containers %v, want %v", inits, tt.wantInit)
			}
			app := container(t, pod.Containers, "app")
			want := []string{"/premigrate/gate", "wait", "--identity", id, "--records", fullname + "-migrations", "--store", fullname + "-migration-records",
				"--job", r.job(t).Name, "--timeout", "15m", "--progress-interval", "10s",
				"--token-dir", "/var/run/secrets/premigrate.io/gate",
				"--database-object", "persistentvolumeclaim/data-" + fullname + "-postgresql-0", "--", "/demo"}
			if !equalStrings(app.Command, want) || !equalStrings(app.Args, []string{"serve"}) {
				t.Errorf("app command %v args %v\nwant command %v", app.Command, app.Args, want)
			}
			mounts := map[string]string{}
			for _, m := range app.VolumeMounts {
				if !m.ReadOnly {
					t.Errorf("mount %s is writable", m.Name)
				}
				mounts[m.Name] = m.MountPath
			}
			if mounts["premigrate-gate"] != "/premigrate" || mounts["premigrate-gate-token"] != "/var/run/secrets/premigrate.io/gate" {
				t.Errorf("app mounts %v", mounts)
			}
			for _, v := range pod.Volumes {
				if v.Name != "premigrate-gate" {
					continue
				}
				if got := map[bool]string{true: "image", false: "emptyDir"}[v.Image != nil]; got != tt.wantBinaryVol || (v.Image == nil && v.EmptyDir == nil) {
					t.Errorf("the gate binary's volume %+v, want %s", v, tt.wantBinaryVol)
				}
			}
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Error("the pod automounts the ServiceAccount token")
			}
			s := app.StartupProbe
			if s == nil || s.PeriodSeconds != tt.wantStartup.PeriodSeconds || s.FailureThreshold != tt.wantStartup.FailureThreshold ||
				s.TimeoutSeconds != tt.wantStartup.TimeoutSeconds {
				t.Errorf("startup probe %+v, want %+v", s, tt.wantStartup)
			}
		})
	}
}

func TestTheAppContainerWaitsOnlyInWatchMode(t *testing.T) {
	for _, values := range []string{"gate: {waitIn: app, mode: none}", "gate: {waitIn: app}\nmigration: {enabled: false}"} {
		r := render(t, renderOptions{values: values})
		app := container(t, r.deployment(t).Spec.Template.Spec.Containers, "app")
		if !equalStrings(app.Command, []string{"/demo"}) || app.StartupProbe != nil || len(app.VolumeMounts) != 0 {
			t.Errorf("%s: app command %v startup probe %+v mounts %v, want the app's own", values, app.Command, app.StartupProbe, app.VolumeMounts)
		}
	}
}
