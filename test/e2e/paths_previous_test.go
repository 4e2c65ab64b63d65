//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	upgradeFromPreviousScenarios = scenarios.DeclareEach(framework.EveryPath, "upgrade-from-previous", framework.In(framework.Matrix, "helm3"), framework.In(framework.CI, "helm4"))
)

// previousChart extracts the chart of the previous release (hack/previous-release) from git and returns its
// folder and version. It fails, never skips, when the commit is not in this clone.
func previousChart(t *testing.T) (string, string) {
	t.Helper()
	f, err := os.Open(filepath.Join(env.RepoRoot, "hack", "previous-release"))
	if err != nil {
		t.Fatalf("reading hack/previous-release: %v", err)
	}
	defer func() { _ = f.Close() }()
	fields := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			fields[k] = v
		}
	}
	version, commit := fields["version"], fields["commit"]
	if version == "" || commit == "" {
		t.Fatalf("hack/previous-release names no version and commit: %v", fields)
	}
	dir := t.TempDir()
	// PREMIGRATE_HISTORY: a repository with the history when this tree has none (the mutants' copy, hack/images.sh)
	history := env.RepoRoot
	if h := os.Getenv("PREMIGRATE_HISTORY"); h != "" {
		history = h
	}
	tarball := filepath.Join(dir, "previous.tar")
	if _, err := env.Run.Run(t, "git", "-C", history, "archive", "-o", tarball, commit, "charts/premigrate"); err != nil {
		t.Fatalf("the previous release's commit %s is not in this clone (%v): the upgrade from it cannot run", commit, err)
	}
	if _, err := env.Run.Run(t, "tar", "-x", "-f", tarball, "-C", dir); err != nil {
		t.Fatalf("extracting the previous chart: %v", err)
	}
	return filepath.Join(dir, "charts", "premigrate"), version
}

// rollBackToThePreviousChart rolls the release back to its first revision, the previous chart, then has an
// upgrade to this chart fail on its migration with Helm's rollback on failure, which rolls it back to the
// previous chart again (issue 23 item 8). Both must apply the previous chart's records ConfigMap without a
// conflict: under Helm 4's server-side apply a label the gate had written when it adopted the ConfigMap
// (helm.sh/chart, app.kubernetes.io/version of this chart) was co-owned by premigrate-gate, and the rollback
// failed half applied ("Apply failed with 2 conflicts: conflicts with "premigrate-gate""). Neither runs a
// migration that is recorded: the rollback's pods start on the install's record. schema is the database's
// version, one the previous chart's app (version 1) serves on: the demo's apps refuse a schema more than one
// version ahead (unready), as old code on a newer schema should.
func rollBackToThePreviousChart(t *testing.T, r *framework.Release, cli, version string, schema int) {
	t.Helper()
	ctx := context.Background()
	runs := r.PsqlInt("select count(*) from demo_migrate_runs")
	out, err := env.Run.Run(t, r.Helm, "rollback", r.Name, "1", "-n", r.Namespace, "--wait", "--timeout", "4m")
	if err != nil {
		t.Fatalf("rolling back to the previous chart %s (revision 1): %v\n%s", version, err, out)
	}
	prevID := r.AppIdentity(ctx)
	r.AssertWitness(ctx, prevID)
	if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
		t.Errorf("%d migration runs after the rollback to revision 1, want %d: its migration is recorded", got, runs)
	}
	var status struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal([]byte(env.Run.Must(t, r.Helm, "status", r.Name, "-n", r.Namespace, "-o", "json")), &status); err != nil || status.Version == 0 {
		t.Fatalf("reading the release's revision after the rollback: %v", err)
	}
	onFailure := "--rollback-on-failure"
	if cli == "helm3" {
		onFailure = "--atomic"
	}
	next := strconv.Itoa(schema + 1)
	failing := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v" + next},
		"migration": map[string]any{"backoffLimit": 0, "env": []any{framework.EnvVar("DEMO_FAIL_MIGRATION", next)}}})
	out, _, err = r.Deploy(failing, onFailure)
	if err == nil {
		t.Fatalf("an upgrade whose migration fails succeeded:\n%s", out)
	}
	installJob := r.Fullname() + "-migrate-" + prevID
	if cli == "helm3" && helm3RefusedTheInstallsMigration(out, installJob) {
		// Helm 3's rollback meets the previous chart's install migration, which the failed revision's manifest
		// does not list (docs/troubleshooting.md, "Helm 3: helm rollback to the install's revision fails after a
		// failed first upgrade"): v3.21 refuses it as not found, v3.22 patches the Job and drops the selector the
		// API server generated. Its way out is proven here instead: delete what the page names, roll back again.
		// Helm 4 applies server-side and is not affected.
		t.Logf("Helm 3 failed the rollback on the install's migration objects, as documented; taking the documented way out")
		deleteTheInstallsMigration(t, r, installJob)
		if out, err := env.Run.Run(t, r.Helm, "rollback", r.Name, strconv.Itoa(status.Version), "-n", r.Namespace, "--wait", "--timeout", "4m"); err != nil {
			t.Fatalf("the documented way out failed: rollback to revision %d: %v\n%s", status.Version, err, out)
		}
	} else if strings.Contains(out, "conflict") || strings.Contains(out, "rollback failed") || strings.Contains(out, "an error occurred while rolling back") {
		t.Errorf("the rollback on failure to the previous chart did not apply cleanly:\n%s", out)
	}
	history := env.Run.Must(t, r.Helm, "history", r.Name, "-n", r.Namespace, "--max", "1")
	if !strings.Contains(history, "deployed") || !strings.Contains(history, "premigrate-"+version) {
		t.Errorf("after the rollback on failure the release is not deployed on chart %s:\n%s", version, history)
	}
	if v := r.PsqlInt("select max(version) from schema_migrations"); v != schema {
		t.Errorf("schema at version %d after the failed migration, want %d", v, schema)
	}
	if got := r.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
		t.Errorf("%d successful migration runs after the rollback on failure, want %d: only the failing one ran", got, runs)
	}
	r.AssertWitness(ctx, r.AppIdentity(ctx))
}

// A release of the previous chart version upgrades to this one: the records ConfigMap, a pre-install hook
// there, becomes a release object here (gate run gives it the release's metadata and Helm adopts it).
// Each upgrade is previewed with --dry-run=server first, and the preview must be what the upgrade applies.
func TestAReleaseOfThePreviousChartUpgradesToThisOne(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, h := range helmCLIs() {
		t.Run(h.name, func(t *testing.T) {
			share(t, weightOne, 190*time.Second)
			res := scenario(t, upgradeFromPreviousScenarios[h.name], h.bin)
			ctx := context.Background()
			chart, version := previousChart(t)
			ns := env.NewNamespace(t, "prev-"+h.name, restricted)
			r := env.NewRelease(t, ns, "app", h.bin)
			// Helm 4's second upgrade also moves the pods' wait to the scheduling gate (a matrix entry of
			// gate.waitIn schedulingGate: the previous chart had no such mode, the records stay valid)
			second := waitModes()[0]
			if h.name == "helm4" {
				second = waitModes()[1]
				second.start(t, r)
			}
			out, err := env.Run.Run(t, h.bin, "upgrade", "--install", r.Name, chart, "-n", ns, "--wait", "--timeout", "4m",
				"--values", r.ValuesFile(framework.BaseValues()))
			if err != nil {
				t.Fatalf("installing the previous chart %s: %v", version, err)
			}
			if !strings.Contains(env.Run.Must(t, h.bin, "list", "-n", ns), "premigrate-"+version) {
				t.Fatalf("the installed release is not chart version %s:\n%s", version, out)
			}
			for i, tag := range []string{"v2", "v3"} {
				values := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": tag}})
				if i == 1 {
					// explicit nulls (what --reuse-values from a chart without these keys gives too): the
					// library's defaults, not `--keep "<nil>"`
					values["migration"] = map[string]any{"keepRecords": nil, "backoffLimit": nil, "activeDeadlineSeconds": nil}
					values = framework.Merge(values, second.values)
				}
				// previewed first: --dry-run=server must show what the upgrade then applies (issue 23 item 10)
				d := upgradeAsPreviewed(r, values)
				res.DurationsSec = append(res.DurationsSec, d.Seconds())
				res.Upgrades++
				id := r.AppIdentity(ctx)
				r.AssertWitness(ctx, id)
				if i == 1 {
					second.assertPodsWaitAsTheModeSays(ctx, t, r)
				}
				cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, r.AnchorName(), metav1.GetOptions{})
				if err != nil {
					t.Fatalf("upgrade %d: %v", i+1, err)
				}
				if cm.Annotations["meta.helm.sh/release-name"] != r.Name || cm.Annotations["helm.sh/hook"] != "" {
					t.Errorf("upgrade %d: records ConfigMap annotations %v: want a release object", i+1, cm.Annotations)
				}
				if _, ok := r.Records(ctx)[id]; !ok {
					t.Errorf("upgrade %d: the store lacks %s: %v", i+1, id, r.Records(ctx))
				}
				if i == 0 { // schema 2: the previous chart's app (version 1) still runs on it
					rollBackToThePreviousChart(t, r, h.name, version, 2)
				}
			}
			if v := r.PsqlInt("select max(version) from schema_migrations"); v != 3 {
				t.Errorf("schema at version %d, want 3", v)
			}
			uninstall(r)
			assertNothingLeftAfterUninstall(t, ns, map[string]bool{
				"PersistentVolumeClaim/data-" + r.Fullname() + "-postgresql-0": true,
				"Secret/" + r.Fullname() + "-postgresql":                       true,
				"ConfigMap/" + r.StoreName():                                   true,
			})
			t.Logf("chart %s upgraded to this chart twice, then uninstalled", version)
		})
	}
}

// helm3RefusedTheInstallsMigration says whether Helm 3's output is the documented failure on the install's
// migration objects: v3.21's "no ServiceAccount with the name ... found" (or the Job's, Role's, RoleBinding's)
// or v3.22's "cannot patch <the install's Job> with kind Job".
func helm3RefusedTheInstallsMigration(out, installJob string) bool {
	return strings.Contains(out, `cannot patch "`+installJob+`" with kind Job`) ||
		regexp.MustCompile(`no (ServiceAccount|Role|RoleBinding|Job) with the name "[^"]*-migrate[^"]*" found`).MatchString(out)
}

// deleteTheInstallsMigration deletes what docs/troubleshooting.md says to delete before rolling back: the
// install's Job, its Role and RoleBinding (named after the Job; the previous chart, 0.2.0, named them
// <fullname>-migrate) and the migration's ServiceAccount, each where it exists, and waits until the Job is gone.
func deleteTheInstallsMigration(t *testing.T, r *framework.Release, installJob string) {
	t.Helper()
	ctx := context.Background()
	bg := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	deletes := map[string]func() error{
		"Job " + installJob: func() error { return env.Client.BatchV1().Jobs(r.Namespace).Delete(ctx, installJob, bg) },
		"ServiceAccount " + r.Fullname() + "-migrate": func() error {
			return env.Client.CoreV1().ServiceAccounts(r.Namespace).Delete(ctx, r.Fullname()+"-migrate", bg)
		},
	}
	for _, name := range []string{installJob, r.Fullname() + "-migrate"} {
		deletes["Role "+name] = func() error { return env.Client.RbacV1().Roles(r.Namespace).Delete(ctx, name, bg) }
		deletes["RoleBinding "+name] = func() error { return env.Client.RbacV1().RoleBindings(r.Namespace).Delete(ctx, name, bg) }
	}
	for what, del := range deletes {
		if err := del(); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting the install's %s: %v", what, err)
		}
	}
	framework.WaitUntil(t, "the install's Job to be gone", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.Client.BatchV1().Jobs(r.Namespace).Get(ctx, installJob, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
