package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/yaml"
)

// Release is one Helm release of the chart, driven by one Helm CLI (3 or 4).
type Release struct {
	env       *Env
	T         *testing.T
	Namespace string
	Name      string
	Helm      string
	// PsqlArgs, when set, is how psql reaches the app's database (pod, user, database) when it is not the
	// embedded one: an external database brought beside the chart
	PsqlArgs []string
	// AppSelector, when set, is the label selector of the app pods (AppPods, the witness); default: the
	// release's instance and app.kubernetes.io/component=app
	AppSelector string
}

// NewRelease is the release name of the chart in namespace ns, driven by the Helm CLI helmBin.
func (e *Env) NewRelease(t *testing.T, ns, name, helmBin string) *Release {
	return &Release{env: e, T: t, Namespace: ns, Name: name, Helm: helmBin}
}

// Fullname is the chart's fullname for this release (framework.Fullname).
func (r *Release) Fullname() string { return Fullname(r.Name) }

// AnchorName is the release's records ConfigMap (a Helm object; it held the records up to chart 0.3.0); StoreName is the
// ConfigMap that keeps the records, written by gate run only.
func (r *Release) AnchorName() string { return r.Fullname() + "-migrations" }
func (r *Release) StoreName() string  { return r.Fullname() + "-migration-records" }

// Records returns the records kept in the store; none while it does not exist.
func (r *Release) Records(ctx context.Context) map[string]string {
	r.T.Helper()
	cm, err := r.env.Client.CoreV1().ConfigMaps(r.Namespace).Get(ctx, r.StoreName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		r.T.Fatalf("reading the records: %v", err)
	}
	return cm.Data
}

// ValuesFile writes values as a YAML file for --values.
func (r *Release) ValuesFile(values map[string]any) string {
	r.T.Helper()
	b, err := yaml.Marshal(values)
	if err != nil {
		r.T.Fatalf("encoding values: %v", err)
	}
	f := filepath.Join(r.T.TempDir(), "values.yaml")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		r.T.Fatalf("writing values: %v", err)
	}
	return f
}

// Deploy runs `helm upgrade --install --wait` and returns its output, how long it took and its error.
func (r *Release) Deploy(values map[string]any, extra ...string) (string, time.Duration, error) {
	r.T.Helper()
	return r.RunDeploy(r.DeployArgs(values, extra...))
}

// DeployArgs writes the values file (it fails the test on error: call it on the test's goroutine) and returns
// the arguments of `helm upgrade --install --wait`.
func (r *Release) DeployArgs(values map[string]any, extra ...string) []string {
	r.T.Helper()
	return append([]string{"upgrade", "--install", r.Name, r.env.Chart, "-n", r.Namespace, "--wait", "--timeout", "4m",
		"--values", r.ValuesFile(values)}, extra...)
}

// RunDeploy runs Helm with args and returns its output, how long it took and its error. It never fails the
// test, so it may run on another goroutine (deployAsync).
func (r *Release) RunDeploy(args []string) (string, time.Duration, error) {
	start := time.Now()
	out, err := r.env.Run.Run(r.T, r.Helm, args...)
	return out, time.Since(start), err
}

// MustDeploy is deploy that fails the test on error or on an immutable-field message.
func (r *Release) MustDeploy(values map[string]any, extra ...string) (string, time.Duration) {
	r.T.Helper()
	out, d, err := r.Deploy(values, extra...)
	if err != nil {
		r.T.Fatalf("%s upgrade --install %s: %v", filepath.Base(r.Helm), r.Name, err)
	}
	if strings.Contains(out, "field is immutable") {
		r.T.Fatalf("helm reported an immutable field:\n%s", out)
	}
	return out, d
}

// Psql runs a query in the embedded PostgreSQL and returns its unaligned output.
func (r *Release) Psql(query string) string {
	r.T.Helper()
	args := []string{r.Fullname() + "-postgresql-0", "psql", "-U", "premigrate", "-d", "premigrate"}
	if r.PsqlArgs != nil {
		args = r.PsqlArgs
	}
	out, err := r.env.PodExec(r.Namespace, args[0], append(args[1:], "-Atc", query)...)
	if err != nil {
		r.T.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func (r *Release) PsqlInt(query string) int {
	r.T.Helper()
	s := r.Psql(query)
	n, err := strconv.Atoi(s)
	if err != nil {
		r.T.Fatalf("query %q returned %q, not a number", query, s)
	}
	return n
}

// MigrationJob returns the Job labelled with identity id, or nil.
func (r *Release) MigrationJob(ctx context.Context, id string) *batchv1.Job {
	r.T.Helper()
	jobs, err := r.env.Client.BatchV1().Jobs(r.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + r.Name + ",premigrate.io/identity=" + id,
	})
	if err != nil {
		r.T.Fatalf("listing migration Jobs: %v", err)
	}
	if len(jobs.Items) == 0 {
		return nil
	}
	return &jobs.Items[0]
}

// AppIdentity is the migration identity on the app Deployment's pod template.
func (r *Release) AppIdentity(ctx context.Context) string {
	r.T.Helper()
	d, err := r.env.Client.AppsV1().Deployments(r.Namespace).Get(ctx, r.Fullname(), metav1.GetOptions{})
	if err != nil {
		r.T.Fatalf("getting the app Deployment: %v", err)
	}
	return d.Spec.Template.Annotations["premigrate.io/identity"]
}

// AppPods lists the app pods whose template carries identity id.
func (r *Release) AppPods(ctx context.Context, id string) []corev1.Pod {
	r.T.Helper()
	selector := r.AppSelector
	if selector == "" {
		selector = "app.kubernetes.io/instance=" + r.Name + ",app.kubernetes.io/component=app"
	}
	pods, err := r.env.Client.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		r.T.Fatalf("listing app pods: %v", err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Annotations["premigrate.io/identity"] == id {
			out = append(out, p)
		}
	}
	return out
}

// AppStart is when the pod's app container (the first container) started, if it did.
func AppStart(p corev1.Pod) (time.Time, bool) {
	starts := AppStarts(p)
	if len(starts) == 0 {
		return time.Time{}, false
	}
	return starts[len(starts)-1], true
}

// AppStarts are the starts of the pod's app container (the first container) that the API server still
// knows: the one before its last restart and the current one, oldest first.
func AppStarts(p corev1.Pod) []time.Time {
	var out []time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if len(p.Spec.Containers) > 0 && cs.Name != p.Spec.Containers[0].Name {
			continue
		}
		if t := cs.LastTerminationState.Terminated; t != nil && !t.StartedAt.IsZero() {
			out = append(out, t.StartedAt.Time)
		}
		switch {
		case cs.State.Running != nil:
			out = append(out, cs.State.Running.StartedAt.Time)
		case cs.State.Terminated != nil && !cs.State.Terminated.StartedAt.IsZero():
			out = append(out, cs.State.Terminated.StartedAt.Time)
		}
	}
	return out
}

// AppContainerWaits is true when the pod's app container is the gate waiting (gate.waitIn app).
func AppContainerWaits(p corev1.Pod) bool {
	return len(p.Spec.Containers) > 0 && len(p.Spec.Containers[0].Command) > 0 && p.Spec.Containers[0].Command[0] == "/premigrate/gate"
}

// The witness: evidence of "no app pod before its migration" that the gate does not write.
//   - demo_pod_starts: every demo app process writes, at its first database connection, its pod, its
//     identity (from the pod's premigrate.io/identity annotation), its version, the schema version it saw,
//     and when the process started (its own clock).
//   - demo_migrate_runs: the migration writes, inside the database, when each run started and finished
//     (the database's clock).
//   - the API server: when the kubelet started each app container.
// The gate's records ConfigMap plays no part.

// witnessQuery lists the app processes that broke the promise: a schema older than their version, no
// finished migration of their identity, or a start before that migration finished.
const witnessQuery = `select p.pod || ' (v' || p.app_version || ', identity ' || p.identity || ') saw schema ' || p.schema_seen ||
 ', started ' || to_char(p.process_started_at at time zone 'UTC', 'HH24:MI:SS.MS') || ', its migration finished ' ||
 coalesce(to_char(r.finished at time zone 'UTC', 'HH24:MI:SS.MS'), 'never')
from demo_pod_starts p left join (select identity, min(finished_at) as finished from demo_migrate_runs group by identity) r using (identity)
where p.identity is not null and (p.schema_seen < p.app_version or r.finished is null or p.process_started_at < r.finished)
order by p.id`

// WitnessViolations lists what the witness saw go wrong, one line per app process.
func (r *Release) WitnessViolations() []string {
	r.T.Helper()
	out := r.Psql(witnessQuery)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// MigrationFinished is when the database says the first run of identity id finished.
func (r *Release) MigrationFinished(id string) (time.Time, bool) {
	r.T.Helper()
	out := r.Psql(fmt.Sprintf("select to_char(min(finished_at) at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') from demo_migrate_runs where identity = '%s'", id))
	if out == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, out)
	if err != nil {
		r.T.Fatalf("finished_at of identity %s: %q: %v", id, out, err)
	}
	return t, true
}

// AssertWitness checks, from evidence the gate does not write, that no app process ever started before its
// migration or saw a schema older than its version, and that the app pods of identity id did report their
// start (an oracle that saw nothing proves nothing). Their containers' start times, from the API server, must
// not precede the database's finish of the migration either.
func (r *Release) AssertWitness(ctx context.Context, id string) {
	r.T.Helper()
	for _, v := range r.WitnessViolations() {
		r.T.Errorf("witness: %s", v)
	}
	pods := r.AppPods(ctx, id)
	if len(pods) == 0 {
		r.T.Fatalf("no app pod carries identity %s", id)
	}
	// each current pod by name: rows of earlier pods of the identity (before a restart or a rollback) must
	// not stand in for pods that never reported
	WaitUntil(r.T, "each current app pod of identity "+id+" to report its start to the witness", time.Minute, func(context.Context) (bool, error) {
		for _, p := range pods {
			if r.PsqlInt(fmt.Sprintf("select count(*) from demo_pod_starts where identity = '%s' and pod = '%s'", id, p.Name)) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	done, ok := r.MigrationFinished(id)
	if !ok {
		r.T.Fatalf("the database has no finished migration run of identity %s", id)
	}
	for _, p := range pods {
		if AppContainerWaits(p) {
			// with gate.waitIn app the kubelet starts the container to wait: the app process's own start
			// (witnessQuery) is the evidence there
			continue
		}
		for _, started := range AppStarts(p) { // every start the API server knows, not only the latest
			// container start times have a resolution of one second
			if started.Before(done.Truncate(time.Second)) {
				r.T.Errorf("the API server says pod %s started its app container at %s, before the database finished migration %s at %s",
					p.Name, started.Format(time.RFC3339), id, done.Format(time.RFC3339Nano))
			}
		}
	}
}

// AssertHeld checks, for d, that the pods of identity id exist and that none of them starts its app: by the API
// server (container starts) and by the app's own record of its starts (demo_pod_starts).
func (r *Release) AssertHeld(ctx context.Context, id string, d time.Duration) {
	r.T.Helper()
	WaitUntil(r.T, "a pod of identity "+id, 2*time.Minute, func(ctx context.Context) (bool, error) {
		return len(r.AppPods(ctx, id)) > 0, nil
	})
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		for _, p := range r.AppPods(ctx, id) {
			if _, started := AppStart(p); started {
				r.T.Fatalf("pod %s of identity %s started its app container although that identity's migration never succeeded", p.Name, id)
			}
		}
	}
	if n := r.PsqlInt(fmt.Sprintf("select count(*) from demo_pod_starts where identity = '%s'", id)); n != 0 {
		r.T.Fatalf("the app recorded %d starts of identity %s, whose migration never succeeded", n, id)
	}
}

// Template renders the chart with the Helm 3 CLI, for kubectl apply.
func (r *Release) Template(values map[string]any) []byte {
	r.T.Helper()
	out, err := r.env.Run.Run(r.T, r.env.Helm3, "template", r.Name, r.env.Chart, "-n", r.Namespace, "--values", r.ValuesFile(values))
	if err != nil {
		r.T.Fatal(err)
	}
	return []byte(out)
}

// Apply pipes a rendering into kubectl apply and returns kubectl's output.
func (r *Release) Apply(manifest []byte) string {
	r.T.Helper()
	out, err := r.env.Run.Input(r.T, manifest, r.env.Kubectl, "apply", "-n", r.Namespace, "-f", "-")
	if err != nil {
		r.T.Fatalf("kubectl apply: %v", err)
	}
	if strings.Contains(out, "field is immutable") {
		r.T.Fatalf("kubectl apply hit an immutable field:\n%s", out)
	}
	return out
}

// RolledOut waits for the app Deployment's rollout.
func (r *Release) RolledOut(timeout time.Duration) {
	r.T.Helper()
	r.env.Run.Must(r.T, r.env.Kubectl, "rollout", "status", "-n", r.Namespace, "deployment/"+r.Fullname(), "--timeout", timeout.String())
}

func (r *Release) Jobs(ctx context.Context) []batchv1.Job {
	r.T.Helper()
	jobs, err := r.env.Client.BatchV1().Jobs(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + r.Name + ",app.kubernetes.io/component=migration"})
	if err != nil {
		r.T.Fatalf("listing Jobs: %v", err)
	}
	return jobs.Items
}

// JobIdentity is the identity label of the hook-mode migration Job.
func (r *Release) JobIdentity(ctx context.Context) string {
	r.T.Helper()
	j, err := r.env.Client.BatchV1().Jobs(r.Namespace).Get(ctx, r.Fullname()+"-migrate", metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return ""
		}
		r.T.Fatalf("getting the migration Job: %v", err)
	}
	return j.Labels["premigrate.io/identity"]
}
