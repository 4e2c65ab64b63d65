//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/test/framework"
)

var contractAfterOldPodsScenario = scenarios.Declare(framework.Contract, "contract-after-old-pods")

// contractShutdownDelay is how long an old pod keeps its process (and its database sessions) after SIGTERM: the
// demo's SHUTDOWN_DELAY, inside a grace period longer than it. Helm's --wait ends long before: terminating pods
// no longer count as replicas.
const contractShutdownDelay = 40 * time.Second

// contractRow is a row of demo_contracts: the contract step as the database saw it start.
type contractRow struct {
	appVersion    int
	identity      string
	startedAt     time.Time
	otherSessions string
}

func contractRows(t *testing.T, r *framework.Release) []contractRow {
	t.Helper()
	out := r.Psql(`select app_version || '|' || coalesce(identity, '') || '|' || (extract(epoch from started_at) * 1000)::bigint || '|' || array_to_string(other_sessions, ', ') from demo_contracts order by id`)
	var rows []contractRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, "|", 4)
		if len(f) != 4 {
			continue
		}
		v, _ := strconv.Atoi(f[0])
		ms, _ := strconv.ParseInt(f[2], 10, 64)
		rows = append(rows, contractRow{appVersion: v, identity: f[1], startedAt: time.UnixMilli(ms), otherSessions: f[3]})
	}
	return rows
}

// podEnds records when each pod of the release's app left the API server (the watch's DELETED event), by name.
type podEnds struct {
	mu   sync.Mutex
	gone map[string]time.Time
}

func watchPodEnds(ctx context.Context, t *testing.T, ns, selector string) *podEnds {
	t.Helper()
	w, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("watching the app's pods: %v", err)
	}
	e := &podEnds{gone: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Deleted {
				e.mu.Lock()
				e.gone[p.Name] = time.Now()
				e.mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.Stop)
	return e
}

func (e *podEnds) of(pods []corev1.Pod) (last time.Time, missing []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range pods {
		at, ok := e.gone[p.Name]
		if !ok {
			missing = append(missing, p.Name)
		}
		if at.After(last) {
			last = at
		}
	}
	return last, missing
}

// TestTheContractStepRunsOnlyOnceNoOlderPodIsLeft upgrades v1 -> v2 with a contract step (the demo's, which
// records in the database when it started and which sessions of other app versions the database had then),
// the old pods keeping their process 40 s after SIGTERM. The contract runs after the last v1 pod is gone (the
// API server's DELETED events), the database saw no v1 session at its start, and the records hold it. Control,
// the same upgrade v2 -> v3 with the contract as a plain post-upgrade hook (what charts do today): the database
// sees the v2 sessions at its start.
func TestTheContractStepRunsOnlyOnceNoOlderPodIsLeft(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, contractAfterOldPodsScenario, env.Helm4)
	ctx := context.Background()
	ns := env.NewNamespace(t, "contract", restricted)
	r := env.NewRelease(t, ns, "app", env.Helm4)
	values := func(tag string, contract bool) map[string]any {
		v := framework.Merge(framework.BaseValues(), map[string]any{
			"image":                         map[string]any{"tag": tag},
			"env":                           []any{framework.EnvVar("SHUTDOWN_DELAY", contractShutdownDelay.String())},
			"terminationGracePeriodSeconds": int(contractShutdownDelay.Seconds()) + 20,
		})
		if contract {
			v = framework.Merge(v, map[string]any{"migration": map[string]any{"contract": map[string]any{"command": []any{"/demo", "contract"}}}})
		}
		return v
	}
	_, d := r.MustDeploy(values("v1", true))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	old := r.AppPods(ctx, r.AppIdentity(ctx))
	if len(old) != 2 {
		t.Fatalf("v1 runs %d pods, want 2", len(old))
	}
	ends := watchPodEnds(ctx, t, ns, "app.kubernetes.io/instance="+r.Name+",app.kubernetes.io/component=app")

	_, d = r.MustDeploy(values("v2", true))
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Numbers["upgradeWithContractSec"] = d.Seconds()
	id := r.AppIdentity(ctx)
	lastGone, missing := ends.of(old)
	if len(missing) > 0 {
		t.Fatalf("the v1 pods %v were still there when helm upgrade with the contract ended (%s)", missing, d.Round(time.Second))
	}
	rows := contractRows(t, r)
	var v2 *contractRow
	for i := range rows {
		if rows[i].appVersion == 2 {
			if v2 != nil {
				t.Errorf("the contract of v2 ran twice: %+v", rows)
			}
			v2 = &rows[i]
		}
	}
	if v2 == nil {
		t.Fatalf("the contract of v2 never ran: demo_contracts %+v", rows)
	}
	t.Logf("timeline (v1 -> v2): the last v1 pod left the API server at %s, the contract started at %s by the database's clock (%s later); helm upgrade took %s",
		lastGone.UTC().Format("15:04:05.000"), v2.startedAt.UTC().Format("15:04:05.000"), v2.startedAt.Sub(lastGone).Round(time.Millisecond), d.Round(time.Second))
	res.Numbers["contractAfterLastOldPodSec"] = v2.startedAt.Sub(lastGone).Seconds()
	if v2.otherSessions != "" {
		t.Errorf("the contract of v2 started while the database had sessions of other versions: %s", v2.otherSessions)
	}
	if v2.identity != id {
		t.Errorf("the contract ran for identity %q, the Deployment runs %q", v2.identity, id)
	}
	if !v2.startedAt.After(lastGone.Add(-time.Second)) {
		t.Errorf("the contract started at %s, before the last v1 pod left at %s", v2.startedAt, lastGone)
	}
	e, found, err := record.Lookup(r.Records(ctx), id)
	if err != nil || !found || e.ContractedAt.IsZero() {
		t.Errorf("the records hold no contract step for %s (found %v, %v): %+v", id, found, err, e)
	}
	r.AssertWitness(ctx, id)

	// control: the contract as a plain post-upgrade hook, without the gate
	old = r.AppPods(ctx, id)
	control := framework.Merge(values("v3", false), map[string]any{"extraObjects": []any{fmt.Sprintf(contractHookControl, r.Fullname())}})
	_, d = r.MustDeploy(control)
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 2
	var v3 *contractRow
	for _, row := range contractRows(t, r) {
		if row.appVersion == 3 {
			v3 = &row
		}
	}
	switch {
	case v3 == nil:
		t.Errorf("control: the plain post-upgrade hook's contract did not run")
	case !strings.Contains(v3.otherSessions, "demo serve v2 "):
		t.Errorf("control: the plain post-upgrade hook's contract saw no v2 session (%q): the database witness cannot tell a contract run too early", v3.otherSessions)
	default:
		_, stillThere := ends.of(old)
		t.Logf("control: the plain post-upgrade hook's contract started at %s with %d v2 pods not yet gone; the database saw: %s",
			v3.startedAt.UTC().Format("15:04:05.000"), len(stillThere), v3.otherSessions)
	}
}

// contractHookControl is the contract as charts run it today: a post-upgrade hook Job that runs the command
// once Helm's --wait is satisfied. %[1]s: the chart's fullname.
const contractHookControl = `apiVersion: batch/v1
kind: Job
metadata:
  name: %[1]s-contract-control
  annotations:
    helm.sh/hook: post-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: contract
          image: ghcr.io/premigrate/demo:v3
          imagePullPolicy: Never
          args: [contract]
          env:
            - name: DATABASE_URL
              valueFrom:
                secretKeyRef:
                  name: %[1]s-postgresql
                  key: url
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
`
