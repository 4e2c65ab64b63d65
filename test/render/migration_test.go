package render

import (
	"reflect"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// externalDB renders hook mode with an external database, where every render is a hook.
const externalDB = `
postgresql: {enabled: false}
database: {existingSecret: prod-db, existingSecretKey: url}
`

// Behaviour 2: the migration Job as design.md describes it.
func TestTheMigrationJobMatchesTheDesign(t *testing.T) {
	t.Run("hook mode upgrades run a pre-upgrade hook named <fullname>-migrate (with an external database, pre-install too)", func(t *testing.T) {
		for values, events := range map[string]string{externalDB: "pre-install,pre-upgrade", "": "pre-upgrade"} {
			job := render(t, renderOptions{values: values, upgrade: true}).job(t)
			if job.Name != fullname+"-migrate" {
				t.Errorf("values %q: name %q", values, job.Name)
			}
			want := map[string]string{
				"helm.sh/hook":                   events,
				"helm.sh/hook-weight":            "0",
				"helm.sh/hook-delete-policy":     "before-hook-creation",
				"helm.sh/hook-output-log-policy": "hook-failed",
			}
			assertAnnotations(t, job.Annotations, want)
		}
		job := render(t, renderOptions{values: externalDB + "migration: {hookWeight: 5, hookDeletePolicy: 'before-hook-creation,hook-succeeded'}", upgrade: true}).job(t)
		if job.Annotations["helm.sh/hook-weight"] != "5" || job.Annotations["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
			t.Errorf("configured hook annotations = %v", job.Annotations)
		}
		job = render(t, renderOptions{values: externalDB + "migration: {hookOutputLogs: false}", upgrade: true}).job(t)
		if v, ok := job.Annotations["helm.sh/hook-output-log-policy"]; ok {
			t.Errorf("migration.hookOutputLogs false still annotates hook-output-log-policy %q", v)
		}
	})

	t.Run("hook mode installs, and upgrades that find no records ConfigMap, on the embedded database run a plain Job named by its spec", func(t *testing.T) {
		for _, o := range []renderOptions{{}, {upgrade: true, noRecords: true}, {values: externalDB + "migration: {preInstallHook: false}"}} {
			r := render(t, o)
			if job := r.job(t); !isPlainJobName(fullname, job.Name) || len(hookAnnotations(job.Annotations)) != 0 {
				t.Errorf("%+v: Job %s with hook annotations %v, want a plain Job named by its spec", o, job.Name, hookAnnotations(job.Annotations))
			}
			mustFind[*corev1.ConfigMap](t, r, "ConfigMap", fullname+"-migrations")
		}
	})

	t.Run("an upgrade rendered without a cluster (--dry-run=client, helm diff upgrade) shows the pre-upgrade hook an upgrade runs, an install the plain Job", func(t *testing.T) {
		password := "postgresql: {auth: {password: given}}\n"
		if job := render(t, renderOptions{noCluster: true, upgrade: true, values: password}).job(t); job.Name != fullname+"-migrate" ||
			job.Annotations["helm.sh/hook"] != "pre-upgrade" {
			t.Errorf("Job %s with hook %q, want %s-migrate, the pre-upgrade hook", job.Name, job.Annotations["helm.sh/hook"], fullname)
		}
		if job := render(t, renderOptions{noCluster: true, values: password}).job(t); !isPlainJobName(fullname, job.Name) {
			t.Errorf("install: Job %s, want a plain Job named by its spec", job.Name)
		}
	})

	t.Run("an upgrade that finds a records ConfigMap of an earlier chart (a hook, without Helm's ownership) leaves it out of the release", func(t *testing.T) {
		old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fullname + "-migrations", Namespace: namespace,
			Annotations: map[string]string{"helm.sh/hook": "pre-install"}}}
		r := render(t, renderOptions{upgrade: true, noRecords: true, existing: []runtime.Object{old}})
		if _, ok := r.find("ConfigMap", fullname+"-migrations"); ok {
			t.Error("the ConfigMap is rendered: Helm would refuse to import it before the hook gave it the release's ownership")
		}
		if job := r.job(t); job.Name != fullname+"-migrate" {
			t.Errorf("Job %s, want the pre-upgrade hook (its gate run adopts the ConfigMap)", job.Name)
		}
	})

	t.Run("hook mode with the embedded database installs a plain Job named by its spec", func(t *testing.T) {
		r := render(t, renderOptions{})
		job := r.job(t)
		if !isPlainJobName(fullname, job.Name) {
			t.Errorf("name %q, want %s-migrate-<the hash of its spec>", job.Name, fullname)
		}
		for k := range job.Annotations {
			if strings.HasPrefix(k, "helm.sh/") || strings.HasPrefix(k, "argocd.argoproj.io/") {
				t.Errorf("plain install Job has annotation %s", k)
			}
		}
		up := render(t, renderOptions{upgrade: true}).job(t)
		if up.Name != fullname+"-migrate" || up.Annotations["helm.sh/hook"] != "pre-upgrade" {
			t.Errorf("upgrade Job %q annotations %v, want the hook", up.Name, up.Annotations)
		}
	})

	t.Run("the Job runs one pod at a time with the configured limits and failure policy", func(t *testing.T) {
		job := render(t, renderOptions{}).job(t)
		s := job.Spec
		if *s.Parallelism != 1 || *s.Completions != 1 || *s.BackoffLimit != 2 || *s.ActiveDeadlineSeconds != 900 {
			t.Errorf("parallelism %d completions %d backoffLimit %d deadline %d", *s.Parallelism, *s.Completions, *s.BackoffLimit, *s.ActiveDeadlineSeconds)
		}
		if s.TTLSecondsAfterFinished != nil {
			t.Errorf("ttlSecondsAfterFinished = %d, want unset", *s.TTLSecondsAfterFinished)
		}
		if s.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("restartPolicy = %q", s.Template.Spec.RestartPolicy)
		}
		assertFailurePolicy(t, s.PodFailurePolicy, []int32{3})

		job = render(t, renderOptions{values: "migration: {backoffLimit: 0, activeDeadlineSeconds: 1000000, failFastExitCodes: [42, 3, 7]}"}).job(t)
		if *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != 1000000 {
			t.Errorf("configured backoffLimit %d deadline %d", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds)
		}
		assertFailurePolicy(t, job.Spec.PodFailurePolicy, []int32{3, 7, 42})

		job = render(t, renderOptions{values: "migration: {failFastExitCodes: []}"}).job(t)
		assertFailurePolicy(t, job.Spec.PodFailurePolicy, []int32{3}) // the gate's refusal, whatever the app's codes
	})

	t.Run("ttlSecondsAfterFinished is omitted when null and rendered when 0, on hook Jobs and job-mode Jobs", func(t *testing.T) {
		jobMode := "postgresql: {auth: {password: pw}}\nmigration: {mode: job, "
		for _, c := range []struct {
			values  string
			upgrade bool
			want    *int32
		}{
			{"migration: {ttlSecondsAfterFinished: null}", true, nil},
			{"migration: {ttlSecondsAfterFinished: 0}", true, ptr(int32(0))},
			{"migration: {ttlSecondsAfterFinished: 3600}", true, ptr(int32(3600))},
			{jobMode + "ttlSecondsAfterFinished: 0}", false, ptr(int32(0))},
			{jobMode + "ttlSecondsAfterFinished: 60}", true, ptr(int32(60))},
			// hook mode's plain install Job: the next upgrade removes it; a TTL would break Helm 3's
			// --wait --wait-for-jobs, which fails on a release Job that is gone
			{"migration: {ttlSecondsAfterFinished: 0}", false, nil},
		} {
			got := render(t, renderOptions{values: c.values, upgrade: c.upgrade}).job(t).Spec.TTLSecondsAfterFinished
			if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
				t.Errorf("%s: ttl = %v, want %v", c.values, deref(got), deref(c.want))
			}
		}
	})

	t.Run("the migrate container runs the app image through the gate with the app env, the migration env and the identity", func(t *testing.T) {
		r := render(t, renderOptions{values: `
image: {tag: v2, digest: ` + testDigest + `}
command: [/demo]
env: [{name: A, value: "1"}]
envFrom: [{secretRef: {name: app-extra}}]
migration:
  env: [{name: SCHEMA_ACCEPT_DATA_LOSS, value: "true"}]
  envFrom: [{configMapRef: {name: mig-extra}}]
  resources: {requests: {cpu: 10m}}
`})
		job := r.job(t)
		id := identityOf(t, r)
		spec := job.Spec.Template.Spec
		if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "install-gate" || len(spec.Containers) != 1 {
			t.Fatalf("init containers %d containers %d, want install-gate and migrate (the default gate delivery copies the gate)", len(spec.InitContainers), len(spec.Containers))
		}
		m := container(t, spec.Containers, "migrate")
		if m.Image != "ghcr.io/premigrate/demo@"+testDigest {
			t.Errorf("migrate image %q, want the app image with its digest", m.Image)
		}
		if !equalStrings(userCommand(t, m), []string{"/demo"}) || !equalStrings(m.Args, []string{"migrate"}) {
			t.Errorf("migrate command %v args %v", m.Command, m.Args)
		}
		if want := []string{"DATABASE_URL", "A", "SCHEMA_ACCEPT_DATA_LOSS", "PREMIGRATE_IDENTITY", "JOB_NAME", "POD_NAMESPACE"}; !equalStrings(envNames(m.Env), want) {
			t.Errorf("migrate env %v, want %v", envNames(m.Env), want)
		}
		if e, _ := envVar(m.Env, "PREMIGRATE_IDENTITY"); e.Value != id {
			t.Errorf("PREMIGRATE_IDENTITY = %q, want %q", e.Value, id)
		}
		assertSecretEnv(t, m.Env, "DATABASE_URL", fullname+"-postgresql", "url")
		if len(m.EnvFrom) != 2 || m.EnvFrom[0].SecretRef.Name != "app-extra" || m.EnvFrom[1].ConfigMapRef.Name != "mig-extra" {
			t.Errorf("migrate envFrom %+v", m.EnvFrom)
		}
		if m.Resources.Requests.Cpu().String() != "10m" {
			t.Errorf("migrate resources %+v", m.Resources)
		}
	})

	t.Run("a migration image and command of its own replace the app's", func(t *testing.T) {
		job := render(t, renderOptions{values: `
migration:
  image: {repository: registry.local/tools/migrator, tag: "2.1", pullPolicy: Always}
  command: [/migrator]
  args: [up]
`}).job(t)
		m := container(t, job.Spec.Template.Spec.Containers, "migrate")
		if m.Image != "registry.local/tools/migrator:2.1" || m.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("migrate image %q policy %q", m.Image, m.ImagePullPolicy)
		}
		if !equalStrings(userCommand(t, m), []string{"/migrator"}) || !equalStrings(m.Args, []string{"up"}) {
			t.Errorf("migrate command %v args %v", m.Command, m.Args)
		}
	})

	t.Run("the demo's migrate argument goes only with the demo's command", func(t *testing.T) {
		for _, c := range []struct {
			name, values  string
			command, args []string
		}{
			{"the demo", "", []string{"/demo"}, []string{"migrate"}},
			{"the app's own command", "command: [/shop, serve]", []string{"/shop", "serve"}, nil},
			{"a migration command of its own", "migration: {command: [python, manage.py, migrate]}", []string{"python", "manage.py", "migrate"}, nil},
			{"the demo's command given as the migration's", "migration: {command: [/demo]}", []string{"/demo"}, []string{"migrate"}},
			{"arguments given", "migration: {command: [python, manage.py], args: [migrate, --noinput]}", []string{"python", "manage.py"}, []string{"migrate", "--noinput"}},
			{"no arguments asked for beside the demo", "migration: {args: []}", []string{"/demo"}, nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				m := container(t, render(t, renderOptions{values: c.values}).job(t).Spec.Template.Spec.Containers, "migrate")
				if !equalStrings(userCommand(t, m), c.command) || !equalStrings(m.Args, c.args) {
					t.Errorf("migrate command %v args %v, want %v %v", userCommand(t, m), m.Args, c.command, c.args)
				}
			})
		}
	})

	t.Run("the gate wraps the migration, records the identity in the records ConfigMap and passes the demo's fail-fast code through", func(t *testing.T) {
		for _, tc := range []struct {
			name, values string
			upgrade      bool
			tail         []string
		}{
			{"a plain Job with the embedded database waits for PostgreSQL", "", false,
				[]string{"--wait-for-postgres", fullname + "-postgresql:5432", "--database-object", "persistentvolumeclaim/data-" + fullname + "-postgresql-0"}},
			{"a hook Job with the embedded database: the database is up (and when it is not, the upgrade must fail)", "", true,
				[]string{"--database-object", "persistentvolumeclaim/data-" + fullname + "-postgresql-0"}},
			{"a hook Job with an external database", externalDB, true, []string{"--database-url-env", "PREMIGRATE_DATABASE_URL"}},
			{"a plain Job with an external database", externalDB + "\nmigration: {mode: job, keepRecords: 7}", false, []string{"--database-url-env", "PREMIGRATE_DATABASE_URL"}},
		} {
			values := "migration: {keepRecords: 7}\ngate: {image: {tag: dev}}\n" + tc.values
			if strings.Contains(tc.values, "migration:") {
				values = "gate: {image: {tag: dev}}\n" + tc.values
			}
			r := render(t, renderOptions{values: values, upgrade: tc.upgrade})
			spec := r.job(t).Spec.Template.Spec
			id := identityOf(t, r)
			m := container(t, spec.Containers, "migrate")
			meta := `{"annotations":{"meta.helm.sh/release-name":"` + releaseName + `","meta.helm.sh/release-namespace":"` + namespace + `"},` +
				`"labels":{"app.kubernetes.io/component":"migration","app.kubernetes.io/instance":"` + releaseName + `",` +
				`"app.kubernetes.io/managed-by":"Helm","app.kubernetes.io/name":"premigrate","app.kubernetes.io/version":"0.3.0","helm.sh/chart":"premigrate-0.3.0"}}`
			want := append([]string{"/premigrate/gate", "run", "--identity", id, "--records", fullname + "-migrations", "--store", fullname + "-migration-records", "--job", "$(JOB_NAME)", "--keep", "7",
				"--fail-fast-exit-codes", "3", "--history", fullname + "-migration-runs", "--history-keep", "10", "--create-records", meta}, tc.tail...)
			want = append(want, "--", "/demo")
			if !equalStrings(m.Command, want) {
				t.Errorf("%s: migrate command\n%v, want\n%v", tc.name, m.Command, want)
			}
		}
		r := render(t, renderOptions{values: "migration: {keepRecords: 7}\ngate: {image: {tag: dev}}"})
		spec := r.job(t).Spec.Template.Spec
		m := container(t, spec.Containers, "migrate")
		if len(m.VolumeMounts) != 1 || m.VolumeMounts[0].MountPath != "/premigrate" || !m.VolumeMounts[0].ReadOnly {
			t.Errorf("migrate mounts %+v, want the gate read-only at /premigrate", m.VolumeMounts)
		}
		if e, ok := envVar(m.Env, "JOB_NAME"); !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-name']" {
			t.Errorf("JOB_NAME = %+v", e)
		}
		if e, ok := envVar(m.Env, "POD_NAMESPACE"); !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
			t.Errorf("POD_NAMESPACE = %+v", e)
		}
	})

	t.Run("the Job and its pods carry the gate's selector labels", func(t *testing.T) {
		r := render(t, renderOptions{})
		job := r.job(t)
		id := identityOf(t, r)
		for where, l := range map[string]map[string]string{"job": job.Labels, "pod template": job.Spec.Template.Labels} {
			if l["app.kubernetes.io/instance"] != releaseName || l["app.kubernetes.io/component"] != "migration" || l["premigrate.io/identity"] != id {
				t.Errorf("%s labels %v", where, l)
			}
		}
		for _, k := range []string{"helm.sh/chart", "app.kubernetes.io/version"} {
			if _, ok := job.Spec.Template.Labels[k]; ok {
				t.Errorf("pod template has the changing label %s (the Job template is immutable)", k)
			}
		}
	})

	t.Run("the migration ServiceAccount may only update the records ConfigMaps, create one, get a pod and read its own Job", func(t *testing.T) {
		for _, upgrade := range []bool{false, true} {
			r := render(t, renderOptions{upgrade: upgrade})
			// named after the Job: beside a plain Job it lives as long as that Job
			role := mustFind[*rbacv1.Role](t, r, "Role", r.job(t).Name)
			want := []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{fullname + "-migrations", fullname + "-migration-records", fullname + "-migration-runs"}, Verbs: []string{"get", "update", "patch"}},
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
				// the holder of a lock that was not renewed: whether its pod still runs (not list: it names the pod)
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
				// its creation time orders the release's migrations
				{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, ResourceNames: []string{r.job(t).Name}, Verbs: []string{"get"}},
			}
			// the claim of the embedded database, whose UID names the database the records are bound to
			want = append(want, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"},
				ResourceNames: []string{"data-" + fullname + "-postgresql-0"}, Verbs: []string{"get"}})
			if !reflect.DeepEqual(role.Rules, want) {
				t.Errorf("upgrade=%v: rules\n%+v, want\n%+v", upgrade, role.Rules, want)
			}
		}
		r := render(t, renderOptions{})
		job := r.job(t)
		if job.Spec.Template.Spec.ServiceAccountName != fullname+"-migrate" {
			t.Errorf("serviceAccountName %q", job.Spec.Template.Spec.ServiceAccountName)
		}
		mustFind[*corev1.ServiceAccount](t, r, "ServiceAccount", fullname+"-migrate")
		rb := mustFind[*rbacv1.RoleBinding](t, r, "RoleBinding", job.Name)
		if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != job.Name || len(rb.Subjects) != 1 ||
			rb.Subjects[0].Name != fullname+"-migrate" || rb.Subjects[0].Namespace != namespace {
			t.Errorf("role binding %+v", rb)
		}
		mustFind[*corev1.ConfigMap](t, r, "ConfigMap", fullname+"-migrations")
	})

	t.Run("beside a hook Job the support objects are hooks that outlive Helm's timeout, the records own every hook, and the records are a release object", func(t *testing.T) {
		for _, tc := range []struct {
			name, values  string
			upgrade, hook bool
		}{
			{"embedded database, install (a plain Job)", "", false, false},
			{"embedded database, upgrade", "", true, true},
			{"external database without the pre-install hook, install (a plain Job)", externalDB + "migration: {preInstallHook: false}", false, false},
			{"external database without the pre-install hook, upgrade", externalDB + "migration: {preInstallHook: false}", true, true},
			{"job mode", "migration: {mode: job}\npostgresql: {auth: {password: pw}}", true, false},
		} {
			r := render(t, renderOptions{values: tc.values, upgrade: tc.upgrade})
			want := map[string]string{}
			var wantOwners []metav1.OwnerReference
			if tc.hook {
				// only before-hook-creation: Helm deletes hook-succeeded and hook-failed hooks when its
				// --timeout expires on the Job, which runs on and must still be able to record itself
				want = map[string]string{
					"helm.sh/hook":               "pre-upgrade",
					"helm.sh/hook-weight":        "-10",
					"helm.sh/hook-delete-policy": "before-hook-creation",
				}
				// hooks are no release objects: the records ConfigMap takes them with it on helm uninstall
				wantOwners = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: fullname + "-migrations", UID: recordsUID}}
			}
			for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding"} {
				name := fullname + "-migrate"
				if kind != "ServiceAccount" {
					name = r.job(t).Name // the Job's name: "-migrate-<identity>" beside a plain Job
				}
				o, _ := r.find(kind, name)
				if got := hookAnnotations(o.meta.GetAnnotations()); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: %s hook annotations %v, want %v", tc.name, kind, got, want)
				}
				if got := o.meta.GetOwnerReferences(); !reflect.DeepEqual(got, wantOwners) {
					t.Errorf("%s: %s owners %v, want %v", tc.name, kind, got, wantOwners)
				}
				if a := o.meta.GetAnnotations(); tc.hook && (a["meta.helm.sh/release-name"] != releaseName || a["meta.helm.sh/release-namespace"] != namespace) {
					t.Errorf("%s: %s hook lacks Helm's ownership annotations (a rollback to the install's revision could not adopt it): %v", tc.name, kind, a)
				}
			}
			// the hook Job too, rendered with its owner: helm uninstall takes it even when its pod never ran
			if got := r.job(t).OwnerReferences; !reflect.DeepEqual(got, wantOwners) {
				t.Errorf("%s: the Job's owners %v, want %v", tc.name, got, wantOwners)
			}
			cm := mustFind[*corev1.ConfigMap](t, r, "ConfigMap", fullname+"-migrations")
			if got := hookAnnotations(cm.Annotations); len(got) != 0 {
				t.Errorf("%s: the records ConfigMap is a hook (%v): helm uninstall would leave it and its records", tc.name, got)
			}
			if len(cm.Data) != 0 || len(cm.BinaryData) != 0 {
				t.Errorf("records ConfigMap renders data %v", cm.Data)
			}
		}
	})
}

func assertAnnotations(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("annotation %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func assertFailurePolicy(t *testing.T, p *batchv1.PodFailurePolicy, codes []int32) {
	t.Helper()
	if p == nil {
		t.Fatal("no podFailurePolicy")
	}
	var failJob, ignore int
	for _, r := range p.Rules {
		switch r.Action {
		case batchv1.PodFailurePolicyActionFailJob:
			failJob++
			e := r.OnExitCodes
			if e == nil || e.ContainerName == nil || *e.ContainerName != "migrate" || e.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn {
				t.Errorf("FailJob rule %+v", r)
				continue
			}
			if len(e.Values) != len(codes) {
				t.Errorf("exit codes %v, want %v", e.Values, codes)
				continue
			}
			for i := range codes {
				if e.Values[i] != codes[i] {
					t.Errorf("exit codes %v, want %v", e.Values, codes)
				}
			}
		case batchv1.PodFailurePolicyActionIgnore:
			ignore++
			if len(r.OnPodConditions) != 1 || r.OnPodConditions[0].Type != corev1.DisruptionTarget {
				t.Errorf("Ignore rule %+v", r)
			}
		default:
			t.Errorf("unexpected rule %+v", r)
		}
	}
	if wantFail := map[bool]int{true: 1, false: 0}[len(codes) > 0]; failJob != wantFail || ignore != 1 {
		t.Errorf("FailJob rules %d (want %d), Ignore rules %d (want 1)", failJob, wantFail, ignore)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(p *int32) any {
	if p == nil {
		return "nil"
	}
	return *p
}

// userCommand is the migration command the gate runs: what follows "--" in the migrate container's command.
func userCommand(t *testing.T, c corev1.Container) []string {
	t.Helper()
	for i, a := range c.Command {
		if a == "--" {
			return c.Command[i+1:]
		}
	}
	t.Fatalf("container %s command %v has no --", c.Name, c.Command)
	return nil
}

// The gate binary reaches the migration container either as an image volume of the gate image (no extra
// container in the Job's pod) or copied by the install-gate init container through an emptyDir.
func TestTheGateReachesTheMigrationContainerAsAnImageVolumeOrThroughAnInitContainer(t *testing.T) {
	cases := []struct {
		name, values, kubeVersion string
		wantImageVolume           bool
	}{
		{name: "the default copies the gate on Kubernetes 1.37, whatever the runtime", wantImageVolume: false},
		{name: "the default copies the gate on the chart's oldest Kubernetes", kubeVersion: "v1.33.0"},
		{name: "auto on Kubernetes 1.37 mounts the gate image", values: "gate: {delivery: auto}", wantImageVolume: true},
		{name: "auto on Kubernetes 1.35 mounts the gate image", values: "gate: {delivery: auto}", kubeVersion: "v1.35.0", wantImageVolume: true},
		{name: "auto on Kubernetes 1.34 copies the gate", values: "gate: {delivery: auto}", kubeVersion: "v1.34.2"},
		{name: "imageVolume is used as asked", values: "gate: {delivery: imageVolume}", kubeVersion: "v1.34.2", wantImageVolume: true},
		{name: "initContainer is used as asked", values: "gate: {delivery: initContainer}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			values := "gate: {image: {tag: dev, pullPolicy: Always}}\n"
			if c.values != "" {
				values = "gate: {image: {tag: dev, pullPolicy: Always}, " + strings.TrimPrefix(c.values, "gate: {")
			}
			spec := render(t, renderOptions{values: values, kubeVersion: c.kubeVersion}).job(t).Spec.Template.Spec
			if len(spec.Volumes) != 1 || spec.Volumes[0].Name != "premigrate" {
				t.Fatalf("volumes %+v, want one named premigrate", spec.Volumes)
			}
			vol := spec.Volumes[0]
			if c.wantImageVolume {
				if vol.Image == nil || vol.Image.Reference != "ghcr.io/premigrate/gate:dev" || vol.Image.PullPolicy != corev1.PullAlways {
					t.Errorf("volume %+v, want an image volume of ghcr.io/premigrate/gate:dev pulled Always", vol)
				}
				if len(spec.InitContainers) != 0 {
					t.Errorf("init containers %+v, want none", spec.InitContainers)
				}
				return
			}
			if vol.EmptyDir == nil {
				t.Errorf("volume %+v, want an emptyDir", vol)
			}
			inst := container(t, spec.InitContainers, "install-gate")
			if inst.Image != "ghcr.io/premigrate/gate:dev" || inst.ImagePullPolicy != corev1.PullAlways || !equalStrings(inst.Command, []string{"/gate"}) ||
				!equalStrings(inst.Args, []string{"copy", "--to", "/premigrate/gate"}) {
				t.Errorf("install-gate image %q policy %q command %v args %v", inst.Image, inst.ImagePullPolicy, inst.Command, inst.Args)
			}
			if len(inst.VolumeMounts) != 1 || inst.VolumeMounts[0].MountPath != "/premigrate" || inst.VolumeMounts[0].ReadOnly {
				t.Errorf("install-gate mounts %+v, want the emptyDir writable at /premigrate", inst.VolumeMounts)
			}
		})
	}
}
