package render

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The library chart premigrate-lib, as another chart adopts it: the example chart examples/ledger.
const (
	exampleDir     = "../../examples/ledger/chart"
	ledgerFullname = "demo-ledger"
)

func renderLedger(t *testing.T, values string, upgrade bool) *result {
	t.Helper()
	return render(t, renderOptions{chart: exampleDir, values: values, upgrade: upgrade, records: ledgerFullname + "-migrations"})
}

func TestTheExampleChartTakesTheWholeMigrationMachineryFromTheLibrary(t *testing.T) {
	r := renderLedger(t, "", false)
	// the migration's Role and RoleBinding carry the Job's name (an install's Job is a plain one: "-migrate-<identity>")
	for _, want := range []string{"ConfigMap/demo-ledger-migrations", "ServiceAccount/demo-ledger-migrate", "Role/" + r.job(t).Name,
		"RoleBinding/" + r.job(t).Name, "Role/demo-ledger-gate", "RoleBinding/demo-ledger-gate"} {
		kind, name, _ := strings.Cut(want, "/")
		_, ok := r.find(kind, name)
		assert.True(t, ok, "%s is not rendered; have %s", want, r.summary())
	}
	job := r.job(t)
	id := job.Labels["premigrate.io/identity"]
	require.Len(t, id, 10)
	assert.True(t, isPlainJobName("demo-ledger", job.Name), "an install runs a plain Job named by its spec: %s", job.Name)
	migrate := container(t, job.Spec.Template.Spec.Containers, "migrate")
	assert.Equal(t, "premigrate/ledger:1.0.0", migrate.Image)
	assert.Equal(t, []string{"/ledger", "migrate", "--to", "1"}, afterDashes(migrate.Command, migrate.Args))

	d := mustFind[*appsv1.Deployment](t, r, "Deployment", ledgerFullname)
	assert.Equal(t, id, d.Spec.Template.Annotations["premigrate.io/identity"], "the pods wait for the Job's identity")
	gate := container(t, d.Spec.Template.Spec.InitContainers, "wait-for-migration")
	assert.Contains(t, strings.Join(gate.Args, " "), "--job "+job.Name, "the gate accepts only this release's Job")
	assert.Equal(t, "ghcr.io/premigrate/gate:"+libraryAppVersion(t), gate.Image, "the gate's tag is the library's appVersion, not the app's")
	app := container(t, d.Spec.Template.Spec.Containers, "ledger")
	assert.Empty(t, app.VolumeMounts, "the app container gets no API token")
	assert.Contains(t, envNames(app.Env), "PREMIGRATE_IDENTITY")
	require.NotEmpty(t, d.Spec.Template.Spec.Volumes)
	assert.Equal(t, "premigrate-gate-token", d.Spec.Template.Spec.Volumes[0].Name)

	// the app's Service must never send traffic to the migration pod, which shares name and instance labels
	svc := mustFind[*corev1.Service](t, r, "Service", ledgerFullname)
	assert.False(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(job.Spec.Template.Labels)),
		"the Service selects the migration pod")
}

func TestTheExampleChartsUpgradesRunThePreUpgradeHookAndANewSchemaIsANewIdentity(t *testing.T) {
	install := renderLedger(t, "schemaVersion: 1\n", false).job(t)
	same := renderLedger(t, "schemaVersion: 1\n", true).job(t)
	next := renderLedger(t, "schemaVersion: 2\n", true).job(t)
	assert.Equal(t, install.Labels["premigrate.io/identity"], same.Labels["premigrate.io/identity"], "the same values keep the identity")
	assert.NotEqual(t, same.Labels["premigrate.io/identity"], next.Labels["premigrate.io/identity"], "a new schema is a new identity")
	assert.Equal(t, "demo-ledger-migrate", next.Name)
	assert.Equal(t, "pre-upgrade", next.Annotations["helm.sh/hook"])
	assert.Equal(t, int32(300), *next.Spec.TTLSecondsAfterFinished, "the example's TTL is on its hook Jobs")
}

// The library's preInstallHook is off by default (a chart's database may be created by the release) and, set,
// makes the install's migration the pre-install,pre-upgrade hook.
func TestTheLibrarysPreInstallHookIsOptIn(t *testing.T) {
	assert.Equal(t, "", renderLedger(t, "", false).job(t).Annotations["helm.sh/hook"], "by default an install runs a plain Job")
	job := renderLedger(t, "migrations: {preInstallHook: true}\n", false).job(t)
	assert.Equal(t, "demo-ledger-migrate", job.Name)
	assert.Equal(t, "pre-install,pre-upgrade", job.Annotations["helm.sh/hook"])
	assert.Equal(t, "pre-install,pre-upgrade", renderLedger(t, "migrations: {preInstallHook: true}\n", true).job(t).Annotations["helm.sh/hook"])
}

// TestTheMigrationPodIsConfigurableAndEachSettingIsANewJobOfTheSameIdentity sets each migration-pod value of
// the premigrate chart (which maps them onto the library's pod values) and reads it back from the Job: a new
// plain Job (never a patch of an immutable pod template), and the same identity (no migration runs again).
func TestTheMigrationPodIsConfigurableAndEachSettingIsANewJobOfTheSameIdentity(t *testing.T) {
	baseJob := render(t, renderOptions{}).job(t)
	base := baseJob.Labels["premigrate.io/identity"]
	cases := []struct {
		name   string
		values string
		check  func(t *testing.T, job *batchv1.Job)
	}{
		{"a node selector puts the migration on an arm64 pool", "migration:\n  nodeSelector: {kubernetes.io/arch: arm64}\n",
			func(t *testing.T, j *batchv1.Job) {
				assert.Equal(t, "arm64", j.Spec.Template.Spec.NodeSelector["kubernetes.io/arch"])
			}},
		{"tolerations let it run on a tainted pool", "migration:\n  tolerations: [{key: dedicated, operator: Equal, value: db, effect: NoSchedule}]\n",
			func(t *testing.T, j *batchv1.Job) {
				require.Len(t, j.Spec.Template.Spec.Tolerations, 1)
				assert.Equal(t, "dedicated", j.Spec.Template.Spec.Tolerations[0].Key)
			}},
		{"affinity is passed through", "migration:\n  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [db]}]}]}}}\n",
			func(t *testing.T, j *batchv1.Job) {
				require.NotNil(t, j.Spec.Template.Spec.Affinity)
				assert.NotNil(t, j.Spec.Template.Spec.Affinity.NodeAffinity)
			}},
		{"a priority class is set", "migration:\n  priorityClassName: migrations\n",
			func(t *testing.T, j *batchv1.Job) {
				assert.Equal(t, "migrations", j.Spec.Template.Spec.PriorityClassName)
			}},
		{"pod annotations and labels are set", "migration:\n  podAnnotations: {sidecar.istio.io/inject: \"false\"}\n  podLabels: {team: ledger}\n",
			func(t *testing.T, j *batchv1.Job) {
				assert.Equal(t, "false", j.Spec.Template.Annotations["sidecar.istio.io/inject"])
				assert.Equal(t, "ledger", j.Spec.Template.Labels["team"])
			}},
		{"a CA bundle is mounted", "migration:\n  extraVolumes: [{name: ca, configMap: {name: db-ca}}]\n  extraVolumeMounts: [{name: ca, mountPath: /etc/db-ca, readOnly: true}]\n",
			func(t *testing.T, j *batchv1.Job) {
				assert.Contains(t, volumeNames(j.Spec.Template.Spec.Volumes), "ca")
				m := container(t, j.Spec.Template.Spec.Containers, "migrate")
				assert.Contains(t, mountPaths(m.VolumeMounts), "/etc/db-ca")
			}},
		{"an init container runs after install-gate", "migration:\n  initContainers: [{name: fetch-secrets, image: busybox:1}]\n",
			func(t *testing.T, j *batchv1.Job) {
				ic := j.Spec.Template.Spec.InitContainers
				require.Len(t, ic, 2)
				assert.Equal(t, []string{"install-gate", "fetch-secrets"}, []string{ic[0].Name, ic[1].Name})
				assert.NotNil(t, ic[1].SecurityContext, "it gets the restricted container security context")
			}},
		{"a database proxy runs as a native sidecar", "migration:\n  sidecars: [{name: db-proxy, image: proxy:1, restartPolicy: Always}]\n",
			func(t *testing.T, j *batchv1.Job) {
				p := container(t, j.Spec.Template.Spec.InitContainers, "db-proxy")
				require.NotNil(t, p.RestartPolicy)
				assert.Equal(t, corev1.ContainerRestartPolicyAlways, *p.RestartPolicy)
			}},
		{"a proxy listed in initContainers starts before the init container after it, then the sidecars",
			"migration:\n  initContainers: [{name: db-proxy, image: proxy:1, restartPolicy: Always}, {name: wait-for-db, image: app:1}]\n  sidecars: [{name: metrics, image: m:1, restartPolicy: Always}]\n",
			func(t *testing.T, j *batchv1.Job) {
				var names []string
				for _, c := range j.Spec.Template.Spec.InitContainers {
					names = append(names, c.Name)
				}
				assert.Equal(t, []string{"install-gate", "db-proxy", "wait-for-db", "metrics"}, names, "the kubelet starts them in this order")
				p := container(t, j.Spec.Template.Spec.InitContainers, "db-proxy")
				require.NotNil(t, p.RestartPolicy)
				assert.Equal(t, corev1.ContainerRestartPolicyAlways, *p.RestartPolicy)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job := render(t, renderOptions{values: c.values}).job(t)
			c.check(t, job)
			assert.Equal(t, base, job.Labels["premigrate.io/identity"], "the setting is no input of the migration")
			assert.NotEqual(t, baseJob.Name, job.Name, "the setting is part of the Job's spec: a new plain Job")
		})
	}
}

func TestTheMigrationPodTakesTheAppsSchedulingUnlessTheMigrationSaysOtherwise(t *testing.T) {
	app := "nodeSelector: {pool: apps}\ntolerations: [{key: apps, operator: Exists}]\npodAnnotations: {a: b}\n"
	inherited := render(t, renderOptions{values: app}).job(t)
	assert.Equal(t, "apps", inherited.Spec.Template.Spec.NodeSelector["pool"])
	assert.Len(t, inherited.Spec.Template.Spec.Tolerations, 1)
	assert.Equal(t, "b", inherited.Spec.Template.Annotations["a"])
	own := render(t, renderOptions{values: app + "migration:\n  nodeSelector: {pool: db}\n  tolerations: []\n  podAnnotations: {}\n"}).job(t)
	assert.Equal(t, "db", own.Spec.Template.Spec.NodeSelector["pool"])
	assert.Empty(t, own.Spec.Template.Spec.Tolerations)
	assert.NotContains(t, own.Spec.Template.Annotations, "a")
}

func TestTheMigrationsServiceAccountCarriesACloudIdentity(t *testing.T) {
	r := render(t, renderOptions{values: "migration:\n  serviceAccount:\n    annotations: {iam.gke.io/gcp-service-account: migrate@p.iam.gserviceaccount.com}\n"})
	sa := mustFind[*corev1.ServiceAccount](t, r, "ServiceAccount", fullname+"-migrate")
	assert.Equal(t, "migrate@p.iam.gserviceaccount.com", sa.Annotations["iam.gke.io/gcp-service-account"])
}

func TestASidecarWithoutRestartPolicyAlwaysIsRefused(t *testing.T) {
	_, err := renderValues(renderOptions{values: "migration:\n  sidecars: [{name: db-proxy, image: proxy:1, restartPolicy: Never}]\n"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sidecars[db-proxy] needs restartPolicy: Always")
}

func TestTheLibraryChecksItsOwnValues(t *testing.T) {
	cases := []struct{ values, want string }{
		{"migrations: {gate: {mode: poll}}\n", `gate.mode "poll" is not one of watch, command, none`},
		{"migrations: {gate: {mode: command}}\n", "gate.mode command needs gate.command or gate.args"},
		{"migrations: {gate: {delivery: magic}}\n", `gate.delivery "magic" is not one of`},
		{"migrations: {gate: {waitIn: sidecar}}\n", `gate.waitIn "sidecar" is not one of initContainer, app`},
		{"migrations: {gate: {waitIn: schedulingGate, deployment: {replicas: 0}}}\n", "gate.deployment.replicas must be a whole number of at least 1"},
		{"migrations: {gate: {waitIn: schedulingGate, deployment: {replicas: 1.5}}}\n", "gate.deployment.replicas must be a whole number of at least 1, not float64 1.5"},
		{"migrations: {gate: {waitIn: schedulingGate, deployment: {tolerations: {key: pool}}}}\n", "gate.deployment.tolerations must be a list"},
		{"migrations: {gate: {waitIn: schedulingGate, deployment: {nodeSelector: [pool]}}}\n", "gate.deployment.nodeSelector must be a map"},
		{"migrations: {pod: {sidecars: [{name: p, image: x}]}}\n", "pod.sidecars[p] needs restartPolicy: Always"},
		{"migrations: {database: {object: secret/db}}\n", `database.object "secret/db" must be pod/NAME or persistentvolumeclaim/NAME`},
		{"migrations: {database: {urlSecretName: db}}\n", `database.urlSecretName ("db") and database.urlSecretKey ("") go together`},
		{"migrations: {hookWeight: -10}\n", "hookWeight -10 must be above -10"},
		{"migrations: {preInstallHook: \"yes\"}\n", "preInstallHook must be true or false, not string yes"},
		{"migrations: {guard: {enabled: \"yes\"}}\n", "guard.enabled must be true or false, not string yes"},
		{"migrations: {guard: true}\n", "guard must be a map ({enabled: true}), not bool true"},
		{"migrations: {guard: {enabled: true, workloads: deployment/ledger}}\n", "guard.workloads must be a non-empty list of KIND/NAME"},
		{"migrations: {guard: {enabled: true, workloads: []}}\n", "guard.workloads must be a non-empty list of KIND/NAME"},
		{"migrations: {guard: {enabled: true, workloads: [cronjob/report]}}\n", "guard.workloads: cronjob/report is not KIND/NAME"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			_, err := renderValues(renderOptions{chart: exampleDir, values: c.values})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// libraryAppVersion is the appVersion in the library's Chart.yaml.
func libraryAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(libDir + "/Chart.yaml")
	require.NoError(t, err)
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(b, &c))
	return c.AppVersion
}

// afterDashes is the user's command line of `gate run ... -- CMD`, then the container's args.
func afterDashes(command, args []string) []string {
	for i, c := range command {
		if c == "--" {
			return append(append([]string{}, command[i+1:]...), args...)
		}
	}
	return nil
}

func volumeNames(vs []corev1.Volume) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func mountPaths(ms []corev1.VolumeMount) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MountPath)
	}
	return out
}

// TestTheLibraryWorksPastedIntoAChartWithoutTheDependency renders the example with the library's template files
// copied into its own templates/ folder instead of the dependency, as the library's README offers for charts
// that take no dependency: the rendering is the same.
func TestTheLibraryWorksPastedIntoAChartWithoutTheDependency(t *testing.T) {
	withDependency := renderLedger(t, "", false)
	ch, err := loader.Load(exampleDir)
	require.NoError(t, err)
	lib, err := loader.Load(libDir)
	require.NoError(t, err)
	ch.SetDependencies()
	ch.Metadata.Dependencies = nil
	ch.Templates = append(ch.Templates, lib.Templates...)
	top, err := chartutil.ToRenderValues(ch, map[string]any{}, chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	require.NoError(t, err)
	files, err := engine.Render(ch, top)
	require.NoError(t, err)
	pasted, err := decode(files)
	require.NoError(t, err)
	require.Equal(t, withDependency.summary(), pasted.summary())
	for _, o := range withDependency.objects {
		p, ok := pasted.find(o.kind, o.name())
		require.True(t, ok)
		assert.Equal(t, o.obj, p.obj, "%s/%s differs", o.kind, o.name())
	}
}

func TestInCommandModeTheLibrarysPodsAskTheDatabaseWithTheAppsOwnCheckAndNoAPIAccess(t *testing.T) {
	r := renderLedger(t, "migrations: {gate: {mode: command, args: [--check]}}", true)
	d := mustFind[*appsv1.Deployment](t, r, "Deployment", ledgerFullname)
	w := container(t, d.Spec.Template.Spec.InitContainers, "wait-for-migration")
	job := container(t, r.job(t).Spec.Template.Spec.Containers, "migrate")
	assert.Equal(t, job.Image, w.Image, "the migration's image")
	assert.Equal(t, []string{"/ledger", "migrate"}, w.Command, "the migration's command")
	assert.Equal(t, []string{"--check"}, w.Args)
	_, ok := envVar(w.Env, "LEDGER_DATABASE_URL")
	assert.True(t, ok, "the migration's environment: %v", envNames(w.Env))
	assert.Equal(t, corev1.TerminationMessageFallbackToLogsOnError, w.TerminationMessagePolicy, "the pod's status says why it waits")
	assert.Empty(t, w.VolumeMounts, "no API token")
	for _, kind := range []string{"Role", "RoleBinding"} {
		_, found := r.find(kind, ledgerFullname+"-gate")
		assert.False(t, found, "command mode needs no %s for the gate", kind)
	}
	assert.Greater(t, valueOf(d.Spec.ProgressDeadlineSeconds), any(int32(600)), "the rollout waits for the migration's deadline")
}

// premigrate-lib.all renders everything the values turn on: with the contract step, the guard and the check of
// the previous contract on, their objects come from the same one include as the migration's, and none of them
// without.
func TestTheLibrarysAllRendersTheContractTheGuardAndTheRequireCheckOnlyWhenTheValuesTurnThemOn(t *testing.T) {
	optional := []string{"Job/demo-ledger-contract ", "ServiceAccount/demo-ledger-contract ", "Role/demo-ledger-contract ",
		"ValidatingAdmissionPolicy/", "ValidatingAdmissionPolicyBinding/", "Role/demo-ledger-migrate-guard ", "Job/demo-ledger-require-"}
	off := renderLedger(t, "", true).summary()
	on := renderLedger(t, "contract: true\nmigrations: {guard: {enabled: true}, requirePreviousContract: true}\n", true).summary()
	for _, want := range optional {
		assert.NotContains(t, off, want, "rendered with the values off")
		assert.Contains(t, on, want, "not rendered with the values on")
	}
}
