package render

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// images lists every container image of every pod template the render holds, as "<kind/name> <container>: <image>".
func images(r *result) []string {
	var out []string
	for key, pt := range r.podTemplates() {
		for _, c := range append(append([]corev1.Container{}, pt.Spec.InitContainers...), pt.Spec.Containers...) {
			out = append(out, key+" "+c.Name+": "+c.Image)
		}
	}
	sort.Strings(out)
	return out
}

// Behaviour: global.imageRegistry moves every image the chart renders to a mirror, replacing each repository's
// registry (or putting one in front of a repository that names none), and the library's gate with it.
func TestGlobalImageRegistryMovesEveryImageTheChartRendersToTheMirror(t *testing.T) {
	const mirror = "mirror.example.com:5000/cache"
	cases := []struct {
		name, values string
		want         map[string]string // container -> image; every other image must start with prefix
		prefix       string
	}{
		{"no mirror: premigrate's images from ghcr.io", "", map[string]string{"app": "ghcr.io/premigrate/demo:0.3.0",
			"wait-for-migration": "ghcr.io/premigrate/gate:0.3.0", "postgresql": "ghcr.io/premigrate/postgres:15"}, "ghcr.io/premigrate/"},
		{"a mirror: the same paths below it", "global: {imageRegistry: " + mirror + "}", map[string]string{
			"app": mirror + "/premigrate/demo:0.3.0", "migrate": mirror + "/premigrate/demo:0.3.0", "install-gate": mirror + "/premigrate/gate:0.3.0",
			"wait-for-migration": mirror + "/premigrate/gate:0.3.0", "postgresql": mirror + "/premigrate/postgres:15"}, mirror + "/premigrate/"},
		{"a mirror and an app on Docker Hub (no registry named): put below it", "global: {imageRegistry: " + mirror + "}\nimage: {repository: myorg/shop, tag: '2'}\ncommand: [/shop]\n",
			map[string]string{"app": mirror + "/myorg/shop:2", "migrate": mirror + "/myorg/shop:2"}, mirror + "/"},
		{"a mirror and a migration image of its own registry, by digest", "global: {imageRegistry: " + mirror + "/}\nmigration: {image: {repository: localhost:5001/tools/migrator, digest: " + testDigest + "}}",
			map[string]string{"migrate": mirror + "/tools/migrator@" + testDigest, "app": mirror + "/premigrate/demo:0.3.0"}, mirror + "/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, renderOptions{values: c.values})
			got := map[string]string{}
			for _, line := range images(r) {
				_, img, _ := strings.Cut(line, ": ")
				fields := strings.Fields(strings.TrimSuffix(line, ": "+img))
				got[fields[len(fields)-1]] = img
				assert.True(t, strings.HasPrefix(img, c.prefix), "%s is not below %s", line, c.prefix)
			}
			for name, want := range c.want {
				assert.Equal(t, want, got[name], "container %s; all: %v", name, images(r))
			}
		})
	}

	t.Run("the demo stays the demo behind a mirror: its probes and its notes", func(t *testing.T) {
		r := render(t, renderOptions{values: "global: {imageRegistry: " + mirror + "}"})
		app := container(t, r.deployment(t).Spec.Template.Spec.Containers, "app")
		if assert.NotNil(t, app.ReadinessProbe) && assert.NotNil(t, app.ReadinessProbe.HTTPGet) {
			assert.Equal(t, "/readyz", app.ReadinessProbe.HTTPGet.Path)
		}
	})
}

func TestTheLibrarysGateFollowsTheAdoptersGlobalImageRegistryAndNothingElseOfItsImages(t *testing.T) {
	r := renderLedger(t, "global: {imageRegistry: registry.corp.example/mirror}", false)
	for _, line := range images(r) {
		if strings.Contains(line, "gate") && !strings.Contains(line, " migrate: ") && !strings.Contains(line, " ledger: ") {
			assert.Contains(t, line, ": registry.corp.example/mirror/premigrate/gate:"+libraryAppVersion(t), line)
		} else {
			assert.Contains(t, line, ": premigrate/ledger:1.0.0", "the app's and the migration's images are the adopter's: %s", line)
		}
	}
	r = renderLedger(t, "", false)
	for _, line := range images(r) {
		if strings.Contains(line, "gate") && !strings.Contains(line, " migrate: ") && !strings.Contains(line, " ledger: ") {
			assert.Contains(t, line, ": ghcr.io/premigrate/gate:", line)
		}
	}
}

// chartVersions reads version and appVersion of a chart folder.
func chartVersions(t *testing.T, dir string) (version, appVersion string) {
	t.Helper()
	b, err := os.ReadFile(dir + "/Chart.yaml")
	require.NoError(t, err)
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(b, &c))
	return c.Version, c.AppVersion
}

// The README's install and mirroring commands name what `make release` builds now (the cluster test runs the
// mirroring block against that release; this catches a version bump without a cluster).
func TestTheReadmesInstallCommandsNameTheVersionsTheReleaseBuilds(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
	version, appVersion := chartVersions(t, chartDir)
	libVersion, _ := chartVersions(t, libDir)
	for _, want := range []string{
		"helm install my-app oci://ghcr.io/premigrate/charts/premigrate --version " + version,
		"gate:" + appVersion + " demo:" + appVersion + " postgres:15 charts/premigrate:" + version + " charts/premigrate-lib:" + libVersion,
		`"oci://$MIRROR/premigrate/charts/premigrate" --version ` + version,
	} {
		assert.Contains(t, readme, want)
	}
	lib, err := os.ReadFile(libDir + "/README.md")
	require.NoError(t, err)
	assert.Contains(t, string(lib), "repository: oci://ghcr.io/premigrate/charts", "the library README's dependency names where the release pushes the library")
}
