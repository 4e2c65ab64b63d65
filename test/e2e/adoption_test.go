//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenarios this file proves (the report lists each; a full run must run each once).
var (
	adopterScenarios               = scenarios.DeclareEach(framework.Adoption, "adopter", framework.In(framework.Matrix, "helm3"), framework.In(framework.Matrix, "helm4"))
	adopterLibraryDefaultsScenario = scenarios.Declare(framework.Adoption, framework.CI, "adopter-library-defaults")
	adopterControlScenario         = scenarios.Declare(framework.Adoption, framework.Matrix, "adopter-control")
	migrationProxySidecarScenario  = scenarios.Declare(framework.Adoption, framework.Matrix, "migration-proxy-sidecar")
)

// The adopter example (examples/ledger): another app's chart that takes premigrate's machinery from the
// library chart. Its evidence is the app's own: the database's clock on every migration (ledger_schema) and
// every app start with the schema it found (ledger_pod_starts), neither written by the gate.

const ledgerImage = "premigrate/ledger:1.0.0"

// ledgerDBManifest is a PostgreSQL the way a user brings one beside the chart: a pod, a Service and the
// Secret with the URL the chart reads.
const ledgerDBManifest = `apiVersion: v1
kind: Secret
metadata:
  name: ledger-db
stringData:
  url: postgres://ledger:ledger-pw@ledger-db:5432/ledger?sslmode=disable
---
apiVersion: v1
kind: Service
metadata:
  name: ledger-db
spec:
  selector:
    app: ledger-db
  ports:
    - port: 5432
      targetPort: 5432
---
apiVersion: v1
kind: Pod
metadata:
  name: ledger-db
  labels:
    app: ledger-db
spec:
  automountServiceAccountToken: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 999
    runAsGroup: 999
    fsGroup: 999
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: postgresql
      image: ghcr.io/premigrate/postgres:15
      imagePullPolicy: Never
      env:
        - {name: POSTGRES_USER, value: ledger}
        - {name: POSTGRES_PASSWORD, value: ledger-pw}
        - {name: POSTGRES_DB, value: ledger}
        - {name: PGDATA, value: /var/lib/postgresql/data/pgdata}
      ports:
        - containerPort: 5432
      readinessProbe:
        exec:
          command: [pg_isready, -U, ledger, -d, ledger, -h, 127.0.0.1]
        periodSeconds: 2
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: [ALL]
      volumeMounts:
        - {name: data, mountPath: /var/lib/postgresql/data}
        - {name: tmp, mountPath: /tmp}
        - {name: run, mountPath: /var/run/postgresql}
  volumes:
    - {name: data, emptyDir: {}}
    - {name: tmp, emptyDir: {}}
    - {name: run, emptyDir: {}}
`

// ledger is one release of the example chart, with its database.
type ledger struct {
	t     *testing.T
	ns    string
	name  string
	helm  string
	db    string // the database psql reads: "ledger" unless a scenario points the app elsewhere
	chart string // the chart deployed: the example's folder unless a scenario builds another copy
}

func newLedger(t *testing.T, helmBin string) *ledger {
	t.Helper()
	ns := env.NewNamespace(t, "ledger", restricted)
	if out, err := env.Run.Input(t, []byte(ledgerDBManifest), env.Kubectl, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("creating the ledger's database: %v\n%s", err, out)
	}
	env.Run.Must(t, env.Kubectl, "wait", "-n", ns, "--for=condition=Ready", "pod/ledger-db", "--timeout=3m")
	return &ledger{t: t, ns: ns, name: "books", helm: helmBin, db: "ledger", chart: env.Example}
}

// deploy runs helm upgrade --install of the example chart with values and returns helm's output and error.
func (l *ledger) deploy(values map[string]any, wait bool) (string, error) {
	l.t.Helper()
	r := env.NewRelease(l.t, l.ns, l.name, l.helm)
	args := []string{"upgrade", "--install", l.name, l.chart, "-n", l.ns, "--timeout", "4m", "--values", r.ValuesFile(values)}
	if wait {
		args = append(args, "--wait")
	}
	out, err := env.Run.Run(l.t, l.helm, args...)
	if strings.Contains(out, "field is immutable") {
		l.t.Fatalf("helm reported an immutable field:\n%s", out)
	}
	return out, err
}

func (l *ledger) psql(query string) string {
	l.t.Helper()
	out, err := env.PodExec(l.ns, "ledger-db", "psql", "-U", "ledger", "-d", l.db, "-Atc", query)
	if err != nil {
		l.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func (l *ledger) psqlInt(query string) int {
	l.t.Helper()
	s := l.psql(query)
	n, err := strconv.Atoi(s)
	if err != nil {
		l.t.Fatalf("query %q returned %q, not a number", query, s)
	}
	return n
}

// earlyStarts counts the app starts the database saw before the schema they were built for was migrated:
// a start that found an older schema, or that came before (by the database's clock) its version's migration.
func (l *ledger) earlyStarts() int {
	l.t.Helper()
	return l.psqlInt(`SELECT count(*) FROM ledger_pod_starts s LEFT JOIN ledger_schema m ON m.version = s.wanted
		WHERE s.seen < s.wanted OR m.applied_at IS NULL OR s.started_at < m.applied_at`)
}

// assertSchema checks that the database migrated exactly versions 1..want, each once, and that at least
// `replicas` pods started on it with nothing early.
func (l *ledger) assertSchema(want, replicas int) {
	l.t.Helper()
	if got := l.psql(`SELECT string_agg(version::text, ',' ORDER BY version) FROM ledger_schema`); got != seq(want) {
		l.t.Errorf("schema versions = %q, want %q", got, seq(want))
	}
	if n := l.earlyStarts(); n != 0 {
		l.t.Errorf("%d app starts came before their migration:\n%s", n, l.psql(`SELECT pod, wanted, seen, started_at FROM ledger_pod_starts ORDER BY started_at`))
	}
	if n := l.psqlInt(fmt.Sprintf(`SELECT count(DISTINCT pod) FROM ledger_pod_starts WHERE wanted = %d`, want)); n < replicas {
		l.t.Errorf("%d pods started for schema %d, want at least %d", n, want, replicas)
	}
}

// assertContracted checks, in the database, that the example's contract steps ran for versions 1..want, each
// once, each after its migration and with no session of an older ledger build connected (the app's own
// evidence: serve names its session by its version), and that only the newest version's table is left.
func (l *ledger) assertContracted(want int) {
	l.t.Helper()
	if got := l.psql(`SELECT string_agg(version::text, ',' ORDER BY version) FROM ledger_contracts`); got != seq(want) {
		l.t.Errorf("contracted versions = %q, want %q", got, seq(want))
	}
	if rows := l.psql(`SELECT string_agg(c.version || ': ' || c.older_sessions, '; ') FROM ledger_contracts c
		WHERE c.older_sessions <> ''`); rows != "" {
		l.t.Errorf("contract steps ran while older ledger builds were connected: %s", rows)
	}
	if n := l.psqlInt(`SELECT count(*) FROM ledger_contracts c JOIN ledger_schema m USING (version) WHERE c.contracted_at < m.applied_at`); n != 0 {
		l.t.Errorf("%d contract steps ran before their migration", n)
	}
	if got := l.psql(`SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE tablename ~ '^ledger_v[0-9]+$'`); got != fmt.Sprintf("ledger_v%d", want) {
		l.t.Errorf("the version tables left are %q, want only ledger_v%d", got, want)
	}
}

func seq(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Itoa(i + 1)
	}
	return strings.Join(parts, ",")
}

// TestAnotherAppsChartAdoptsTheLibraryAndKeepsThePromise installs the example chart and upgrades it five
// times, with Helm 3 and 4, a TTL on the Jobs and a long first migration: every upgrade succeeds without an
// immutable field, and the database saw no app start before its schema. With Helm 4 the example's contract
// step is on: each version's contract ran once, after its migration, with no older build connected.
func TestAnotherAppsChartAdoptsTheLibraryAndKeepsThePromise(t *testing.T) {
	t.Parallel() // the subtests share the cluster (share_test.go)
	for _, helmBin := range []string{env.Helm3, env.Helm4} {
		t.Run(toolName(helmBin), func(t *testing.T) {
			share(t, weightOne, 180*time.Second)
			res := scenario(t, adopterScenarios[toolName(helmBin)], helmBin)
			l := newLedger(t, helmBin)
			// with Helm 4 the example's contract step runs too (a post-install,post-upgrade hook)
			contract := helmBin == env.Helm4
			values := func(v int, extraEnv ...map[string]any) map[string]any {
				return map[string]any{"schemaVersion": v, "contract": contract,
					"migrations": map[string]any{"ttlSecondsAfterFinished": 5, "env": append([]map[string]any{}, extraEnv...)}}
			}
			// the install's migration takes 10 s: the gate must hold the app pods through it
			if out, err := l.deploy(values(1, map[string]any{"name": "LEDGER_MIGRATE_DELAY", "value": "10s"}), true); err != nil {
				t.Fatalf("install: %v\n%s", err, out)
			}
			l.assertSchema(1, 2)
			if contract {
				l.assertContracted(1)
			}
			for v := 2; v <= 6; v++ {
				start := time.Now()
				if out, err := l.deploy(values(v), true); err != nil {
					t.Fatalf("upgrade %d: %v\n%s", v-1, err, out)
				}
				res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
				l.assertSchema(v, 2)
				if contract {
					l.assertContracted(v)
				}
			}
			res.Upgrades = 5
			// the TTL removed the finished hook Jobs: the records, not the Jobs, carry the successes
			framework.WaitUntil(t, "the TTL to remove the migration Jobs", 2*time.Minute, func(ctx context.Context) (bool, error) {
				jobs, err := env.Client.BatchV1().Jobs(l.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=migration,app.kubernetes.io/name=ledger"})
				if err != nil {
					return false, err
				}
				return len(jobs.Items) <= 1, nil // the install's plain Job has no TTL (see the library's Job)
			})
			if t.Failed() {
				return
			}
			// and a restart of every app pod after that is not held: its identity is recorded
			env.Run.Must(t, env.Kubectl, "rollout", "restart", "-n", l.ns, "deployment/"+l.name+"-ledger")
			env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", l.ns, "deployment/"+l.name+"-ledger", "--timeout=2m")
			l.assertSchema(6, 2)
		})
	}
}

// TestTheLibrarysDefaultsHoldForAnotherAppsChart deploys the example chart with none of the library's Job
// settings set (Helm 4) and checks each default by what the cluster did with it: the live Job's deadline and
// kept records; a migration that fails every time gets three pods (backoffLimit 2) and Helm prints its log
// (hookOutputLogs); a migration the app refuses (exit 3) gets one pod (the example's own failFastExitCodes,
// which the library turns into the Job's podFailurePolicy); and an upgrade after
// two failed ones replaces the failed hook Job instead of failing on it (hookDeletePolicy
// before-hook-creation). The database shows that neither failed migration changed the schema.
func TestTheLibrarysDefaultsHoldForAnotherAppsChart(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, adopterLibraryDefaultsScenario, env.Helm4)
	ctx := context.Background()
	l := newLedger(t, env.Helm4)
	values := func(v int, extraEnv ...map[string]any) map[string]any {
		return map[string]any{"schemaVersion": v, "migrations": map[string]any{"env": append([]map[string]any{}, extraEnv...)}}
	}
	liveJob := func() *batchv1.Job {
		t.Helper()
		j, err := env.Client.BatchV1().Jobs(l.ns).Get(ctx, l.name+"-ledger-migrate", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading the hook Job: %v", err)
		}
		return j
	}
	if out, err := l.deploy(values(1), true); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	start := time.Now()
	if out, err := l.deploy(values(2), true); err != nil {
		t.Fatalf("upgrade to schema 2: %v\n%s", err, out)
	}
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	l.assertSchema(2, 2)
	j := liveJob()
	if d := j.Spec.ActiveDeadlineSeconds; d == nil || *d != 900 {
		t.Errorf("the live Job's activeDeadlineSeconds = %s, want the library's default 900", ptrText(d))
	}
	if cmd := strings.Join(j.Spec.Template.Spec.Containers[0].Command, " "); !strings.Contains(cmd, "--keep 20 ") {
		t.Errorf("the live Job's gate run keeps the wrong number of records (want --keep 20, the library's default): %s", cmd)
	}

	// a migration that fails every time (exit 1): retried twice, its log in Helm's output, the Job kept
	out, err := l.deploy(values(3, map[string]any{"name": "LEDGER_MIGRATE_DELAY", "value": "not-a-duration"}), true)
	if err == nil {
		t.Fatalf("the upgrade with a failing migration succeeded:\n%s", out)
	}
	if !strings.Contains(out, "is not a duration") {
		t.Errorf("helm's output does not show the failed migration's log (hookOutputLogs):\n%s", out)
	}
	if j := liveJob(); j.Status.Failed != 3 {
		t.Errorf("the failing migration's Job has %d failed pods, want 3 (the library's backoffLimit 2)", j.Status.Failed)
	}

	// a migration the app refuses (exit 3: schema 1 is older than the database's 2): one pod, not retried
	out, err = l.deploy(values(1, map[string]any{"name": "LEDGER_NOTE", "value": "a downgrade"}), true)
	if err == nil {
		t.Fatalf("the upgrade to an older schema succeeded:\n%s", out)
	}
	if j := liveJob(); j.Status.Failed != 1 || !failedFor(j, "PodFailurePolicy") {
		t.Errorf("the refused migration's Job has %d failed pods and conditions %+v: want 1 pod, failed for its PodFailurePolicy (the example's failFastExitCodes [3])",
			j.Status.Failed, j.Status.Conditions)
	}
	if got := l.psql(`SELECT max(version) FROM ledger_schema`); got != "2" {
		t.Errorf("schema = %s after two failed migrations, want 2", got)
	}

	// the next upgrade replaces the failed hook Job (before-hook-creation) and migrates
	start = time.Now()
	if out, err := l.deploy(values(3), true); err != nil {
		t.Fatalf("the upgrade after two failed ones: %v\n%s", err, out)
	}
	res.DurationsSec = append(res.DurationsSec, time.Since(start).Seconds())
	res.Upgrades = 4
	l.assertSchema(3, 2)
}

// TestTheLedgersEvidenceSeesPodsThatStartBeforeTheirMigration is the adopter scenario's negative control: the
// same install with the gate off (gate.mode none) and the same long migration. The app pods start at once, and
// the database records starts that came before the schema: the check that passes above is not vacuous.
func TestTheLedgersEvidenceSeesPodsThatStartBeforeTheirMigration(t *testing.T) {
	share(t, weightOne, 35*time.Second)
	scenario(t, adopterControlScenario, env.Helm4)
	l := newLedger(t, env.Helm4)
	values := map[string]any{"schemaVersion": 1, "migrations": map[string]any{
		"gate": map[string]any{"mode": "none"},
		"env":  []map[string]any{{"name": "LEDGER_MIGRATE_DELAY", "value": "15s"}},
	}}
	if out, err := l.deploy(values, false); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	// the migration finishes after its delay; the app pods, ungated, started (and recorded it) meanwhile
	env.Run.Must(t, env.Kubectl, "wait", "-n", l.ns, "--for=condition=Complete", "job", "-l", "app.kubernetes.io/component=migration", "--timeout=3m")
	if n := l.earlyStarts(); n == 0 {
		t.Fatalf("without the gate no app start came before its migration: the evidence cannot see a broken gate")
	}
}

// TestTheMigrationRunsThroughADatabaseProxySidecar gives the migration pod a native sidecar, a TCP proxy in
// front of the database, and a URL that reaches the database only through it: the Job completes, the pods are
// gated as before, and the proxy's own log shows the migration's connection. Then the proxy goes into
// pod.initContainers, before a wait-for-db init container that reaches the database through it: the list's
// order is the order the kubelet starts them, so the upgrade passes. The controls: the same wait-for-db with
// the proxy in pod.sidecars (which come after the init containers) fails the upgrade, and so do the proxied
// values without the proxy; no pod of a failed schema starts.
func TestTheMigrationRunsThroughADatabaseProxySidecar(t *testing.T) {
	share(t, weightOne, 90*time.Second)
	scenario(t, migrationProxySidecarScenario, env.Helm4)
	l := newLedger(t, env.Helm4)
	url := "postgres://ledger:ledger-pw@127.0.0.1:6432/ledger?sslmode=disable"
	proxied := []map[string]any{{"name": "LEDGER_MIGRATION_DATABASE_URL", "value": url}}
	proxy := map[string]any{"name": "db-proxy", "image": ledgerImage, "imagePullPolicy": "Never", "restartPolicy": "Always",
		"args": []string{"proxy", "--listen", "127.0.0.1:6432", "--to", "ledger-db:5432"}}
	waitForDB := map[string]any{"name": "wait-for-db", "image": ledgerImage, "imagePullPolicy": "Never",
		"args": []string{"wait-for-db", "--timeout", "10s"}, "env": proxied}
	values := func(v int, initContainers, sidecars []map[string]any) map[string]any {
		return map[string]any{"schemaVersion": v, "migrations": map[string]any{
			"ttlSecondsAfterFinished": nil, "backoffLimit": 0, "env": proxied,
			"pod": map[string]any{"initContainers": initContainers, "sidecars": sidecars},
		}}
	}
	// logs is a container's log in the newest migration Job (the install's may still be completing when the
	// pods it released are Ready)
	logs := func(container string) string {
		jobs, err := env.Client.BatchV1().Jobs(l.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=migration"})
		if err != nil {
			t.Fatal(err)
		}
		var newest *batchv1.Job
		for i, j := range jobs.Items {
			if newest == nil || newest.CreationTimestamp.Before(&j.CreationTimestamp) {
				newest = &jobs.Items[i]
			}
		}
		if newest == nil {
			t.Fatalf("no migration Job in %s", l.ns)
		}
		return env.Run.Must(t, env.Kubectl, "logs", "-n", l.ns, "job/"+newest.Name, "-c", container)
	}
	if out, err := l.deploy(values(1, nil, []map[string]any{proxy}), true); err != nil {
		t.Fatalf("install with the proxy in pod.sidecars: %v\n%s", err, out)
	}
	l.assertSchema(1, 2)
	if log := logs("db-proxy"); !strings.Contains(log, "proxy: connection") {
		t.Fatalf("the proxy saw no connection:\n%s", log)
	}
	if out, err := l.deploy(values(2, []map[string]any{proxy, waitForDB}, nil), true); err != nil {
		t.Fatalf("upgrade with the proxy in pod.initContainers before wait-for-db: %v\n%s", err, out)
	}
	l.assertSchema(2, 2)
	if log := logs("wait-for-db"); !strings.Contains(log, "the database answers") {
		t.Fatalf("wait-for-db did not reach the database through the proxy:\n%s", log)
	}
	// the controls: wait-for-db before the proxy, then no proxy at all; each fails, and nothing of schema 3 starts
	for _, c := range []struct {
		name                     string
		initContainers, sidecars []map[string]any
		failed                   string // the container that must have failed
	}{
		{"wait-for-db with the proxy in pod.sidecars", []map[string]any{waitForDB}, []map[string]any{proxy}, "wait-for-db"},
		{"the proxied URL without the proxy", nil, nil, "migrate"},
	} {
		if out, err := l.deploy(values(3, c.initContainers, c.sidecars), true); err == nil {
			t.Fatalf("the upgrade with %s succeeded:\n%s", c.name, out)
		}
		if !containerFailed(t, l.ns, l.name+"-ledger-migrate", c.failed) {
			t.Errorf("the upgrade with %s failed, but not in its %s container", c.name, c.failed)
		}
		if got := l.psql(`SELECT max(version) FROM ledger_schema`); got != "2" {
			t.Errorf("schema = %s after the upgrade with %s, want 2", got, c.name)
		}
		if n := l.psqlInt(`SELECT count(*) FROM ledger_pod_starts WHERE wanted = 3`); n != 0 {
			t.Errorf("%d pods of schema 3 started although the migration with %s failed", n, c.name)
		}
	}
	env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", l.ns, "deployment/"+l.name+"-ledger", "--timeout=1m")
}

// containerFailed says whether a pod of Job job in ns has a container (or init container) named name that
// ended with a non-zero exit code.
func containerFailed(t *testing.T, ns, job, name string) bool {
	t.Helper()
	pods, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		t.Fatalf("listing the pods of Job %s: %v", job, err)
	}
	for _, p := range pods.Items {
		for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if st.Name == name && st.State.Terminated != nil && st.State.Terminated.ExitCode != 0 {
				return true
			}
		}
	}
	return false
}

// ptrText prints an optional number: its value, or "unset".
func ptrText(p *int64) string {
	if p == nil {
		return "unset"
	}
	return strconv.FormatInt(*p, 10)
}
