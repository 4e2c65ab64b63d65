package render

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/premigrate/premigrate/test/framework"
)

// adoptSteps reads the library README's adoption blocks ("Adopt it"), in order.
func adoptSteps(t *testing.T) []framework.AdoptStep {
	t.Helper()
	steps, err := framework.AdoptSteps(filepath.Join(libDir, "README.md"))
	require.NoError(t, err)
	return steps
}

// helmCLI is a Helm CLI of the repository's pinned tools (make tools); missing, the test fails.
func helmCLI(t *testing.T, name string) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", name))
	require.NoError(t, err)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make tools` (the render tests render with Helm 3 and Helm 4): %v", bin, err)
	}
	return bin
}

// runIn runs bin in dir (the test's own folder when empty) with stdin, through the framework's one process
// runner, and returns its standard output; an error fails the test naming the command and its output.
func runIn(t *testing.T, dir, bin string, stdin string, args ...string) string {
	t.Helper()
	out, err := (&framework.Runner{}).RunCmd(t, framework.Cmd{Bin: bin, Args: args, Stdin: []byte(stdin), Dir: dir, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// adoptIntoHelmCreate makes `helm create myapp` with cli in a temporary folder, applies the README's steps
// literally, puts the library where `helm dependency build` would, and returns the chart's folder.
func adoptIntoHelmCreate(t *testing.T, cli string) string {
	t.Helper()
	dir := t.TempDir()
	runIn(t, dir, cli, "", "create", "myapp")
	chart := filepath.Join(dir, "myapp")
	for _, s := range adoptSteps(t) {
		s.Apply(t, &framework.Runner{}, chart)
	}
	runIn(t, "", "cp", "", "-r", libDir, filepath.Join(chart, "charts", "premigrate-lib"))
	return chart
}

// The library README's "Adopt it" is executed, not only read: its blocks, taken from the README, applied to
// `helm create` output of Helm 3 and of Helm 4, render with that Helm into a gated Deployment, with the values
// a `helm create` chart is used with (pod annotations and volumes, which broke the README's indentation before,
// another fullname) and with the migration off.
func TestTheLibraryReadmesStepsAdoptItIntoAHelmCreateChart(t *testing.T) {
	steps := adoptSteps(t)
	var did []string
	for _, s := range steps {
		did = append(did, s.Action+" "+s.File)
	}
	require.Equal(t, []string{"append Chart.yaml", "append values.yaml", "create templates/_premigrate.tpl",
		"create templates/migration.yaml", "patch templates/deployment.yaml"}, did, "the README's adoption blocks")

	for _, cliName := range []string{"helm", "helm4"} {
		cli := helmCLI(t, cliName)
		chart := adoptIntoHelmCreate(t, cli)
		for _, c := range []struct {
			name     string
			set      []string
			fullname string
			gated    bool
		}{
			{"the defaults", nil, "rel-myapp", true},
			{"pod annotations, volumes and mounts", []string{"podAnnotations.team=payments", "volumes[0].name=cache",
				"volumes[0].emptyDir.medium=Memory", "volumeMounts[0].name=cache", "volumeMounts[0].mountPath=/cache"}, "rel-myapp", true},
			{"another fullname", []string{"fullnameOverride=shop"}, "shop", true},
			{"the app's security contexts", []string{"podSecurityContext.runAsUser=1000", "podSecurityContext.fsGroup=2000",
				"securityContext.readOnlyRootFilesystem=true", "securityContext.runAsNonRoot=true"}, "rel-myapp", true},
			{"the migration off", []string{"migrations.enabled=false"}, "rel-myapp", false},
			{"argocd mode", []string{"migrations.mode=argocd"}, "rel-myapp", true},
		} {
			t.Run(cliName+" with "+c.name, func(t *testing.T) {
				args := []string{"template", "rel", chart, "--namespace", namespace}
				for _, s := range c.set {
					args = append(args, "--set", s)
				}
				r, err := decode(map[string]string{"out": runIn(t, "", cli, "", args...)})
				require.NoError(t, err, "the adopted chart's render does not decode")
				d := mustFind[*appsv1.Deployment](t, r, "Deployment", c.fullname)
				pod := d.Spec.Template.Spec
				if !c.gated {
					assert.Empty(t, pod.InitContainers, "no gate without a migration")
					_, ok := r.find("Job", c.fullname+"-migrate")
					assert.False(t, ok)
					return
				}
				job := r.job(t)
				id := job.Labels["premigrate.io/identity"]
				require.Len(t, id, 10)
				if c.name == "argocd mode" {
					assert.Equal(t, c.fullname+"-migrate", job.Name, "a Sync hook, re-created by every sync, carries the chart's name prefix")
				} else {
					assert.True(t, isPlainJobName(c.fullname, job.Name), "an install's plain Job carries the chart's name prefix and its spec's hash: %s", job.Name)
				}
				assert.Equal(t, id, d.Spec.Template.Annotations["premigrate.io/identity"])
				gate := container(t, pod.InitContainers, "wait-for-migration")
				assert.Contains(t, strings.Join(gate.Args, " "), "--identity "+id+" ")
				assert.Contains(t, envNames(container(t, pod.Containers, "myapp").Env), "PREMIGRATE_IDENTITY")
				require.NotNil(t, pod.AutomountServiceAccountToken)
				assert.False(t, *pod.AutomountServiceAccountToken, "the app container gets no API token")
				binding := mustFind[*rbacv1.RoleBinding](t, r, "RoleBinding", c.fullname+"-gate")
				require.Len(t, binding.Subjects, 1)
				assert.Equal(t, pod.ServiceAccountName, binding.Subjects[0].Name, "the gate's Role is bound to the pods' ServiceAccount")
				assert.Equal(t, []string{"python", "manage.py", "migrate"}, afterDashes(container(t, job.Spec.Template.Spec.Containers, "migrate").Command,
					container(t, job.Spec.Template.Spec.Containers, "migrate").Args))
				// the migration pod is no pod of the app: helm create's Deployment (and so its HPA) and Service
				// select on name and instance alone, and must not take it in while it runs
				jobPod := labels.Set(job.Spec.Template.Labels)
				svc := mustFind[*corev1.Service](t, r, "Service", c.fullname)
				for what, sel := range map[string]map[string]string{"Deployment": d.Spec.Selector.MatchLabels, "Service": svc.Spec.Selector} {
					require.NotEmpty(t, sel, "the %s's selector", what)
					assert.True(t, labels.SelectorFromSet(sel).Matches(labels.Set(d.Spec.Template.Labels)), "the %s selects the app's pods", what)
					assert.False(t, labels.SelectorFromSet(sel).Matches(jobPod), "the %s's selector %v takes in the migration pod %v", what, sel, jobPod)
				}
				// the migration runs the app's image, so it runs as the app does: with helm create's empty
				// contexts (an image that runs as root) it gets none, not the library's restricted default
				jobSpec := job.Spec.Template.Spec
				assert.Equal(t, pod.SecurityContext, emptyToNil(jobSpec.SecurityContext), "the migration pod's security context is the app pod's")
				assert.Equal(t, container(t, pod.Containers, "myapp").SecurityContext,
					container(t, jobSpec.Containers, "migrate").SecurityContext, "the migrate container's security context is the app container's")
				wantWave := ""
				if c.name == "argocd mode" {
					wantWave = "1"
					assert.Equal(t, "Sync", job.Annotations["argocd.argoproj.io/hook"], "the migration is an Argo CD Sync hook")
				}
				assert.Equal(t, wantWave, d.Annotations["argocd.argoproj.io/sync-wave"], "Argo CD applies the Deployment after the migration's wave")
				if c.name == "pod annotations, volumes and mounts" {
					assert.Equal(t, "payments", d.Spec.Template.Annotations["team"])
					assert.Equal(t, []string{"cache", "premigrate-gate-token"}, volumeNames(pod.Volumes))
				}
			})
		}
	}
}

// emptyToNil is a pod security context with nothing set as the Deployment's, which renders none: nil.
func emptyToNil(sc *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	if sc != nil && reflect.DeepEqual(*sc, corev1.PodSecurityContext{}) {
		return nil
	}
	return sc
}
