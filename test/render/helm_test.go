package render

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/runtime"
)

// `helm lint --strict`, through the SDK, for the defaults and every chart-testing values file.
func TestTheChartPassesStrictLint(t *testing.T) {
	sets := map[string]map[string]any{"defaults": nil}
	files, _ := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	for _, f := range files {
		vals, err := chartutil.ReadValuesFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sets[filepath.Base(f)] = vals.AsMap()
	}
	argo, _ := chartutil.ReadValues([]byte(argoValues))
	sets["argocd"] = argo.AsMap()
	for name, vals := range sets {
		lint := action.NewLint()
		lint.Strict = true
		lint.Namespace = namespace
		kv := kubeVersion
		lint.KubeVersion = &kv
		res := lint.Run([]string{chartDir}, vals)
		if res.TotalChartsLinted != 1 {
			t.Errorf("%s: linted %d charts", name, res.TotalChartsLinted)
		}
		for _, err := range res.Errors {
			t.Errorf("%s: %v", name, err)
		}
		for _, m := range res.Messages {
			t.Logf("%s: %s", name, m)
		}
	}
	// Strict lint fails a broken value, so the test above can fail.
	lint := action.NewLint()
	lint.Strict = true
	res := lint.Run([]string{chartDir}, map[string]any{"migration": map[string]any{"mode": "nope"}})
	if len(res.Errors) == 0 {
		t.Error("lint accepted migration.mode=nope")
	}
}

// A client-only `helm install --dry-run` through the SDK sorts the objects into hooks and manifest the
// way the design needs: support objects before the Job, the records ConfigMap on pre-install only.
func TestAHelmDryRunSortsTheHooksAsDesigned(t *testing.T) {
	run := func(values string, upgrade bool) (*release.Release, error) {
		t.Helper()
		cfg := &action.Configuration{Releases: storage.Init(driver.NewMemory()), Capabilities: chartutil.DefaultCapabilities.Copy()}
		in := action.NewInstall(cfg)
		in.DryRun = true
		in.ClientOnly = true
		in.IsUpgrade = upgrade
		in.ReleaseName = releaseName
		in.Namespace = namespace
		kv := kubeVersion
		in.KubeVersion = &kv
		ch, err := loadChart(chartDir)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := chartutil.ReadValues([]byte(values))
		if err != nil {
			t.Fatal(err)
		}
		return in.Run(ch, vals.AsMap())
	}
	install := func(values string, upgrade bool) *release.Release {
		t.Helper()
		rel, err := run(values, upgrade)
		if err != nil {
			t.Fatalf("dry-run install: %v", err)
		}
		return rel
	}
	// a client-only render cannot read the embedded database's password back: an install's leaves it to the
	// cluster (a Secret without data, filled by a Job), an upgrade's refuses
	if rel, err := run("", false); err != nil || !strings.Contains(rel.Manifest, "premigrate.io/password: generated-in-cluster") {
		t.Errorf("a client-only dry-run install with the embedded database and no password: %v; want the Secret left to the cluster", err)
	}
	if _, err := run("", true); err == nil || !strings.Contains(err.Error(), "postgresql.auth.password is required when the chart is rendered without a cluster") {
		t.Errorf("a client-only dry-run upgrade with the embedded database and no password: %v, want the refusal naming postgresql.auth.password", err)
	}
	const embedded = "postgresql: {auth: {password: rendered-client-side}}"
	hooks := func(rel *release.Release) map[string]string {
		out := map[string]string{}
		for _, h := range rel.Hooks {
			var events []string
			for _, e := range h.Events {
				events = append(events, e.String())
			}
			sort.Strings(events)
			out[h.Kind+"/"+h.Name] = strings.Join(events, ",")
		}
		return out
	}

	// An install with an external database: the migration, its ServiceAccount, Role and RoleBinding are
	// pre-install,pre-upgrade hooks (the database exists before the release); the records ConfigMap is a
	// release object.
	if got, hook := hooks(install(externalDB, false)), "pre-install,pre-upgrade"; len(got) != 5 || got["Job/"+fullname+"-migrate"] != hook ||
		got["ServiceAccount/"+fullname+"-migrate"] != hook || got["Role/"+fullname+"-migrate"] != hook || got["RoleBinding/"+fullname+"-migrate"] != hook {
		t.Errorf("install hooks on an external database %v, want the migration and its RBAC as %s hooks, and helm test's Pod", got, hook)
	}
	// An install on the embedded database, or an external one with preInstallHook false: every migration
	// object is a release object (a pre-install hook would run before the database exists); the only hook is
	// helm test's Pod.
	for _, values := range []string{externalDB + "migration: {preInstallHook: false}", embedded} {
		rel := install(values, false)
		if got := hooks(rel); len(got) != 1 || got["Pod/"+fullname+"-test"] != "test" {
			t.Errorf("values %q: install hooks %v, want helm test's Pod only", values, got)
		}
		for _, want := range []string{"kind: Deployment", "name: " + fullname + "-migrate-", "name: " + fullname + "-migrations"} {
			if !strings.Contains(rel.Manifest, want) {
				t.Errorf("values %q: the install manifest lacks %q", values, want)
			}
		}
		if !strings.Contains(rel.Info.Notes, "Migration mode: hook") {
			t.Errorf("notes:\n%s", rel.Info.Notes)
		}
	}
	// An upgrade rendered without a cluster (client-only dry run, helm diff upgrade) cannot tell whether the
	// release's records exist: it shows what an upgrade of an installed release runs, the migration and its RBAC
	// as pre-upgrade hooks (a release whose records are missing gets a plain Job from a render that reads the
	// cluster: migration_test.go).
	if got, hook := hooks(install(embedded, true)), "pre-upgrade"; len(got) != 5 || got["Job/"+fullname+"-migrate"] != hook ||
		got["ServiceAccount/"+fullname+"-migrate"] != hook || got["Role/"+fullname+"-migrate"] != hook || got["RoleBinding/"+fullname+"-migrate"] != hook {
		t.Errorf("client-only upgrade hooks %v, want the migration and its RBAC as %s hooks, and helm test's Pod", got, hook)
	}

	// The chart refuses clusters older than its kubeVersion.
	cfg := &action.Configuration{Releases: storage.Init(driver.NewMemory()), Capabilities: chartutil.DefaultCapabilities.Copy()}
	in := action.NewInstall(cfg)
	in.DryRun, in.ClientOnly, in.ReleaseName, in.Namespace = true, true, releaseName, namespace
	in.KubeVersion = &chartutil.KubeVersion{Version: "v1.32.9", Major: "1", Minor: "32"}
	ch, err := loadChart(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Run(ch, nil); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("install on 1.32: %v, want a kubeVersion error", err)
	}
}

// goldenCases are the renders kept under testdata/golden. The embedded database's password comes from
// an existing Secret so that the files are stable.
var goldenCases = []struct {
	file    string
	values  string
	upgrade bool
}{
	{"default.yaml", "", false},
	{"hook-upgrade.yaml", "", true},
	{"hook-external-db.yaml", externalDB, false},
	{"job.yaml", "migration: {mode: job}\npostgresql: {auth: {password: pw}}", false},
	{"argocd.yaml", argoValues, false},
	{"gate-command.yaml", "gate: {mode: command}", false},
	{"migration-disabled.yaml", "migration: {enabled: false}", false},
}

// The rendered manifests match testdata/golden (refresh with `go test ./test/render -update`).
func TestTheRenderedManifestsMatchTheGoldenFiles(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.file, func(t *testing.T) {
			r := render(t, renderOptions{values: c.values, upgrade: c.upgrade, existing: []runtime.Object{existingPasswordSecret("golden-password")}})
			var names []string
			for name := range r.files {
				names = append(names, name)
			}
			sort.Strings(names)
			var b strings.Builder
			for _, name := range names {
				b.WriteString("---\n# Source: " + name + "\n")
				b.WriteString(strings.TrimSpace(r.files[name]) + "\n")
			}
			path := filepath.Join("testdata", "golden", c.file)
			if *update {
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(want) != b.String() {
				t.Errorf("%s differs from the render (run `go test ./test/render -update` and review the diff):\n%s", path, firstDifference(string(want), b.String()))
			}
		})
	}
}

func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n want: " + wl + "\n  got: " + gl
		}
	}
	return ""
}
