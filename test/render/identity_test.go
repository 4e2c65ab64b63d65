package render

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The identity is a hash of the migration's inputs: it moves with the image, the command, the args, the env
// (the database's Secret included) and the envFrom, and stays put for anything else. A change of the rest of the
// Job's pod template (its limits, the gate's image and delivery) is a new plain Job of the same identity: the
// gate finds its migration recorded and runs nothing again.
func TestTheIdentityChangesWithTheMigrationsInputsOnly(t *testing.T) {
	base := identityOf(t, render(t, renderOptions{}))
	if !regexpHex10(base) {
		t.Fatalf("identity %q is not 10 hex characters", base)
	}
	changes := map[string]string{
		"the image tag":         "image: {tag: v2}",
		"the image digest":      "image: {digest: " + testDigest + "}",
		"the migration image":   "migration: {image: {repository: registry.local/migrator}}",
		"the app command":       "command: [/demo2]",
		"the migration command": "migration: {command: [/migrate]}",
		"the migration args":    "migration: {args: [migrate, --all]}",
		"the app env":           "env: [{name: DEMO_VERSION, value: \"2\"}]",
		"the migration env":     "migration: {env: [{name: SCHEMA_ACCEPT_DATA_LOSS, value: \"true\"}]}",
		"an env value":          "env: [{name: DEMO_VERSION, value: \"3\"}]",
		"the envFrom":           "envFrom: [{configMapRef: {name: x}}]",
		"the database":          externalDB,
		"the database key":      "postgresql: {enabled: false}\ndatabase: {existingSecret: prod-db, existingSecretKey: dsn}",
		"the identityExtra":     "migration: {identityExtra: {schemaFiles: abc123}}",
	}
	seen := map[string]string{base: "the defaults"}
	for what, values := range changes {
		id := identityOf(t, render(t, renderOptions{values: values}))
		if id == base {
			t.Errorf("changing %s keeps the identity %s", what, id)
		}
		if other, ok := seen[id]; ok && other != "the defaults" {
			t.Errorf("changing %s and %s give the same identity %s", what, other, id)
		}
		seen[id] = what
	}
	same := map[string]string{
		"replicaCount":       "replicaCount: 7",
		"the app args":       "args: [serve, --debug]",
		"resources":          "resources: {limits: {memory: 1Gi}}",
		"the gate":           "gate: {mode: command, timeout: 1h}",
		"probes":             "readinessProbe: null",
		"the upgrade flag":   "",
		"the migration mode": "migration: {mode: job}\npostgresql: {auth: {password: pw}}",
		"the service":        "service: {port: 9000}",
	}
	mechanics := map[string]string{
		"migration limits":          "migration: {backoffLimit: 5, activeDeadlineSeconds: 60, ttlSecondsAfterFinished: 0}",
		"migration resources":       "migration: {resources: {requests: {cpu: 20m}}}",
		"the migration pull policy": "migration: {image: {pullPolicy: Always}}",
		"the fail-fast codes":       "migration: {failFastExitCodes: [7]}",
		"the kept records":          "migration: {keepRecords: 5}",
		"the gate image":            "gate: {image: {tag: other}}",
		"the gate's resources":      "gate: {resources: {requests: {cpu: 5m}}}",
		"the gate delivery":         "gate: {delivery: imageVolume}",
		"the migration pod":         "migration: {nodeSelector: {pool: db}}",
		"the chart's version":       "",
	}
	baseJob := render(t, renderOptions{}).job(t).Name
	for what, values := range mechanics {
		o := renderOptions{values: values}
		if what == "the chart's version" {
			o.chartVersion = "9.9.9"
		}
		r := render(t, o)
		if id := identityOf(t, r); id != base {
			t.Errorf("changing %s moves the identity from %s to %s", what, base, id)
		}
		if job := r.job(t).Name; job == baseJob && what != "the chart's version" {
			t.Errorf("changing %s keeps the plain Job %s: a patch of its immutable pod template", what, job)
		}
	}
	for what, values := range same {
		id := identityOf(t, render(t, renderOptions{values: values, upgrade: what == "the upgrade flag"}))
		if id != base {
			t.Errorf("changing %s moves the identity from %s to %s", what, base, id)
		}
	}
}

// The identity shows up everywhere from one definition: Job label, pod template label, app pod
// annotation, gate flag, migrate env; the gate waits for the rendered Job by its exact name.
func TestTheIdentityIsTheSameEverywhereItIsRendered(t *testing.T) {
	for mode, values := range modeValues {
		if strings.Contains(values, "enabled: false") {
			continue
		}
		r := render(t, renderOptions{values: values})
		id := identityOf(t, r)
		job := r.job(t)
		pod := r.deployment(t).Spec.Template
		got := map[string]string{
			"job template label": job.Spec.Template.Labels["premigrate.io/identity"],
			"app pod annotation": pod.Annotations["premigrate.io/identity"],
		}
		m := container(t, job.Spec.Template.Spec.Containers, "migrate")
		if e, ok := envVar(m.Env, "PREMIGRATE_IDENTITY"); ok {
			got["migrate env"] = e.Value
		}
		for what, v := range got {
			if v != id {
				t.Errorf("%s: %s is %q, want %q", mode, what, v, id)
			}
		}
		if strings.Contains(values, "gate: {mode: watch}") || !strings.Contains(values, "gate:") {
			w := container(t, pod.Spec.InitContainers, "wait-for-migration")
			if !containsSeq(w.Args, "--identity", id) || !containsSeq(w.Args, "--job", job.Name) {
				t.Errorf("%s: gate args %v lack identity %s or Job %s", mode, w.Args, id, job.Name)
			}
		}
	}
}

// Within one mode, a Job name carries the same hook annotations on install and on upgrade, so Helm
// and Argo CD treat a given Job the same way whatever the release event. The records ConfigMap is never a
// hook. The migration's ServiceAccount, Role and RoleBinding follow the kind of the Job they serve (hooks
// beside a hook Job, release objects beside a plain one): checked in migration_test.go.
func TestHookAnnotationsAreTheSameOnInstallAndUpgradeForTheSameJobName(t *testing.T) {
	compared := map[string]bool{}
	for mode, values := range modeValues {
		install := render(t, renderOptions{values: values})
		upgrade := render(t, renderOptions{values: values, upgrade: true})
		for _, a := range install.objects {
			b, ok := upgrade.find(a.kind, a.name())
			if !ok || (a.kind != "Job" && a.kind != "ConfigMap") {
				continue
			}
			if !reflect.DeepEqual(hookAnnotations(a.meta.GetAnnotations()), hookAnnotations(b.meta.GetAnnotations())) {
				t.Errorf("%s: %s/%s install %v, upgrade %v", mode, a.kind, a.name(),
					hookAnnotations(a.meta.GetAnnotations()), hookAnnotations(b.meta.GetAnnotations()))
			}
			if a.kind == "Job" {
				compared[mode] = true
			}
		}
	}
	for _, mode := range []string{"job", "argocd"} {
		if !compared[mode] {
			t.Errorf("%s: the Job has different names on install and upgrade", mode)
		}
	}
	// Hook mode: the install's plain Job and the upgrade's hook Job have different names (with an external
	// database both are the same pre-install,pre-upgrade hook, compared above).
	if !compared["hook external db"] {
		t.Error("hook external db: the install's and the upgrade's hook Jobs have different names")
	}
	for _, values := range []string{"", externalDB + "migration: {preInstallHook: false}"} {
		install := render(t, renderOptions{values: values}).job(t)
		upgrade := render(t, renderOptions{values: values, upgrade: true}).job(t)
		if install.Name == upgrade.Name {
			t.Errorf("values %q: install and upgrade Jobs share the name %s although one is a hook and one is not", values, install.Name)
		}
	}
}

func hookAnnotations(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if strings.HasPrefix(k, "helm.sh/hook") || strings.HasPrefix(k, "argocd.argoproj.io/") {
			out[k] = v
		}
	}
	return out
}

func regexpHex10(s string) bool {
	if len(s) != 10 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// In job mode the Job's name carries the identity, so one name must always mean one pod template: kubectl
// apply of a rendering whose Job spec changed creates a new Job instead of patching an immutable one.
func TestInJobModeOneJobNameAlwaysMeansOneJobSpec(t *testing.T) {
	variations := []string{
		"",
		"image: {tag: v2}",
		"migration: {resources: {requests: {cpu: 20m}}}",
		"migration: {resources: {limits: {memory: 64Mi}}}",
		"migration: {backoffLimit: 4}",
		"migration: {activeDeadlineSeconds: 120}",
		"migration: {ttlSecondsAfterFinished: 30}",
		"migration: {failFastExitCodes: [3, 4]}",
		"migration: {keepRecords: 5}",
		"gate: {image: {tag: other}}",
		"gate: {image: {pullPolicy: Always}}",
		"gate: {resources: {requests: {cpu: 5m}}}",
		"imagePullSecrets: [{name: regcred}]",
		"replicaCount: 5",
		"gate: {timeout: 1h}",
		"gate: {delivery: initContainer}",
		"gate: {delivery: imageVolume}",
	}
	specs := map[string]string{}
	for _, v := range variations {
		values := "postgresql: {auth: {password: pw}}\nmigration: {mode: job}\n" + v
		if strings.HasPrefix(v, "migration: {") {
			values = "postgresql: {auth: {password: pw}}\nmigration: {mode: job, " + strings.TrimPrefix(v, "migration: {")
		}
		job := render(t, renderOptions{values: values}).job(t)
		spec, err := json.Marshal(job.Spec)
		if err != nil {
			t.Fatalf("encoding the Job spec: %v", err)
		}
		if prev, ok := specs[job.Name]; ok && prev != string(spec) {
			t.Errorf("values %q render Job %s with a different spec than an earlier rendering of the same name", v, job.Name)
		}
		specs[job.Name] = string(spec)
	}
}
