//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	fluxUpgradesScenarios             = waitModeScenarios(scenarios.Declare(framework.GitOps, framework.CI, "flux-upgrades"), scenarios.Declare(framework.GitOps, framework.Matrix, "flux-upgrades-scheduling-gate"))
	fluxFailedMigrationScenario       = scenarios.Declare(framework.GitOps, framework.Matrix, "flux-failed-migration")
	fluxHookOutputLogsControlScenario = scenarios.Declare(framework.GitOps, framework.Matrix, "flux-hook-output-logs-control")
	fluxOCIScenario                   = scenarios.Declare(framework.GitOps, framework.Matrix, "flux-oci-repository")
	argocdUpgradesScenario            = scenarios.Declare(framework.GitOps, framework.CI, "argocd-upgrades")
	argocdFailedMigrationScenario     = scenarios.Declare(framework.GitOps, framework.Matrix, "argocd-failed-migration")
	argocdSelectiveSyncScenarios      = waitModeScenarios(scenarios.Declare(framework.GitOps, framework.Matrix, "argocd-selective-sync"), scenarios.Declare(framework.GitOps, framework.Matrix, "argocd-selective-sync-scheduling-gate"))
	argocdGuardScenario               = scenarios.Declare(framework.GitOps, framework.Matrix, "argocd-guard-refuses-selective-sync")
	argocdHookModeScenario            = scenarios.Declare(framework.GitOps, framework.Matrix, "argocd-hook-mode")
	argocdReplaceScenario             = scenarios.Declare(framework.GitOps, framework.Matrix, "argocd-replace")
	argocdDeleteScenario              = scenarios.Declare(framework.GitOps, framework.Matrix, "argocd-delete-recreate")
)

// The GitOps controllers (hack/gitops.sh): Flux and Argo CD built here, installed into the cluster once per
// run, and an in-cluster Helm repository serving this checkout's chart.

var gitopsOnce = map[string]*sync.Once{"flux": {}, "argocd": {}}
var gitopsErr = map[string]error{}

// gitopsMu serializes hack/gitops.sh: both controllers' set-up packages and serves the same chart.
var gitopsMu sync.Mutex

// gitopsUsers are the scenarios that run through each controller (each calls gitopsUp once).
func gitopsUsers() map[string][]framework.Scenario {
	return map[string][]framework.Scenario{
		"flux": {fluxUpgradesScenarios[waitModes()[0].name], fluxUpgradesScenarios[waitModes()[1].name], fluxFailedMigrationScenario,
			fluxHookOutputLogsControlScenario, fluxOCIScenario, contractFluxScenario},
		"argocd": {argocdUpgradesScenario, argocdFailedMigrationScenario, argocdSelectiveSyncScenarios[waitModes()[0].name],
			argocdSelectiveSyncScenarios[waitModes()[1].name], argocdGuardScenario, argocdHookModeScenario, argocdReplaceScenario,
			argocdDeleteScenario, contractArgoScenario},
	}
}

// gitopsLeft counts, per controller, the scenarios of this run that have not yet ended their use of it; nil
// until the first gitopsUp.
var gitopsLeft map[string]int

// gitopsNamespaces are where each controller's workloads run (hack/gitops.sh).
var gitopsNamespaces = map[string]string{"flux": "flux-system", "argocd": "argocd"}

// gitopsUp installs (or finds) a controller for scenario s and refreshes the served chart, once per run. It fails the test,
// never skips it, when that cannot be done. When the last scenario of this run that uses the controller ends,
// the controller's workloads are scaled to zero (gitopsDone): idle, Argo CD's application controller still
// follows every object the other scenarios create, on a machine whose two cores are the suite's limit.
func gitopsUp(t *testing.T, s framework.Scenario, which string) {
	t.Helper()
	gitopsMu.Lock()
	defer gitopsMu.Unlock()
	if !slices.ContainsFunc(gitopsUsers()[which], func(u framework.Scenario) bool { return u.ID() == s.ID() }) {
		t.Fatalf("scenario %s runs through %s but is not among its gitopsUsers: the controller would be scaled down under it", s.ID(), which)
	}
	if gitopsLeft == nil {
		gitopsLeft = map[string]int{}
		for w, users := range gitopsUsers() {
			for _, s := range users {
				if scenarios.Selected(s.ID()) {
					gitopsLeft[w]++
				}
			}
		}
	}
	t.Cleanup(func() { gitopsDone(t, which) })
	gitopsOnce[which].Do(func() {
		for _, args := range [][]string{{"up", which}, {"charts"}} {
			start := time.Now()
			_, err := env.Run.RunCmd(t, framework.Cmd{Bin: filepath.Join(env.RepoRoot, "hack", "gitops.sh"), Args: args,
				Env: map[string]string{"KIND_CLUSTER_NAME": clusterName()}})
			fmt.Printf("e2e: hack/gitops.sh %s: %s\n", strings.Join(args, " "), time.Since(start).Round(time.Second))
			if err != nil {
				gitopsErr[which] = err
				return
			}
		}
	})
	if err := gitopsErr[which]; err != nil {
		t.Fatal(err)
	}
}

// condition is one status condition of a Flux or Argo CD object.
type condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
	ObservedGeneration int64  `json:"observedGeneration"`
}

// helmRelease is what the tests read of a Flux HelmRelease.
type helmRelease struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration     int64       `json:"observedGeneration"`
		LastHandledReconcileAt string      `json:"lastHandledReconcileAt"`
		Conditions             []condition `json:"conditions"`
		History                []struct {
			Version int    `json:"version"`
			Status  string `json:"status"`
		} `json:"history"`
	} `json:"status"`
}

func (h helmRelease) condition(typ string) condition {
	for _, c := range h.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return condition{}
}

// fluxRelease is one HelmRelease of the chart, with its release as the other scenarios know it.
type fluxRelease struct {
	*framework.Release
	force bool // spec.upgrade.force: upgrades replace the release's objects (a PUT of each)
}

const fluxManifest = `apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: premigrate
spec:
  url: http://chart-server.gitops-charts.svc.cluster.local
  interval: 1m
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: %[1]s
spec:
  releaseName: %[1]s
  interval: 10m
  timeout: 5m
  upgrade:
    force: %[3]t
  chart:
    spec:
      chart: premigrate
      sourceRef:
        kind: HelmRepository
        name: premigrate
      interval: 1m
  values: %[2]s
`

// fluxOCIManifest is docs/gitops.md's HelmRepository of type oci (the chart's OCI repository), with the CA of
// the registry on kind, and a HelmRelease of the chart's version from it. %[1]s: the registry, %[2]s: the CA
// (indented), %[3]s: the chart's version, %[4]s: the values.
const fluxOCIManifest = `apiVersion: v1
kind: Secret
metadata:
  name: registry-ca
stringData:
  ca.crt: |
%[2]s
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: premigrate
spec:
  type: oci
  url: oci://%[1]s/premigrate/charts
  interval: 10m
  certSecretRef:
    name: registry-ca
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: shop
spec:
  releaseName: shop
  interval: 10m
  timeout: 5m
  chart:
    spec:
      chart: premigrate
      version: %[3]s
      sourceRef:
        kind: HelmRepository
        name: premigrate
  values: %[4]s
`

// fluxInstallsFromAnOCIRepository pushes make release's layout to a registry on kind and lets Flux take the
// chart from it as docs/gitops.md says (a HelmRepository of type oci), with global.imageRegistry: the
// HelmRelease is Ready, the nodes pulled the gate, the demo and PostgreSQL from that registry with the
// release's digests (the kubelet's events, the pods' image IDs), and the witness sees no app before its migration.
func fluxInstallsFromAnOCIRepository(t *testing.T) {
	scenario(t, fluxOCIScenario, "flux")
	gitopsUp(t, fluxOCIScenario, "flux")
	ctx := context.Background()
	dist := releaseDist(t)
	reg := startRegistry(t)
	digests := pushRelease(t, reg, dist, reg.host+"/premigrate")
	ca, err := os.ReadFile(reg.caFile)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.NewNamespace(t, "flux-oci", restricted)
	f := fluxRelease{Release: env.NewRelease(t, ns, "shop", "")}
	values, err := json.Marshal(fluxValues(map[string]any{"global": map[string]any{"imageRegistry": reg.host}}))
	if err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(fluxOCIManifest, reg.host, "    "+strings.ReplaceAll(strings.TrimSpace(string(ca)), "\n", "\n    "),
		chartVersion(t, env.Chart), values)
	if out, err := env.Run.Input(t, []byte(manifest), env.Kubectl, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("applying the HelmRepository and the HelmRelease: %v\n%s", err, out)
	}
	if ready := f.settle(6 * time.Minute); ready.Status != "True" {
		t.Fatalf("the install from the OCI repository did not reconcile: %s: %s", ready.Reason, ready.Message)
	}
	assertPulledFromRegistry(t, ns, reg.host, map[string]string{
		"gate:" + env.AppVersion: digests["gate"], "demo:" + env.AppVersion: digests["demo"], "postgres:15": digests["postgres"],
	})
	f.AssertWitness(ctx, f.AppIdentity(ctx))
}

// fluxValues are the chart's values under Flux: its defaults but migration.hookOutputLogs false, because
// helm-controller (v1.4.0 here, up to at least v1.6.3) crashes on helm.sh/hook-output-log-policy when a hook
// fails (fluxcd/helm-controller#1562), then retries the upgrade after every restart.
func fluxValues(extra map[string]any) map[string]any {
	return framework.Merge(framework.Merge(framework.BaseValues(), map[string]any{"migration": map[string]any{"hookOutputLogs": false}}), extra)
}

// gitopsUpgrade is the values change of upgrade i (1..5): the demo's image v2..v6 and an env var. v6 drops a
// column, so its deploy says SCHEMA_ACCEPT_DATA_LOSS for its migration, as an operator would.
func gitopsUpgrade(i int) map[string]any {
	v := map[string]any{"image": map[string]any{"tag": fmt.Sprintf("v%d", i+1)}, "env": []any{framework.EnvVar("UPGRADE", fmt.Sprint(i))}}
	if i == 5 {
		v["migration"] = map[string]any{"env": []any{framework.EnvVar("SCHEMA_ACCEPT_DATA_LOSS", "true")}}
	}
	return v
}

// apply writes the HelmRelease with values (Flux's defaults otherwise: install and upgrade wait).
func (f fluxRelease) apply(values map[string]any) {
	f.T.Helper()
	b, err := json.Marshal(values)
	if err != nil {
		f.T.Fatal(err)
	}
	if out, err := env.Run.Input(f.T, []byte(fmt.Sprintf(fluxManifest, f.Name, b, f.force)), env.Kubectl, "apply", "-n", f.Namespace, "-f", "-"); err != nil {
		f.T.Fatalf("applying the HelmRelease: %v\n%s", err, out)
	}
}

var (
	helmReleases = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
	applications = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
)

// getObject reads a custom resource with client-go into out: the scenarios poll these every 500 ms, where a
// `kubectl get` would cost a quarter of the two cores (development.md).
func getObject(t *testing.T, gvr schema.GroupVersionResource, ns, name string, out any) {
	t.Helper()
	u, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	b, err := u.MarshalJSON()
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		t.Fatalf("decoding %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
}

func (f fluxRelease) get() helmRelease {
	f.T.Helper()
	var h helmRelease
	getObject(f.T, helmReleases, f.Namespace, f.Name, &h)
	return h
}

// settle waits until Flux has acted on the HelmRelease's latest generation, and returns its Ready condition.
func (f fluxRelease) settle(timeout time.Duration) condition {
	f.T.Helper()
	return f.settleWhen(timeout, func(h helmRelease) bool {
		ready := h.condition("Ready")
		return h.Status.ObservedGeneration == h.Metadata.Generation && ready.Status != "" && ready.Status != "Unknown"
	})
}

// settleFailed waits until Flux has run the Helm action of the HelmRelease's latest generation, it failed, and
// Flux has given up on that generation: Released of that generation is False (reason UpgradeFailed or
// InstallFailed) and Stalled of that generation is True (no remediation retries left: Flux's default). It
// returns the HelmRelease then. Unlike settle it does not wait for status.observedGeneration, which
// helm-controller writes only at the end of its reconcile, and it does not read Ready: helm-controller v1.4
// marks Ready Unknown ("Fulfilling prerequisites") at the start of every reconcile and leaves it so when the
// reconcile ends stalled, so Ready is False or Unknown depending on whether a second reconcile ran after the
// failure (fixed in helm-controller v1.5.0).
func (f fluxRelease) settleFailed(timeout time.Duration) helmRelease {
	f.T.Helper()
	return f.settleWhenReturning(timeout, func(h helmRelease) bool {
		released, stalled := h.condition("Released"), h.condition("Stalled")
		return released.ObservedGeneration == h.Metadata.Generation && released.Status == "False" &&
			stalled.ObservedGeneration == h.Metadata.Generation && stalled.Status == "True"
	})
}

// settleWhenReturning is settleWhen returning the HelmRelease that satisfied done.
func (f fluxRelease) settleWhenReturning(timeout time.Duration, done func(helmRelease) bool) helmRelease {
	f.T.Helper()
	var last helmRelease
	f.settleWhen(timeout, func(h helmRelease) bool {
		last = h
		return done(h)
	})
	return last
}

// settleWhen polls the HelmRelease until done says so, and returns its Ready condition; on timeout it fails
// the test with the HelmRelease's status and what helm-controller logged about its namespace.
func (f fluxRelease) settleWhen(timeout time.Duration, done func(helmRelease) bool) condition {
	f.T.Helper()
	var ready condition
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		h := f.get()
		ready = h.condition("Ready")
		return done(h), nil
	})
	if err != nil {
		status, _ := env.Run.Stdout(f.T, env.Kubectl, "get", "helmrelease", f.Name, "-n", f.Namespace, "-o", "jsonpath={.metadata.generation} {.status}")
		logs, _ := env.Run.Stdout(f.T, env.Kubectl, "logs", "-n", "flux-system", "deployment/helm-controller", "--since=15m")
		var mine []string
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, `"`+f.Namespace+`"`) || strings.Contains(l, "panic") {
				mine = append(mine, l)
			}
		}
		restarts := helmControllerRestarts(f.T)
		f.T.Fatalf("waiting %s for Flux to reconcile HelmRelease %s/%s: %v\nits generation and status: %s\n"+
			"helm-controller restarts: %d; its log lines about the namespace:\n%s",
			timeout, f.Namespace, f.Name, err, status, restarts, strings.Join(mine, "\n"))
	}
	return ready
}

// fluxInstallsAndUpgrades installs the chart (hook mode, its defaults, the pods waiting as m says) through a Flux HelmRelease with Flux's defaults (install and upgrade wait for the pods), then
// upgrades it gitopsUpgradeCount() times (five in the matrix) by changing the HelmRelease's values: each reconciles Ready, and the witness sees no
// app process before its migration. The upgrades are forced (upgrade.force: each object replaced): the records
// of every identity must survive them.
func fluxInstallsAndUpgrades(m waitMode) func(*testing.T) {
	return func(t *testing.T) { fluxInstallsAndUpgradesIn(t, m) }
}

func fluxInstallsAndUpgradesIn(t *testing.T, m waitMode) {
	res := scenario(t, fluxUpgradesScenarios[m.name], "flux")
	gitopsUp(t, fluxUpgradesScenarios[m.name], "flux")
	ctx := context.Background()
	ns := env.NewNamespace(t, "flux", restricted)
	f := fluxRelease{Release: env.NewRelease(t, ns, "shop", ""), force: true}
	m.start(t, f.Release)
	start := time.Now()
	f.apply(fluxValues(m.values))
	if ready := f.settle(6 * time.Minute); ready.Status != "True" {
		t.Fatalf("the install did not reconcile: %s: %s", ready.Reason, ready.Message)
	}
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	m.assertPodsWaitAsTheModeSays(ctx, t, f.Release)
	f.AssertWitness(ctx, f.AppIdentity(ctx))
	ids := []string{f.AppIdentity(ctx)}
	for i := 1; i <= gitopsUpgradeCount(); i++ {
		before := f.AppIdentity(ctx)
		start := time.Now()
		f.apply(fluxValues(framework.Merge(m.values, gitopsUpgrade(i))))
		if ready := f.settle(6 * time.Minute); ready.Status != "True" {
			t.Fatalf("upgrade %d did not reconcile: %s: %s", i, ready.Reason, ready.Message)
		}
		res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
		res.Upgrades++
		id := f.AppIdentity(ctx)
		if id == before {
			t.Fatalf("upgrade %d kept identity %s", i, id)
		}
		f.AssertWitness(ctx, id)
		ids = append(ids, id)
	}
	if v, want := f.PsqlInt("select max(version) from schema_migrations"), gitopsUpgradeCount()+1; v != want {
		t.Errorf("schema at version %d after %d upgrades, want %d", v, gitopsUpgradeCount(), want)
	}
	records := f.Records(ctx)
	for i, id := range ids {
		if _, ok := records[id]; !ok {
			t.Errorf("after %d forced upgrades the records lack identity %s (revision %d): %v", len(ids)-1, id, i+1, records)
		}
	}
}

// fluxReportsAFailedMigration upgrades through Flux to a migration that fails:
// the HelmRelease says the upgrade failed and why, the Deployment keeps its identity (no new pod starts), the
// database is not half-migrated, and the migration Job's log stays readable. Flux's default is no remediation
// (docs: upgrade.remediation), so the release stays failed, a requested reconcile runs nothing, until the values
// are fixed, which the last step does.
func fluxReportsAFailedMigration(t *testing.T) {
	scenario(t, fluxFailedMigrationScenario, "flux")
	gitopsUp(t, fluxFailedMigrationScenario, "flux")
	ctx := context.Background()
	ns := env.NewNamespace(t, "fluxfail", restricted)
	f := fluxRelease{Release: env.NewRelease(t, ns, "shop", "")}
	f.apply(fluxValues(nil))
	if ready := f.settle(6 * time.Minute); ready.Status != "True" {
		t.Fatalf("the install did not reconcile: %s: %s", ready.Reason, ready.Message)
	}
	oldID := f.AppIdentity(ctx)
	f.apply(fluxValues(map[string]any{
		"image":     map[string]any{"tag": "v2"},
		"migration": map[string]any{"backoffLimit": 0, "env": []any{framework.EnvVar("DEMO_FAIL_MIGRATION", "2")}},
	}))
	h := f.settleFailed(6 * time.Minute)
	released, stalled, ready := h.condition("Released"), h.condition("Stalled"), h.condition("Ready")
	if released.Reason != "UpgradeFailed" || !strings.Contains(released.Message, "pre-upgrade hooks failed") {
		t.Errorf("the HelmRelease does not say the upgrade's hook failed: Released=%s %s: %s", released.Status, released.Reason, released.Message)
	}
	if ready.Status == "True" {
		t.Errorf("the HelmRelease says Ready=True after its upgrade failed: %s: %s", ready.Reason, ready.Message)
	}
	t.Logf("Flux reports: Released=%s %s: %s; Stalled=%s %s: %s; Ready=%s %s: %s", released.Status, released.Reason,
		released.Message, stalled.Status, stalled.Reason, stalled.Message, ready.Status, ready.Reason, ready.Message)
	if got := f.AppIdentity(ctx); got != oldID {
		t.Errorf("the Deployment moved to identity %s although its migration failed", got)
	}
	if v := f.PsqlInt("select max(version) from schema_migrations"); v != 1 {
		t.Errorf("schema at version %d after the failed migration, want 1", v)
	}
	logs := env.Run.Must(t, env.Kubectl, "logs", "-n", ns, "job/"+f.Fullname()+"-migrate", "-c", "migrate")
	if !strings.Contains(logs, "injected failure in migration 2") {
		t.Errorf("the failed migration's log does not say why:\n%s", logs)
	}
	env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", ns, "deployment/"+f.Fullname(), "--timeout=1m")
	f.AssertWitness(ctx, oldID)
	f.assertReconcileKeepsTheFailure(h)
	// fixed values reconcile
	f.apply(fluxValues(map[string]any{"image": map[string]any{"tag": "v2"}}))
	if ready := f.settle(6 * time.Minute); ready.Status != "True" {
		t.Fatalf("the fixed values did not reconcile: %s: %s", ready.Reason, ready.Message)
	}
	f.AssertWitness(ctx, f.AppIdentity(ctx))
}

// assertReconcileKeepsTheFailure asks Flux to reconcile the failed HelmRelease again (what `flux reconcile
// helmrelease` does, without --force) and checks that Flux runs no new upgrade: the release history and the
// failed migration Job (its UID) stay as they were, Released and Stalled still say the upgrade failed. It logs
// what Ready says after that second reconcile (helm-controller v1.4: Unknown, see settleFailed).
func (f fluxRelease) assertReconcileKeepsTheFailure(failed helmRelease) {
	f.T.Helper()
	jobUID := func() string {
		return env.Run.Must(f.T, env.Kubectl, "get", "job", f.Fullname()+"-migrate", "-n", f.Namespace, "-o", "jsonpath={.metadata.uid}")
	}
	uid := jobUID()
	token := time.Now().UTC().Format(time.RFC3339Nano)
	env.Run.Must(f.T, env.Kubectl, "annotate", "helmrelease", f.Name, "-n", f.Namespace, "--overwrite", "reconcile.fluxcd.io/requestedAt="+token)
	h := f.settleWhenReturning(2*time.Minute, func(h helmRelease) bool { return h.Status.LastHandledReconcileAt == token })
	if len(h.Status.History) == 0 || len(failed.Status.History) == 0 || h.Status.History[0].Version != failed.Status.History[0].Version {
		f.T.Errorf("Flux ran a new Helm action on a reconcile of a failed release: history %+v, was %+v", h.Status.History, failed.Status.History)
	}
	if got := jobUID(); got != uid {
		f.T.Errorf("the migration Job was replaced (UID %s, was %s): Flux ran the failed migration again", got, uid)
	}
	released, stalled, ready := h.condition("Released"), h.condition("Stalled"), h.condition("Ready")
	if released.Status != "False" || released.Reason != "UpgradeFailed" || stalled.Status != "True" {
		f.T.Errorf("after a reconcile Flux no longer reports the failed upgrade: Released=%s %s, Stalled=%s %s",
			released.Status, released.Reason, stalled.Status, stalled.Reason)
	}
	f.T.Logf("after a requested reconcile of the failed release Flux reports Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
}

// helmControllerRestarts is the kubelet's restart count of Flux's helm-controller container.
func helmControllerRestarts(t *testing.T) int {
	t.Helper()
	out := env.Run.Must(t, env.Kubectl, "get", "pods", "-n", "flux-system", "-l", "app=helm-controller",
		"-o", "jsonpath={range .items[*]}{.status.containerStatuses[0].restartCount}{\"\\n\"}{end}")
	n := 0
	for _, f := range strings.Fields(out) {
		var c int
		if _, err := fmt.Sscan(f, &c); err != nil {
			t.Fatalf("reading helm-controller's restart count %q: %v", out, err)
		}
		n += c
	}
	return n
}

// fluxCrashesOnHookOutputLogs is the negative control of fluxValues:
// the same failed migration as above with the chart's default migration.hookOutputLogs (true) makes
// helm-controller panic (the kubelet counts a restart) instead of reporting the failure. When this test fails,
// Flux has fixed fluxcd/helm-controller#1562 and the advice in docs/gitops.md can go.
func fluxCrashesOnHookOutputLogs(t *testing.T) {
	take(t, weightOne, 80*time.Second) // after its siblings: it crashes the controller they use
	scenario(t, fluxHookOutputLogsControlScenario, "flux")
	gitopsUp(t, fluxHookOutputLogsControlScenario, "flux")
	ns := env.NewNamespace(t, "fluxlogs", restricted)
	f := fluxRelease{Release: env.NewRelease(t, ns, "shop", "")}
	values := framework.Merge(framework.BaseValues(), map[string]any{"migration": map[string]any{"hookOutputLogs": true}})
	f.apply(values)
	if ready := f.settle(6 * time.Minute); ready.Status != "True" {
		t.Fatalf("the install did not reconcile: %s: %s", ready.Reason, ready.Message)
	}
	before := helmControllerRestarts(t)
	t.Cleanup(func() {
		// stop the crash loop: a suspended HelmRelease is not reconciled, then wait for the controller
		_, _ = env.Run.Run(t, env.Kubectl, "patch", "helmrelease", f.Name, "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":true}}`)
		_, _ = env.Run.Run(t, env.Kubectl, "rollout", "restart", "deployment/helm-controller", "-n", "flux-system")
		_, _ = env.Run.Run(t, env.Kubectl, "rollout", "status", "deployment/helm-controller", "-n", "flux-system", "--timeout=3m")
	})
	f.apply(framework.Merge(values, map[string]any{
		"image":     map[string]any{"tag": "v2"},
		"migration": map[string]any{"backoffLimit": 0, "env": []any{framework.EnvVar("DEMO_FAIL_MIGRATION", "2")}},
	}))
	framework.WaitUntil(t, "helm-controller to restart", 4*time.Minute, func(context.Context) (bool, error) {
		return helmControllerRestarts(t) > before, nil
	})
	h := f.get()
	t.Logf("helm-controller restarted %d time(s); the HelmRelease says Ready=%s: %s", helmControllerRestarts(t)-before,
		h.condition("Ready").Status, h.condition("Ready").Message)
}

// TestFluxRunsTheChartWithItsDefaults runs the Flux scenarios side by side, then the control that crashes
// helm-controller on purpose alone; all beside the Argo CD scenarios and the other parallel tests.
func TestFluxRunsTheChartWithItsDefaults(t *testing.T) {
	t.Parallel()
	t.Run("with a working controller", func(t *testing.T) {
		t.Run("installs and upgrades with Flux's wait, without a deadlock", sharing(weightOne, 165*time.Second, fluxInstallsAndUpgrades(waitModes()[0])))
		t.Run("installs and upgrades with Flux's wait, the pods held by the scheduling gate", sharing(weightOne, 165*time.Second, fluxInstallsAndUpgrades(waitModes()[1])))
		t.Run("reports a failed migration while the old pods keep serving", sharing(weightOne, 70*time.Second, fluxReportsAFailedMigration))
		t.Run("installs from the chart's OCI repository, its images from the same registry", sharing(weightOne, 60*time.Second, fluxInstallsFromAnOCIRepository))
	})
	t.Run("crashes helm-controller on a failed hook when hookOutputLogs is left on", fluxCrashesOnHookOutputLogs)
}

// gitopsDone ends one scenario's use of a controller; after the last of this run's, it scales the controller's
// Deployments and StatefulSets to zero, unless the cluster is kept (KEEP_CLUSTER=1: its next run reuses it as
// it is). A scale that fails is logged: it costs CPU, not evidence.
func gitopsDone(t *testing.T, which string) {
	gitopsMu.Lock()
	defer gitopsMu.Unlock()
	gitopsLeft[which]--
	if gitopsLeft[which] > 0 || os.Getenv("KEEP_CLUSTER") == "1" {
		return
	}
	ctx := context.Background()
	ns := gitopsNamespaces[which]
	zero := func(kind, name string, scale func() error) {
		if err := scale(); err != nil {
			t.Logf("scaling %s %s/%s to zero after the last %s scenario: %v", kind, ns, name, which, err)
		}
	}
	scaleTo0 := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
	if ds, err := env.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, d := range ds.Items {
			zero("deployment", d.Name, func() error {
				s := scaleTo0.DeepCopy()
				s.Name, s.Namespace = d.Name, ns
				_, err := env.Client.AppsV1().Deployments(ns).UpdateScale(ctx, d.Name, s, metav1.UpdateOptions{})
				return err
			})
		}
	}
	if ss, err := env.Client.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, st := range ss.Items {
			zero("statefulset", st.Name, func() error {
				s := scaleTo0.DeepCopy()
				s.Name, s.Namespace = st.Name, ns
				_, err := env.Client.AppsV1().StatefulSets(ns).UpdateScale(ctx, st.Name, s, metav1.UpdateOptions{})
				return err
			})
		}
	}
	fmt.Printf("e2e: the last %s scenario of this run ended: its controllers in %s scaled to zero\n", which, ns)
}

// application is what the tests read of an Argo CD Application.
type application struct {
	Status struct {
		Sync struct {
			Status string `json:"status"`
		} `json:"sync"`
		Health struct {
			Status string `json:"status"`
		} `json:"health"`
		OperationState struct {
			Phase      string    `json:"phase"`
			Message    string    `json:"message"`
			StartedAt  time.Time `json:"startedAt"`
			FinishedAt time.Time `json:"finishedAt"`
		} `json:"operationState"`
	} `json:"status"`
}

// argoApp is one Argo CD Application of the chart into its own namespace, with its release.
type argoApp struct {
	*framework.Release
	retries int // syncPolicy.retry.limit of automated syncs; 0 keeps Argo CD's default (5 retries with back-off)
	// syncOptions of the Application's sync policy (e.g. Replace=true)
	syncOptions []string
}

// manifest is the Application with values and a sync policy (nil: manual syncs only).
func (a argoApp) manifest(values map[string]any, automated bool) []byte {
	a.T.Helper()
	spec := map[string]any{
		"project": "default",
		"source": map[string]any{
			"repoURL": "http://chart-server.gitops-charts.svc.cluster.local", "chart": "premigrate", "targetRevision": "*",
			"helm": map[string]any{"releaseName": a.Name, "valuesObject": values},
		},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": a.Namespace},
	}
	if automated {
		policy := map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}}
		if a.retries > 0 {
			policy["retry"] = map[string]any{"limit": a.retries}
		}
		spec["syncPolicy"] = policy
	}
	if len(a.syncOptions) > 0 {
		policy, _ := spec["syncPolicy"].(map[string]any)
		if policy == nil {
			policy = map[string]any{}
		}
		policy["syncOptions"] = a.syncOptions
		spec["syncPolicy"] = policy
	}
	b, err := json.Marshal(map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": a.Namespace, "namespace": "argocd", "finalizers": []string{"resources-finalizer.argocd.argoproj.io"}},
		"spec":     spec,
	})
	if err != nil {
		a.T.Fatal(err)
	}
	return b
}

func (a argoApp) apply(values map[string]any, automated bool) time.Time {
	a.T.Helper()
	at := time.Now()
	if out, err := env.Run.Input(a.T, a.manifest(values, automated), env.Kubectl, "apply", "-f", "-"); err != nil {
		a.T.Fatalf("applying the Application: %v\n%s", err, out)
	}
	return at
}

func (a argoApp) get() application {
	a.T.Helper()
	var app application
	getObject(a.T, applications, "argocd", a.Namespace, &app)
	return app
}

// synced waits for a sync operation that finished after `after`, and returns the Application then.
func (a argoApp) synced(after time.Time, timeout time.Duration) application {
	a.T.Helper()
	var app application
	framework.WaitUntil(a.T, "Argo CD to finish a sync of "+a.Namespace, timeout, func(context.Context) (bool, error) {
		app = a.get()
		op := app.Status.OperationState
		return op.FinishedAt.After(after.Add(-time.Second)) && op.Phase != "" && op.Phase != "Running", nil
	})
	return app
}

// healthy waits until the Application is Synced and Healthy.
func (a argoApp) healthy(timeout time.Duration) {
	a.T.Helper()
	last := ""
	framework.WaitUntil(a.T, "Application "+a.Namespace+" to be Synced and Healthy", timeout, func(context.Context) (bool, error) {
		app := a.get()
		// each change of its state is logged, so a timeout says where Argo CD stopped
		if now := fmt.Sprintf("sync %q, health %q, operation %q: %s", app.Status.Sync.Status, app.Status.Health.Status,
			app.Status.OperationState.Phase, app.Status.OperationState.Message); now != last {
			a.T.Logf("Application %s: %s", a.Namespace, now)
			last = now
		}
		return app.Status.Sync.Status == "Synced" && app.Status.Health.Status == "Healthy", nil
	})
}

// operate starts a sync operation by hand (what `argocd app sync [--resource ...]` does).
func (a argoApp) operate(resources ...map[string]any) time.Time {
	a.T.Helper()
	sync := map[string]any{}
	if len(resources) > 0 {
		sync["resources"] = resources
	}
	patch, _ := json.Marshal(map[string]any{"operation": map[string]any{"initiatedBy": map[string]any{"username": "e2e"}, "sync": sync}})
	at := time.Now()
	env.Run.Must(a.T, env.Kubectl, "patch", "application", a.Namespace, "-n", "argocd", "--type", "merge", "-p", string(patch))
	return at
}

func newArgoApp(t *testing.T, prefix string) argoApp {
	t.Helper()
	ns := env.NewNamespace(t, prefix, restricted)
	a := argoApp{Release: env.NewRelease(t, ns, "shop", "")}
	t.Cleanup(func() {
		_, _ = env.Run.Run(t, env.Kubectl, "delete", "application", ns, "-n", "argocd", "--wait=true", "--timeout=2m")
	})
	return a
}

// argoValues are the chart's values under Argo CD: argocd mode, a TTL on the Jobs, and no password for the
// embedded database: Argo CD renders without lookup, so the chart leaves the password to the cluster (a Secret
// without data, filled once by the Job <fullname>-password-<hash>), which every sync keeps.
func argoValues(extra map[string]any) map[string]any {
	v := framework.Merge(framework.BaseValues(), map[string]any{
		"migration": map[string]any{"mode": "argocd", "ttlSecondsAfterFinished": 60},
	})
	return framework.Merge(v, extra)
}

// argoSyncsUpgrades installs the chart through an Argo CD Application
// (automated sync with prune and selfHeal, a TTL on the Jobs) and upgrades it gitopsUpgradeCount() times (five in the matrix) by changing the
// Application's values (image and env): each sync succeeds, and the witness sees no app process before its
// migration.
func argoSyncsUpgrades(t *testing.T) {
	res := scenario(t, argocdUpgradesScenario, "argocd")
	gitopsUp(t, argocdUpgradesScenario, "argocd")
	ctx := context.Background()
	a := newArgoApp(t, "argo")
	a.apply(argoValues(nil), true)
	a.healthy(8 * time.Minute)
	a.AssertWitness(ctx, a.AppIdentity(ctx))
	for i := 1; i <= gitopsUpgradeCount(); i++ {
		before := a.AppIdentity(ctx)
		at := a.apply(argoValues(gitopsUpgrade(i)), true)
		app := a.synced(at, 6*time.Minute)
		if app.Status.OperationState.Phase != "Succeeded" {
			t.Fatalf("upgrade %d: sync %s: %s", i, app.Status.OperationState.Phase, app.Status.OperationState.Message)
		}
		a.healthy(6 * time.Minute)
		res.DurationsSec = append(res.DurationsSec, time.Since(at).Seconds())
		res.Upgrades++
		id := a.AppIdentity(ctx)
		if id == before {
			t.Fatalf("upgrade %d kept identity %s", i, id)
		}
		a.AssertWitness(ctx, id)
	}
	if v, want := a.PsqlInt("select max(version) from schema_migrations"), gitopsUpgradeCount()+1; v != want {
		t.Errorf("schema at version %d after %d upgrades, want %d", v, gitopsUpgradeCount(), want)
	}
}

// argoReportsAFailedMigration syncs values whose migration fails: the sync
// operation fails and says so, the Deployment (wave 1, after the hook) keeps its identity and the old pods
// serve, the schema is not half-migrated, and the failed Job's log stays readable.
func argoReportsAFailedMigration(t *testing.T) {
	scenario(t, argocdFailedMigrationScenario, "argocd")
	gitopsUp(t, argocdFailedMigrationScenario, "argocd")
	ctx := context.Background()
	a := newArgoApp(t, "argofail")
	// Argo CD retries a failed automated sync 5 times by default, with back-off (5 s doubling): each retry runs
	// the migration again (BeforeHookCreation replaces the failed Job), about 6 minutes in all; once is enough here.
	a.retries = 1
	a.apply(argoValues(nil), true)
	a.healthy(8 * time.Minute)
	oldID := a.AppIdentity(ctx)
	at := a.apply(argoValues(map[string]any{
		"image":     map[string]any{"tag": "v2"},
		"migration": map[string]any{"backoffLimit": 0, "env": []any{framework.EnvVar("DEMO_FAIL_MIGRATION", "2")}},
	}), true)
	app := a.synced(at, 6*time.Minute)
	if app.Status.OperationState.Phase == "Succeeded" {
		t.Fatalf("the sync of a failing migration succeeded")
	}
	t.Logf("Argo CD reports: %s: %s", app.Status.OperationState.Phase, app.Status.OperationState.Message)
	if got := a.AppIdentity(ctx); got != oldID {
		t.Errorf("the Deployment moved to identity %s although its migration failed", got)
	}
	if v := a.PsqlInt("select max(version) from schema_migrations"); v != 1 {
		t.Errorf("schema at version %d after the failed migration, want 1", v)
	}
	logs := env.Run.Must(t, env.Kubectl, "logs", "-n", a.Namespace, "job/"+a.Fullname()+"-migrate", "-c", "migrate")
	if !strings.Contains(logs, "injected failure in migration 2") {
		t.Errorf("the failed migration's log does not say why:\n%s", logs)
	}
	env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", a.Namespace, "deployment/"+a.Fullname(), "--timeout=1m")
	a.AssertWitness(ctx, oldID)
}

// argoSelectiveSyncHoldsTheNewPods changes the values with automated sync off, then syncs only
// the Deployment (a selective sync: Argo CD runs no hook): the new pods wait in the gate (m: the init container,
// or unscheduled at the scheduling gate) while no migration of their identity has run, and start once a full
// sync ran it.
func argoSelectiveSyncHoldsTheNewPods(m waitMode) func(*testing.T) {
	return func(t *testing.T) { argoSelectiveSyncHoldsTheNewPodsIn(t, m) }
}

func argoSelectiveSyncHoldsTheNewPodsIn(t *testing.T, m waitMode) {
	scenario(t, argocdSelectiveSyncScenarios[m.name], "argocd")
	gitopsUp(t, argocdSelectiveSyncScenarios[m.name], "argocd")
	ctx := context.Background()
	a := newArgoApp(t, "argosel")
	m.start(t, a.Release)
	a.apply(argoValues(m.values), true)
	a.healthy(8 * time.Minute)
	oldID := a.AppIdentity(ctx)
	a.apply(argoValues(framework.Merge(m.values, map[string]any{"image": map[string]any{"tag": "v2"}})), false)
	at := a.operate(map[string]any{"group": "apps", "kind": "Deployment", "name": a.Fullname()})
	if app := a.synced(at, 3*time.Minute); app.Status.OperationState.Phase != "Succeeded" {
		t.Fatalf("the selective sync: %s: %s", app.Status.OperationState.Phase, app.Status.OperationState.Message)
	}
	newID := a.AppIdentity(ctx)
	if newID == oldID {
		t.Fatalf("the selective sync did not change the Deployment's identity")
	}
	if job := a.MigrationJob(ctx, newID); job != nil {
		t.Fatalf("a selective sync of the Deployment ran the migration hook %s", job.Name)
	}
	// the new pods exist and wait: for 30 s none of them starts its app container
	framework.WaitUntil(t, "a pod of identity "+newID, 2*time.Minute, func(ctx context.Context) (bool, error) {
		return len(a.AppPods(ctx, newID)) > 0, nil
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range a.AppPods(ctx, newID) {
			if _, started := framework.AppStart(p); started {
				t.Fatalf("pod %s of identity %s started its app container without its migration", p.Name, newID)
			}
		}
		time.Sleep(2 * time.Second)
	}
	if n := a.PsqlInt(fmt.Sprintf("select count(*) from demo_pod_starts where identity = '%s'", newID)); n != 0 {
		t.Fatalf("the witness saw %d starts of identity %s before its migration", n, newID)
	}
	m.assertPodsWaitAsTheModeSays(ctx, t, a.Release)
	if m.held() {
		for _, p := range a.AppPods(ctx, newID) {
			if len(p.Spec.SchedulingGates) == 0 || p.Spec.NodeName != "" {
				t.Errorf("pod %s was released (scheduling gates %v, node %q) before its migration ran", p.Name, p.Spec.SchedulingGates, p.Spec.NodeName)
			}
		}
	}
	// a full sync runs the hook; the held pods start
	at = a.operate()
	if app := a.synced(at, 6*time.Minute); app.Status.OperationState.Phase != "Succeeded" {
		t.Fatalf("the full sync: %s: %s", app.Status.OperationState.Phase, app.Status.OperationState.Message)
	}
	env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", a.Namespace, "deployment/"+a.Fullname(), "--timeout=3m")
	a.AssertWitness(ctx, newID)
}

// argoGuardRefusesASelectiveSync is argocd-selective-sync with migration.guard on: the sync of the Deployment
// alone is refused at the API server, Argo CD reports the guard's message and the Deployment keeps its identity;
// the full sync then runs the migration and the Deployment together. Its negative control is
// argocd-selective-sync itself: the guard off, the same sync goes through and the new pods wait in the gate.
func argoGuardRefusesASelectiveSync(t *testing.T) {
	res := scenario(t, argocdGuardScenario, "argocd")
	gitopsUp(t, argocdGuardScenario, "argocd")
	ctx := context.Background()
	a := newArgoApp(t, "argoguard")
	removeGuardObjects(t, a.Release)
	a.retries = 1
	guard := map[string]any{"migration": map[string]any{"guard": map[string]any{"enabled": true}}}
	a.apply(argoValues(guard), true)
	a.healthy(8 * time.Minute)
	oldID := a.AppIdentity(ctx)
	env.Run.Must(t, env.Kubectl, "get", "validatingadmissionpolicybinding", "premigrate."+a.Namespace+"."+a.Fullname())
	a.apply(argoValues(framework.Merge(guard, map[string]any{"image": map[string]any{"tag": "v2"}})), false)
	at := a.operate(map[string]any{"group": "apps", "kind": "Deployment", "name": a.Fullname()})
	app := a.synced(at, 3*time.Minute)
	if app.Status.OperationState.Phase == "Succeeded" {
		t.Fatalf("the guard let a selective sync of the Deployment through: %s", app.Status.OperationState.Message)
	}
	if !strings.Contains(app.Status.OperationState.Message, "whose migration has not run") {
		t.Errorf("Argo CD's sync failed without the guard's message: %s: %s", app.Status.OperationState.Phase, app.Status.OperationState.Message)
	}
	t.Logf("Argo CD reports: %s: %s", app.Status.OperationState.Phase, app.Status.OperationState.Message)
	if got := a.AppIdentity(ctx); got != oldID {
		t.Fatalf("the refused sync moved the Deployment from identity %s to %s", oldID, got)
	}
	res.Numbers["refusedSelectiveSync"] = 1
	// the full sync runs the migration, then the Deployment; the refused sync finished a moment ago, so the
	// full one is told from it by its finish
	refused := app.Status.OperationState.FinishedAt
	a.operate()
	framework.WaitUntil(t, "Argo CD to finish the full sync", 6*time.Minute, func(context.Context) (bool, error) {
		app = a.get()
		op := app.Status.OperationState
		return op.FinishedAt.After(refused) && op.Phase != "" && op.Phase != "Running", nil
	})
	if app.Status.OperationState.Phase != "Succeeded" {
		t.Fatalf("the full sync: %s: %s", app.Status.OperationState.Phase, app.Status.OperationState.Message)
	}
	newID := a.AppIdentity(ctx)
	if newID == oldID {
		t.Fatalf("the full sync did not change the Deployment's identity")
	}
	res.Upgrades = 1
	env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", a.Namespace, "deployment/"+a.Fullname(), "--timeout=3m")
	a.AssertWitness(ctx, newID)
}

// argoRendersHookModeAsAnInstall documents what migration.mode hook does under Argo CD: Argo CD
// renders with `helm template`, so every sync is an install to the chart: the Job is a plain Job named by its
// identity (no Helm hook), which the gate waits for; it works like job mode (a fixed password is needed, as
// Argo CD renders without lookup). argocd mode is still the one to use: its Job is a Sync hook that runs
// before the Deployment is applied.
func argoRendersHookModeAsAnInstall(t *testing.T) {
	scenario(t, argocdHookModeScenario, "argocd")
	gitopsUp(t, argocdHookModeScenario, "argocd")
	ctx := context.Background()
	a := newArgoApp(t, "argohook")
	values := func(tag string) map[string]any {
		return framework.Merge(framework.BaseValues(), map[string]any{
			"image":      map[string]any{"tag": tag},
			"migration":  map[string]any{"mode": "hook"},
			"postgresql": map[string]any{"auth": map[string]any{"password": "argo-e2e"}},
		})
	}
	a.apply(values("v1"), true)
	a.healthy(8 * time.Minute)
	for _, tag := range []string{"v1", "v2"} {
		if tag == "v2" {
			at := a.apply(values(tag), true)
			if app := a.synced(at, 6*time.Minute); app.Status.OperationState.Phase != "Succeeded" {
				t.Fatalf("sync of %s: %s: %s", tag, app.Status.OperationState.Phase, app.Status.OperationState.Message)
			}
			a.healthy(6 * time.Minute)
		}
		id := a.AppIdentity(ctx)
		job := a.MigrationJob(ctx, id)
		if job == nil {
			t.Fatalf("%s: no migration Job of identity %s", tag, id)
		}
		if job.Name != appMigrationJob(ctx, a.Release) || job.Annotations["helm.sh/hook"] != "" || job.Annotations["argocd.argoproj.io/hook"] != "" {
			t.Errorf("%s: Job %s annotations %v: want the plain Job the app waits for, named by its spec", tag, job.Name, job.Annotations)
		}
		a.AssertWitness(ctx, id)
	}
}

// argoReplaceKeepsEveryRecord syncs with Argo CD's Replace=true (issue 23 item 2): every object is replaced
// (kubectl replace: a PUT of the rendered object), the release's records ConfigMap included, which has no data.
// The records are in the store, which no render holds, so a replace cannot wipe them: after three syncs under
// Replace=true the store has the three records, and a GitOps revert to the second version runs its Sync hook,
// whose gate run finds that version recorded on this database and runs nothing (the older migration on the newer
// schema would be refused and fail the sync); its pods start on the record (the Jobs are gone at once, TTL 0).
// The anchor's marker, gone after the replace, shows the replace happened: without it the scenario proves nothing.
func argoReplaceKeepsEveryRecord(t *testing.T) {
	res := scenario(t, argocdReplaceScenario, "argocd")
	gitopsUp(t, argocdReplaceScenario, "argocd")
	ctx := context.Background()
	a := newArgoApp(t, "argorepl")
	a.syncOptions = []string{"Replace=true"}
	values := func(tag string) map[string]any {
		// no claim: a StatefulSet's volumeClaimTemplates are refused by a replace that does not carry the
		// defaults the API server filled in, which has nothing to do with the records. A password: a replace
		// PUTs the rendered Secret, and a render without the cluster carries none (the cluster makes it), so a
		// replace would wipe it and the next fill would make another one than the database has (docs/gitops.md)
		return argoValues(map[string]any{"image": map[string]any{"tag": tag},
			"migration":  map[string]any{"ttlSecondsAfterFinished": 0},
			"postgresql": map[string]any{"persistence": map[string]any{"enabled": false}, "auth": map[string]any{"password": "replace-keeps-this"}}})
	}
	a.apply(values("v1"), true)
	a.healthy(8 * time.Minute)
	ids := []string{a.AppIdentity(ctx)}
	for i, tag := range []string{"v2", "v3"} {
		if tag == "v3" {
			env.Run.Must(t, env.Kubectl, "patch", "configmap", a.AnchorName(), "-n", a.Namespace, "--type", "merge",
				"-p", `{"data":{"marker":"kept only if Argo CD does not replace this object"}}`)
		}
		at := a.apply(values(tag), true)
		if app := a.synced(at, 6*time.Minute); app.Status.OperationState.Phase != "Succeeded" {
			t.Fatalf("sync %d under Replace=true: %s: %s", i+2, app.Status.OperationState.Phase, app.Status.OperationState.Message)
		}
		a.healthy(6 * time.Minute)
		res.DurationsSec = append(res.DurationsSec, time.Since(at).Seconds())
		res.Upgrades++
		ids = append(ids, a.AppIdentity(ctx))
		a.AssertWitness(ctx, ids[len(ids)-1])
	}
	anchor, err := env.Client.CoreV1().ConfigMaps(a.Namespace).Get(ctx, a.AnchorName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := anchor.Data["marker"]; ok {
		t.Fatalf("Replace=true did not replace ConfigMap %s (its marker is still there): the scenario proves nothing", a.AnchorName())
	}
	records := a.Records(ctx)
	for i, id := range ids {
		if _, ok := records[id]; !ok {
			t.Errorf("after the syncs under Replace=true the store lacks the record of version %d (%s): %v", i+1, id, records)
		}
	}
	runs := a.PsqlInt("select count(*) from demo_migrate_runs")
	at := a.apply(values("v2"), true)
	if app := a.synced(at, 6*time.Minute); app.Status.OperationState.Phase != "Succeeded" {
		t.Fatalf("the revert to v2 under Replace=true: %s: %s", app.Status.OperationState.Phase, app.Status.OperationState.Message)
	}
	a.healthy(6 * time.Minute)
	res.DurationsSec = append(res.DurationsSec, time.Since(at).Seconds())
	res.Upgrades++
	if got := a.AppIdentity(ctx); got != ids[1] {
		t.Fatalf("after the revert the Deployment has identity %s, want v2's %s", got, ids[1])
	}
	a.AssertWitness(ctx, ids[1])
	if got := a.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
		t.Errorf("%d migration runs after the revert, want %d (nothing runs again)", got, runs)
	}
	if v := a.PsqlInt("select max(version) from schema_migrations"); v != 3 {
		t.Errorf("schema at version %d, want 3 (migrations are not undone)", v)
	}
}

// argoDeleteKeepsTheDatabaseAndItsRecords deletes the Application the way Argo CD's UI and `argocd app delete`
// do by default (cascading: the resources finalizer deletes what the Application manages), then creates it again
// with the same values. What stays in the namespace is what docs/gitops.md says ("Deleting the Application"):
// the database's claim with its data, the password Secret (helm.sh/resource-policy: keep) and the store of
// records the claim owns; nothing of the app, the gate or the migration's RBAC. The new Application's Sync hook
// finds its identity recorded on the kept database and runs nothing again; its pods start on that record, and
// the data written before the deletion is still there.
func argoDeleteKeepsTheDatabaseAndItsRecords(t *testing.T) {
	res := scenario(t, argocdDeleteScenario, "argocd")
	gitopsUp(t, argocdDeleteScenario, "argocd")
	ctx := context.Background()
	a := newArgoApp(t, "argodel")
	// the Job kept for an hour: the deletion, not its TTL, takes it (Argo CD manages the Sync hook's Job)
	values := argoValues(map[string]any{"migration": map[string]any{"ttlSecondsAfterFinished": 3600}})
	a.apply(values, true)
	a.healthy(8 * time.Minute)
	id := a.AppIdentity(ctx)
	a.AssertWitness(ctx, id)
	a.Psql("create table kept_across_delete (note text); insert into kept_across_delete values ('before the delete')")
	runs := a.PsqlInt("select count(*) from demo_migrate_runs")

	start := time.Now()
	env.Run.Must(t, env.Kubectl, "delete", "application", a.Namespace, "-n", "argocd", "--wait=true", "--timeout=3m")
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	pvc := "PersistentVolumeClaim/data-" + a.Fullname() + "-postgresql-0"
	kept := map[string]bool{pvc: true, "Secret/" + a.Fullname() + "-postgresql": true, "ConfigMap/" + a.StoreName(): true}
	left, err := leftoversWait(a.Namespace, kept, time.Minute)
	if err != nil {
		t.Fatalf("after the Application's deletion the namespace %s could not be read: %v", a.Namespace, err)
	}
	all, err := leftovers(ctx, a.Namespace, nil)
	if err != nil {
		t.Fatalf("after the Application's deletion the namespace %s could not be read: %v", a.Namespace, err)
	}
	t.Logf("left in namespace %s after the Application's deletion: %s", a.Namespace, strings.Join(all, ", "))
	if len(left) > 0 {
		t.Errorf("the Application's deletion left %s (only %v stay, docs/gitops.md)", strings.Join(left, ", "), kept)
	}
	for k := range kept {
		if !slices.Contains(all, k) {
			t.Errorf("the Application's deletion took %s, which docs/gitops.md says stays", k)
		}
	}

	at := a.apply(values, true)
	a.healthy(8 * time.Minute)
	res.DurationsSec = append(res.DurationsSec, time.Since(at).Seconds())
	res.Upgrades = 1
	if got := a.AppIdentity(ctx); got != id {
		t.Fatalf("the new Application's Deployment has identity %s, want %s (the same values)", got, id)
	}
	a.AssertWitness(ctx, id)
	if got := a.PsqlInt("select count(*) from demo_migrate_runs"); got != runs {
		t.Errorf("%d migration runs after the Application was created again, want %d: its migration is recorded on this database", got, runs)
	}
	if got := a.PsqlInt("select count(*) from kept_across_delete"); got != 1 {
		t.Errorf("the row written before the delete is gone (%d rows): not the same database", got)
	}
	if _, ok := a.Records(ctx)[id]; !ok {
		t.Errorf("the records %v lack identity %s after the Application was created again", a.Records(ctx), id)
	}
}

// TestArgoCDSyncsTheChartInArgocdMode runs the Argo CD scenarios beside each other and the other scenarios (an
// Application and a namespace each), as the scheduler lets them (share_test.go).
func TestArgoCDSyncsTheChartInArgocdMode(t *testing.T) {
	t.Parallel()
	t.Run("through its upgrades with automated sync, prune, self-heal and a TTL", sharing(weightOne, 290*time.Second, argoSyncsUpgrades))
	t.Run("reports a failed migration and the new pods never start", sharing(weightOne, 120*time.Second, argoReportsAFailedMigration))
	t.Run("holds the new pods in a selective sync that skips the hook", sharing(weightOne, 125*time.Second, argoSelectiveSyncHoldsTheNewPods(waitModes()[0])))
	t.Run("holds the new pods at the scheduling gate in a selective sync that skips the hook", sharing(weightOne, 125*time.Second, argoSelectiveSyncHoldsTheNewPods(waitModes()[1])))
	t.Run("with the guard on refuses a selective sync that skips the hook", sharing(weightOne, 110*time.Second, argoGuardRefusesASelectiveSync))
	t.Run("renders hook mode as an install on every sync", sharing(weightOne, 65*time.Second, argoRendersHookModeAsAnInstall))
	t.Run("keeps every record when it replaces every object", sharing(weightOne, 110*time.Second, argoReplaceKeepsEveryRecord))
	t.Run("keeps the database and its records when the Application is deleted", sharing(weightOne, 150*time.Second, argoDeleteKeepsTheDatabaseAndItsRecords))
}
