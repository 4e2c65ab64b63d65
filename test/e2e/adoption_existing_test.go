//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

var existingServiceScenario = scenarios.Declare(framework.Adoption, framework.Matrix, "existing-service-adopts")

// A service that already serves, as teams have it before premigrate: `helm create` output running the demo
// app, with the database URL from a Secret and the team's own migration Job under a fixed name.

// existingServiceJob is the team's migration Job: a plain Job named once, which the API server refuses to
// change on the next version ("field is immutable").
const existingServiceJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ include "myapp.fullname" . }}-migrate
  labels:
    {{- include "myapp.labels" . | nindent 4 }}
spec:
  backoffLimit: 3
  template:
    spec:
      restartPolicy: OnFailure
      automountServiceAccountToken: false
      {{- with .Values.podSecurityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: migrate
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          args: [migrate]
          envFrom:
            - secretRef:
                name: myapp-db
          {{- with .Values.securityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
`

// existingServiceContainer is what the team added to helm create's container: the demo's command and its
// environment from the Secret. It goes after the ports, away from the lines the README's patch changes.
const existingServiceContainer = `              protocol: TCP
          args: [serve]
          envFrom:
            - secretRef:
                name: myapp-db
`

const existingServiceSecret = `apiVersion: v1
kind: Secret
metadata:
  name: myapp-db
stringData:
  url: postgres://ledger:ledger-pw@ledger-db:5432/ledger?sslmode=disable
  DATABASE_URL: postgres://ledger:ledger-pw@ledger-db:5432/ledger?sslmode=disable
`

// existingServiceValues are the team's values for version v of the demo: its image, port and probes, two
// replicas, the restricted contexts, and a label the witness finds the app's pods by (not in the selector).
func existingServiceValues(v string) map[string]any {
	return map[string]any{
		"replicaCount":       2,
		"image":              map[string]any{"repository": "ghcr.io/premigrate/demo", "tag": v, "pullPolicy": "Never"},
		"service":            map[string]any{"port": 8080},
		"podLabels":          map[string]any{"app.kubernetes.io/component": "app"},
		"readinessProbe":     map[string]any{"httpGet": map[string]any{"path": "/readyz", "port": "http"}, "periodSeconds": 1},
		"livenessProbe":      map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": "http"}, "periodSeconds": 10},
		"podSecurityContext": map[string]any{"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
		"securityContext": map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
			"capabilities": map[string]any{"drop": []any{"ALL"}}},
	}
}

// existingServiceChart is `helm create myapp` (Helm 4) with the team's own changes: the demo's command and
// environment in the container, and the fixed-name migration Job.
func existingServiceChart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := env.Run.RunCmd(t, framework.Cmd{Bin: env.Helm4, Args: []string{"create", "myapp"}, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(dir, "myapp")
	deployment := filepath.Join(chart, "templates", "deployment.yaml")
	b, err := os.ReadFile(deployment)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), "              protocol: TCP\n") != 1 {
		t.Fatalf("helm create's deployment.yaml has not one container port to add the team's lines after:\n%s", b)
	}
	edited := strings.Replace(string(b), "              protocol: TCP\n", existingServiceContainer, 1)
	if err := os.WriteFile(deployment, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chart, "templates", "migrate-job.yaml"), []byte(existingServiceJob), 0o644); err != nil {
		t.Fatal(err)
	}
	return chart
}

// TestAServiceThatAlreadyServesMovesToPremigrateInOneUpgradeWithoutDowntime runs docs/adopting.md: the
// existing service serves under load, its next version's Job is refused as immutable, and the library
// README's steps plus the page's own, taken from the files, move it to premigrate in one `helm upgrade
// --wait`; `helm rollback` to the revision before the move goes back, the same version moves it again and
// the next one follows. The load sees no failed request across them, the Deployment keeps its UID, the team's
// Job is gone, and after the migration Job's TTL the restarted pods start again; the witness (the database's
// clock and the API server's container starts) sees no app process before its migration.
func TestAServiceThatAlreadyServesMovesToPremigrateInOneUpgradeWithoutDowntime(t *testing.T) {
	share(t, weightOne, 120*time.Second)
	res := scenario(t, existingServiceScenario, env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "existing", restricted)
	for _, m := range []string{ledgerDBManifest, existingServiceSecret} {
		if out, err := env.Run.Input(t, []byte(m), env.Kubectl, "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("creating the service's database: %v\n%s", err, out)
		}
	}
	env.Run.Must(t, env.Kubectl, "wait", "-n", ns, "--for=condition=Ready", "pod/ledger-db", "--timeout=3m")
	chart := existingServiceChart(t)
	r := env.NewRelease(t, ns, "shop", env.Helm4)
	r.PsqlArgs = []string{"ledger-db", "psql", "-U", "ledger", "-d", "ledger"}
	const fullname = "shop-myapp"
	deploy := func(values map[string]any) string {
		t.Helper()
		start := time.Now()
		out := env.Run.Must(t, env.Helm4, "upgrade", "--install", r.Name, chart, "-n", ns, "--wait", "--timeout", "3m", "--values", r.ValuesFile(values))
		res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
		return out
	}
	uid := func() string {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, fullname, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("getting the Deployment: %v", err)
		}
		return string(d.UID)
	}

	// the service as the team runs it
	deploy(existingServiceValues("v1"))
	before := uid()
	if got := r.Psql(`select max(version) from schema_migrations`); got != "1" {
		t.Fatalf("the team's Job left schema %q, want 1", got)
	}
	// why it moves: the next version's Job is the same object with another pod template
	job := env.Run.Must(t, env.Helm4, "template", r.Name, chart, "-n", ns, "--show-only", "templates/migrate-job.yaml",
		"--values", r.ValuesFile(existingServiceValues("v2")))
	if out, err := env.Run.Input(t, []byte(job), env.Kubectl, "apply", "-n", ns, "--dry-run=server", "-f", "-"); err == nil || !strings.Contains(out+err.Error(), "field is immutable") {
		t.Fatalf("the team's Job of v2 was not refused as immutable (err %v):\n%s", err, out)
	}

	// the move, as the docs say it
	for _, doc := range []string{filepath.Join(env.RepoRoot, "charts", "premigrate-lib", "README.md"), filepath.Join(env.RepoRoot, "docs", "adopting.md")} {
		steps, err := framework.AdoptSteps(doc)
		if err != nil || len(steps) == 0 {
			t.Fatalf("no adoption steps in %s (%v)", doc, err)
		}
		for _, s := range steps {
			s.Apply(t, env.Run, chart)
		}
	}
	env.Run.Must(t, "cp", "-r", filepath.Join(env.RepoRoot, "charts", "premigrate-lib"), filepath.Join(chart, "charts", "premigrate-lib"))
	adopted := func(v string) map[string]any {
		return framework.Merge(existingServiceValues(v), map[string]any{"migrations": map[string]any{
			"command": []any{"/demo", "migrate"}, "ttlSecondsAfterFinished": 5,
		}})
	}
	load := env.StartLoad(t, ns, fullname+":8080")
	deploy(adopted("v2"))
	firstID := identityOf(ctx, t, ns, fullname)
	if firstID == "" {
		t.Fatal("the move's pod template carries no identity")
	}

	// going back, as the page says: the revision before the move puts the team's Job and the pods without the
	// gate back, on the same Deployment; the team's v1 Job finds the schema one step ahead and leaves it alone
	start := time.Now()
	env.Run.Must(t, env.Helm4, "rollback", r.Name, "1", "-n", ns, "--wait", "--timeout", "3m")
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	env.Run.Must(t, env.Kubectl, "wait", "-n", ns, "--for=condition=Complete", "job/"+fullname+"-migrate", "--timeout=2m")
	if id := identityOf(ctx, t, ns, fullname); id != "" {
		t.Errorf("after the rollback the pod template still carries the identity %q", id)
	}
	if after := uid(); after != before {
		t.Errorf("the rollback recreated the Deployment: UID %s before the move, %s after", before, after)
	}
	if got := r.Psql(`select max(version) from schema_migrations`); got != "2" {
		t.Errorf("schema %q after the rollback, want 2 (the team's v1 Job leaves a newer schema alone)", got)
	}

	// and forward again: the version the rollback left moves it once more (the rollback took the release's
	// ConfigMap, so its Job is again a first move's plain Job), deleting the team's Job again; the version after
	// it is an upgrade like any other, its migration Job a pre-upgrade hook. Each step stays inside what the
	// old pods serve on (the demo's version N is ready on schemas N and N+1): moving from v1 straight to v3
	// would take v1's pods out of the Service before v3's are ready, which the load sees as refused requests
	// (a CI run, 2026-12-05: 8 of 3355, the app's own limit, not the move's)
	deploy(adopted("v2"))
	if id := identityOf(ctx, t, ns, fullname); id != firstID {
		t.Errorf("moving again at v2 has the identity %q, the first move's %q", id, firstID)
	}
	deploy(adopted("v3"))
	rep := load.Stop()
	recordLoad(res, rep)
	rep.Check(t, "across the move to premigrate, the rollback before it, the move again and the next upgrade")
	res.Upgrades = 4
	if after := uid(); after != before {
		t.Errorf("the Deployment was recreated: UID %s before the move, %s after", before, after)
	}
	if _, err := env.Client.BatchV1().Jobs(ns).Get(ctx, fullname+"-migrate", metav1.GetOptions{}); err == nil {
		t.Errorf("the team's Job %s-migrate is still there after the move", fullname)
	}
	if got := r.Psql(`select max(version) from schema_migrations`); got != "3" {
		t.Errorf("schema %q after the upgrades, want 3", got)
	}
	id := identityOf(ctx, t, ns, fullname)
	if id == firstID || id == "" {
		t.Fatalf("the upgrade to v3 has identity %q, the move's %q", id, firstID)
	}
	r.AssertWitness(ctx, id)

	// the TTL ends the Job; pods that start after it (a restart) still find their migration recorded
	framework.WaitUntil(t, "the TTL to delete the migration Jobs", 90*time.Second, func(ctx context.Context) (bool, error) {
		return len(r.Jobs(ctx)) == 0, nil
	})
	env.Run.Must(t, env.Kubectl, "rollout", "restart", "-n", ns, "deployment/"+fullname)
	env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", ns, "deployment/"+fullname, "--timeout=2m")
	r.AssertWitness(ctx, id)
}

// identityOf is the identity the Deployment's pod template carries.
func identityOf(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the Deployment %s: %v", name, err)
	}
	return d.Spec.Template.Annotations["premigrate.io/identity"]
}
