package framework

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMergeMergesMapsAtEveryDepthAndReplacesEverythingElse(t *testing.T) {
	base := map[string]any{
		"replicaCount": 2,
		"image":        map[string]any{"repository": "ghcr.io/premigrate/demo", "tag": "v1"},
		"migration":    map[string]any{"mode": "job", "env": []any{EnvVar("A", "1")}, "resources": map[string]any{"requests": map[string]any{"cpu": "10m"}}},
	}
	got := Merge(base,
		map[string]any{"image": map[string]any{"tag": "v2"}},
		map[string]any{"migration": map[string]any{"env": []any{EnvVar("B", "2")}, "resources": map[string]any{"requests": map[string]any{"memory": "32Mi"}}}},
	)
	assert.Equal(t, map[string]any{
		"replicaCount": 2,
		"image":        map[string]any{"repository": "ghcr.io/premigrate/demo", "tag": "v2"},
		"migration": map[string]any{"mode": "job", "env": []any{EnvVar("B", "2")},
			"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}}},
	}, got, "nested keys kept, the tag and the env list replaced")
}

func TestMergeLeavesItsLayersAsTheyWere(t *testing.T) {
	base := map[string]any{"image": map[string]any{"tag": "v1"}}
	got := Merge(base, map[string]any{"image": map[string]any{"tag": "v2"}})
	got["image"].(map[string]any)["pullPolicy"] = "Never"
	assert.Equal(t, map[string]any{"image": map[string]any{"tag": "v1"}}, base)
}

func TestAValueThatIsNoMapReplacesAMapAndAMapReplacesAValue(t *testing.T) {
	assert.Equal(t, map[string]any{"probe": "none", "x": map[string]any{"y": 1}},
		Merge(map[string]any{"probe": map[string]any{"path": "/"}, "x": 1}, map[string]any{"probe": "none", "x": map[string]any{"y": 1}}))
}

func TestAnEmptyMapAddsItsKeyAndRemovesNothing(t *testing.T) {
	assert.Equal(t, map[string]any{"readinessProbe": map[string]any{}, "image": map[string]any{"tag": "v1"}},
		Merge(map[string]any{"image": map[string]any{"tag": "v1"}}, map[string]any{"readinessProbe": map[string]any{}, "image": map[string]any{}}))
}

func TestTheFullnameIsTheReleaseNameWhenItNamesTheChartElseBothJoined(t *testing.T) {
	assert.Equal(t, "app-premigrate", Fullname("app"))
	assert.Equal(t, "premigrate-demo", Fullname("premigrate-demo"))
}
