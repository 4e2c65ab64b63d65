package render

import (
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// `helm upgrade --reuse-values` from a release of an older chart renders the new chart with the old chart's
// values.yaml in place of its own (Helm's reuse: the old defaults and the user's values, none of the new
// defaults). A key the old chart did not have is missing altogether, and a template that reads below it stops
// on a nil pointer ("nil pointer evaluating interface {}.enabled"), which names neither the value nor the way
// out. Each released chart's values must either upgrade or be refused, before anything is rendered, with a
// message that names the missing values. The upgrade is Helm's own (the SDK's upgrade action, its reuse of the
// stored release's chart values and config), against an in-memory release store, rendered client-side.
func TestAnUpgradeWithReuseValuesFromEveryReleasedChartNamesTheValuesItLacks(t *testing.T) {
	for _, tc := range []struct {
		version string
		values  string // the released chart's values.yaml (0.1.0's is byte for byte 0.2.0's)
		config  string // what the user gave at that install
	}{
		{"0.1.0", "testdata/released/0.2.0-values.yaml", ""},
		{"0.2.0", "testdata/released/0.2.0-values.yaml", ""},
		{"0.2.0 with the user's own values", "testdata/released/0.2.0-values.yaml", "replicaCount: 3\npostgresql: {auth: {password: kept}}"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			b, err := os.ReadFile(tc.values)
			if err != nil {
				t.Fatal(err)
			}
			oldValues, err := chartutil.ReadValues(b)
			if err != nil {
				t.Fatal(err)
			}
			config, err := chartutil.ReadValues([]byte(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			caps := chartutil.DefaultCapabilities.Copy()
			caps.KubeVersion = kubeVersion
			cfg := &action.Configuration{
				Releases:     storage.Init(driver.NewMemory()),
				KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
				Capabilities: caps,
				Log:          t.Logf,
			}
			version, _, _ := strings.Cut(tc.version, " ")
			if err := cfg.Releases.Create(&release.Release{
				Name: releaseName, Namespace: namespace, Version: 1,
				Info:   &release.Info{Status: release.StatusDeployed},
				Chart:  &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "premigrate", Version: version}, Values: oldValues.AsMap()},
				Config: config.AsMap(),
			}); err != nil {
				t.Fatal(err)
			}
			up := action.NewUpgrade(cfg)
			up.Namespace = namespace
			up.ReuseValues = true
			up.DryRun = true
			up.DryRunOption = "client"
			ch, err := loadChart(chartDir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = up.Run(releaseName, ch, map[string]any{})
			if err == nil {
				return // it upgrades
			}
			msg := err.Error()
			if strings.Contains(msg, "nil pointer") || !strings.Contains(msg, "values don't meet the specifications of the schema") {
				t.Fatalf("the upgrade failed without saying which values are missing:\n%s", msg)
			}
			for _, key := range []string{"autoscaling", "ingress", "httpRoute"} {
				if !strings.Contains(msg, "missing properties") || !strings.Contains(msg, "'"+key+"'") {
					t.Errorf("the refusal does not name %s, which %s's values lack:\n%s", key, version, msg)
				}
			}
		})
	}
}

// The schema's list of required values covers every table of values.yaml that a template reads below
// (TestAnUpgradeWithReuseValues...): a table that is not in the list must render its defaults when it is null
// (missing), or a table added to values.yaml without its place in the list would reach the templates missing
// after --reuse-values.
func TestEveryTableOfTheValuesIsRequiredByTheSchemaOrRendersWhenMissing(t *testing.T) {
	ch, err := loadChart(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(ch.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	for key, v := range ch.Values {
		if _, table := v.(map[string]any); !table || key == "global" || key == "premigrate-lib" || slices.Contains(schema.Required, key) {
			continue
		}
		t.Run(key, func(t *testing.T) {
			if _, err := renderValues(renderOptions{values: key + ": null\npostgresql: {auth: {password: pw}}"}); err != nil {
				t.Errorf("values.yaml's table %s is not in values.schema.json's required list, and it does not render when missing: %v", key, err)
			}
		})
	}
}
