//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/premigrate/premigrate/test/framework"
)

// Renders that do not lie (issue 23 item 10): `helm upgrade --dry-run=server` is how an operator previews an
// upgrade, so it must show what the upgrade then applies, object for object: the hook Job of the same identity,
// the embedded database's password kept (not a new one), the records' owner. assertDryRunShowsTheUpgrade takes
// the preview before the upgrade and compares it with what Helm stored for the real one, hooks included; as its
// negative control, the client-side preview (`--dry-run=client`, no lookup: no owner, the password given) must differ
// from it, or the comparison could not see a lying render. Without the database's password that client-side
// preview refuses (it would generate another password on every render); given it, it renders and differs.

// objectsOf splits rendered YAML into its objects, keyed by kind and name, each as canonical JSON.
func objectsOf(manifests ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range manifests {
		for _, chunk := range documentSeparator.Split(m, -1) {
			j, err := yaml.YAMLToJSON([]byte(chunk))
			if err != nil {
				return nil, fmt.Errorf("parsing a rendered object: %w", err)
			}
			var doc map[string]any
			if err := json.Unmarshal(j, &doc); err != nil {
				return nil, fmt.Errorf("parsing a rendered object: %w", err)
			}
			if doc == nil {
				continue // a comment or nothing
			}
			canonical, err := json.Marshal(doc) // maps in key order: one spelling per object
			if err != nil {
				return nil, err
			}
			meta, _ := doc["metadata"].(map[string]any)
			out[fmt.Sprintf("%v/%v", doc["kind"], meta["name"])] = string(canonical)
		}
	}
	return out, nil
}

var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// previewUpgrade returns the objects `helm upgrade --dry-run=MODE` shows for values, hooks included.
func previewUpgrade(r *framework.Release, chart string, values map[string]any, mode string) map[string]string {
	r.T.Helper()
	out, err := env.Run.Stdout(r.T, r.Helm, "upgrade", r.Name, chart, "-n", r.Namespace, "--values", r.ValuesFile(values),
		"--dry-run="+mode, "-o", "json")
	if err != nil {
		r.T.Fatalf("previewing the upgrade: %v", err)
	}
	var rel struct {
		Manifest string `json:"manifest"`
		Hooks    []struct {
			Manifest string `json:"manifest"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rel); err != nil {
		r.T.Fatalf("reading the preview of the upgrade (--dry-run=%s -o json): %v", mode, err)
	}
	docs := []string{rel.Manifest}
	for _, h := range rel.Hooks {
		docs = append(docs, h.Manifest)
	}
	objs, err := objectsOf(docs...)
	if err != nil {
		r.T.Fatalf("the preview of the upgrade (--dry-run=%s): %v", mode, err)
	}
	return objs
}

// databasePassword is the embedded database's password, from the Secret the release keeps.
func databasePassword(r *framework.Release) string {
	r.T.Helper()
	sec, err := env.Client.CoreV1().Secrets(r.Namespace).Get(context.Background(), r.Fullname()+"-postgresql", metav1.GetOptions{})
	if err != nil {
		r.T.Fatalf("reading the database's password: %v", err)
	}
	return string(sec.Data["password"])
}

// applied returns the objects Helm stored for the release's current revision, hooks included.
func applied(r *framework.Release) map[string]string {
	r.T.Helper()
	manifest, err := env.Run.Stdout(r.T, r.Helm, "get", "manifest", r.Name, "-n", r.Namespace)
	if err != nil {
		r.T.Fatal(err)
	}
	hooks, err := env.Run.Stdout(r.T, r.Helm, "get", "hooks", r.Name, "-n", r.Namespace)
	if err != nil {
		r.T.Fatal(err)
	}
	objs, err := objectsOf(manifest, hooks)
	if err != nil {
		r.T.Fatalf("the release's stored objects: %v", err)
	}
	return objs
}

// jobsOf lists the Jobs of objs (kind/name keys), sorted.
func jobsOf(objs map[string]string) []string {
	var jobs []string
	for k := range objs {
		if strings.HasPrefix(k, "Job/") {
			jobs = append(jobs, k)
		}
	}
	sort.Strings(jobs)
	return jobs
}

// objectDiff names the objects that are in only one of a and b, or differ between them.
func objectDiff(a, b map[string]string) []string {
	var diff []string
	for k, va := range a {
		vb, ok := b[k]
		switch {
		case !ok:
			diff = append(diff, k+" only in the preview")
		case va != vb:
			diff = append(diff, k+" differs")
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			diff = append(diff, k+" only in the upgrade")
		}
	}
	sort.Strings(diff)
	return diff
}

// upgradeAsPreviewed previews an upgrade on the server and on the client, runs it (helm upgrade --install
// --wait, how long it took is returned), and checks that the server's preview is what the upgrade applied,
// that the client's refuses without the database's password, and that given it, the client's differs (the
// control).
func upgradeAsPreviewed(r *framework.Release, values map[string]any) time.Duration {
	r.T.Helper()
	server := previewUpgrade(r, env.Chart, values, "server")
	// no render rotates the embedded database's password: the client-side render, which cannot read the
	// Secret back, refuses to generate one
	_, err := env.Run.Stdout(r.T, r.Helm, "upgrade", r.Name, env.Chart, "-n", r.Namespace, "--values", r.ValuesFile(values),
		"--dry-run=client", "-o", "json")
	if err == nil || !strings.Contains(err.Error(), "postgresql.auth.password is required when the chart is rendered without a cluster") {
		r.T.Errorf("helm upgrade --dry-run=client without a password: %v; want the refusal naming postgresql.auth.password (each client-side render would generate another password)", err)
	}
	client := previewUpgrade(r, env.Chart, framework.Merge(values, map[string]any{
		"postgresql": map[string]any{"auth": map[string]any{"password": databasePassword(r)}},
	}), "client")
	_, took := r.MustDeploy(values)
	applied := applied(r)
	if d := objectDiff(server, applied); len(d) > 0 {
		r.T.Errorf("helm upgrade --dry-run=server showed another upgrade than the one applied: %s", strings.Join(d, "; "))
	}
	// without the cluster the preview still shows the Jobs the upgrade runs, by name (the pre-upgrade hook, not a
	// plain Job): only what the cluster alone knows differs inside them (the records' owner)
	if jc, ja := jobsOf(client), jobsOf(applied); !slices.Equal(jc, ja) {
		r.T.Errorf("helm upgrade --dry-run=client showed the Jobs %v, the upgrade ran %v", jc, ja)
	}
	d := objectDiff(client, applied)
	if len(d) == 0 {
		r.T.Errorf("control: the client-side preview (no lookup) equals the applied upgrade: the comparison cannot see a render that lies")
	}
	r.T.Logf("helm upgrade --dry-run=server showed the %d objects the upgrade applied; the client-side preview differs (%s)",
		len(applied), strings.Join(d, "; "))
	return took
}
