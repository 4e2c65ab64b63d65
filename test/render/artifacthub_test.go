package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

// TestEveryPublishedChartCarriesCompleteArtifactHubAnnotations reads the annotations Artifact Hub shows: the
// license, the images (tagged with the chart's appVersion, or PostgreSQL's major version), links that point to
// this project's docs, and, for the application chart, the changes of this version.
func TestEveryPublishedChartCarriesCompleteArtifactHubAnnotations(t *testing.T) {
	for _, c := range []struct {
		dir     string
		changes bool
	}{{"../../charts/premigrate", true}, {"../../charts/premigrate-lib", false}} {
		t.Run(c.dir, func(t *testing.T) {
			meta, err := chartutil.LoadChartfile(c.dir + "/Chart.yaml")
			require.NoError(t, err)
			a := meta.Annotations
			assert.Equal(t, "Apache-2.0", a["artifacthub.io/license"])

			var images []struct{ Name, Image string }
			require.NoError(t, yaml.Unmarshal([]byte(a["artifacthub.io/images"]), &images), "artifacthub.io/images")
			require.NotEmpty(t, images, "artifacthub.io/images")
			for _, im := range images {
				tag := im.Image[strings.LastIndex(im.Image, ":")+1:]
				if !strings.HasPrefix(im.Image, "ghcr.io/premigrate/postgres:") {
					assert.Equal(t, meta.AppVersion, tag, "image %s is not tagged with appVersion", im.Image)
				}
			}

			var links []struct{ Name, URL string }
			require.NoError(t, yaml.Unmarshal([]byte(a["artifacthub.io/links"]), &links), "artifacthub.io/links")
			require.NotEmpty(t, links, "artifacthub.io/links")
			for _, l := range links {
				assert.NotEmpty(t, l.Name)
				prefix := meta.Home + "/blob/main/"
				if assert.True(t, strings.HasPrefix(l.URL, prefix), "link %s is not under %s", l.URL, prefix) {
					assert.FileExists(t, "../../"+strings.TrimPrefix(l.URL, prefix), "link %s", l.Name)
				}
			}

			if c.changes {
				var changes []struct{ Kind, Description string }
				require.NoError(t, yaml.Unmarshal([]byte(a["artifacthub.io/changes"]), &changes), "artifacthub.io/changes")
				require.NotEmpty(t, changes, "artifacthub.io/changes")
				for _, ch := range changes {
					assert.Contains(t, []string{"added", "changed", "deprecated", "removed", "fixed", "security"}, ch.Kind)
					assert.NotEmpty(t, ch.Description)
				}
			}
		})
	}
}
