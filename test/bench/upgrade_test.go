//go:build e2e

package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/premigrate/premigrate/test/framework"
)

// upgradeVariant is one release of the upgrade-overhead benchmark: the same chart and the same change,
// with the migration on or off, the gate delivered one way or the other, Helm 3 or Helm 4.
type upgradeVariant struct {
	name   string
	helm   string
	values map[string]any
	rel    *framework.Release
	wall   []float64
	phases map[string][]float64
}

// upgradeTimeline is what a watch of one namespace saw during one `helm upgrade --wait`, on this
// machine's clock: when the migration Job appeared, when its pod succeeded, when the Job was Complete,
// when the first new app pod appeared and when the last new app pod became Ready.
type upgradeTimeline struct {
	mu                                                   sync.Mutex
	jobCreated, jobPodSucceeded, jobComplete, appCreated time.Time
	appReady                                             map[string]time.Time
	// appSeen is when the watch first saw each new app pod (its creation)
	appSeen map[string]time.Time
	// old pods and Jobs existed before the upgrade: their events (the previous hook Job deleted, old
	// app pods terminating) are not part of this upgrade's timeline
	old map[types.UID]bool
}

func (tl *upgradeTimeline) seen(ev watch.Event, at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	first := func(t *time.Time) {
		if t.IsZero() {
			*t = at
		}
	}
	switch o := ev.Object.(type) {
	case *batchv1.Job:
		if tl.old[o.UID] {
			return
		}
		if ev.Type == watch.Added {
			first(&tl.jobCreated)
		}
		for _, c := range o.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				first(&tl.jobComplete)
			}
		}
	case *corev1.Pod:
		if tl.old[o.UID] {
			return
		}
		switch o.Labels["app.kubernetes.io/component"] {
		case "migration":
			if o.Status.Phase == corev1.PodSucceeded {
				first(&tl.jobPodSucceeded)
			}
		case "app":
			first(&tl.appCreated)
			if _, ok := tl.appSeen[o.Name]; !ok {
				tl.appSeen[o.Name] = at
			}
			for _, c := range o.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					if _, ok := tl.appReady[o.Name]; !ok {
						tl.appReady[o.Name] = at
					}
				}
			}
		}
	}
}

// watchUpgrade records the timeline of ns until stop is closed. Pods and Jobs that exist when it starts
// are old.
func watchUpgrade(t *testing.T, ns string, stop <-chan struct{}) (*upgradeTimeline, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tl := &upgradeTimeline{appReady: map[string]time.Time{}, appSeen: map[string]time.Time{}, old: map[types.UID]bool{}}
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing pods of %s: %v", ns, err)
	}
	for _, p := range pods.Items {
		tl.old[p.UID] = true
	}
	jobs, err := env.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing jobs of %s: %v", ns, err)
	}
	for _, j := range jobs.Items {
		tl.old[j.UID] = true
	}
	pw, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: pods.ResourceVersion})
	if err != nil {
		t.Fatalf("watching pods of %s: %v", ns, err)
	}
	jw, err := env.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: jobs.ResourceVersion})
	if err != nil {
		t.Fatalf("watching jobs of %s: %v", ns, err)
	}
	var wg sync.WaitGroup
	for _, w := range []watch.Interface{pw, jw} {
		wg.Add(1)
		go func(w watch.Interface) {
			defer wg.Done()
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					tl.seen(ev, time.Now())
				case <-stop:
					w.Stop()
					return
				}
			}
		}(w)
	}
	return tl, func() { cancel(); wg.Wait() }
}

// phases splits one upgrade's wall time into the steps the timeline saw (seconds). Steps the upgrade did
// not have (no Job without the migration) are left out.
func (tl *upgradeTimeline) phases(start, end time.Time, processStarts map[string]time.Time) map[string]float64 {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var lastReady time.Time
	for _, at := range tl.appReady {
		if at.After(lastReady) {
			lastReady = at
		}
	}
	out := map[string]float64{}
	put := func(name string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() {
			out[name] = to.Sub(from).Seconds()
		}
	}
	if !tl.jobCreated.IsZero() {
		put("1 helm start -> Job created", start, tl.jobCreated)
		put("2 Job created -> its pod Succeeded", tl.jobCreated, tl.jobPodSucceeded)
		put("3 pod Succeeded -> Job Complete (Job controller)", tl.jobPodSucceeded, tl.jobComplete)
		if tl.appCreated.Before(tl.jobComplete) {
			// job mode: the app pods are created with the Job and wait in the gate
			put("4 first new app pod created before Job Complete by", tl.appCreated, tl.jobComplete)
		} else {
			put("4 Job Complete -> first new app pod", tl.jobComplete, tl.appCreated)
		}
	} else {
		put("4 helm start -> first new app pod", start, tl.appCreated)
	}
	put("5 first new app pod -> last new app pod Ready", tl.appCreated, lastReady)
	if len(processStarts) > 0 {
		// per new pod, from the later of its creation and the Job's Complete (when the gate may let it go)
		// to its app process's first instant (the demo's own clock, the witness): the cost of the gate's
		// step to the app, the median over the pods
		var per []float64
		for pod, created := range tl.appSeen {
			started, ok := processStarts[pod]
			if !ok {
				continue
			}
			from := created
			if tl.jobComplete.After(from) {
				from = tl.jobComplete
			}
			per = append(per, started.Sub(from).Seconds())
		}
		if len(per) > 0 {
			out["7 max(pod created, Job Complete) -> its app process started (median of pods)"] = percentile(per, 0.5)
		}
	}
	put("6 last app pod Ready -> helm returns", lastReady, end)
	return out
}

func TestBenchmarkUpgradeOverheadWithAndWithoutTheMigration(t *testing.T) {
	runs := envInt("BENCH_UPGRADES", 9)
	off := map[string]any{"migration": map[string]any{"enabled": false}}
	variants := []*upgradeVariant{
		{name: "helm3 migration off", helm: env.Helm3, values: off},
		{name: "helm3 migration on", helm: env.Helm3, values: map[string]any{}},
		{name: "helm3 migration on, gate as an image volume", helm: env.Helm3,
			values: map[string]any{"gate": map[string]any{"delivery": "imageVolume"}}},
		{name: "helm3 migration on, no gate on the app pods", helm: env.Helm3,
			values: map[string]any{"gate": map[string]any{"mode": "none"}}},
		{name: "helm3 migration on, job mode", helm: env.Helm3,
			values: map[string]any{"migration": map[string]any{"mode": "job"}, "postgresql": map[string]any{"auth": map[string]any{"password": "bench-password"}}}},
		{name: "helm4 migration off", helm: env.Helm4, values: off},
		{name: "helm4 migration on", helm: env.Helm4, values: map[string]any{}},
		{name: "helm4 migration on, the app container waits (gate copied)", helm: env.Helm4,
			values: map[string]any{"gate": map[string]any{"waitIn": "app"}}},
		{name: "helm4 migration on, the app container waits (gate as an image volume)", helm: env.Helm4,
			values: map[string]any{"gate": map[string]any{"waitIn": "app", "delivery": "imageVolume"}}},
		{name: "helm4 migration on, job mode, the app container waits (gate as an image volume)", helm: env.Helm4,
			values: map[string]any{"gate": map[string]any{"waitIn": "app", "delivery": "imageVolume"},
				"migration": map[string]any{"mode": "job"}, "postgresql": map[string]any{"auth": map[string]any{"password": "bench-password"}}}},
		{name: "helm4 migration on, no gate on the app pods", helm: env.Helm4,
			values: map[string]any{"gate": map[string]any{"mode": "none"}}},
		{name: "helm4 migration on, the pods held by a scheduling gate", helm: env.Helm4,
			values: map[string]any{"gate": map[string]any{"waitIn": "schedulingGate"}}},
		{name: "helm4 migration on, job mode", helm: env.Helm4,
			values: map[string]any{"migration": map[string]any{"mode": "job"}, "postgresql": map[string]any{"auth": map[string]any{"password": "bench-password"}}}},
	}
	if only := os.Getenv("BENCH_VARIANTS"); only != "" {
		// a regexp that matches whole names of variants: a same-run table of some of them
		re, err := regexp.Compile("^(?:" + only + ")$")
		if err != nil {
			t.Fatalf("BENCH_VARIANTS %q: %v", only, err)
		}
		variants = slices.DeleteFunc(variants, func(v *upgradeVariant) bool { return !re.MatchString(v.name) })
		if len(variants) == 0 {
			t.Fatalf("BENCH_VARIANTS %q matches no variant", only)
		}
	}
	for i, v := range variants {
		v.phases = map[string][]float64{}
		v.rel = env.NewRelease(t, env.NewNamespace(t, fmt.Sprintf("bench-up%d", i), framework.Restricted()), "app", v.helm)
		if v.values["migration"] != nil && v.values["migration"].(map[string]any)["enabled"] == false {
			// without the migration the schema must exist: install with it, then turn it off
			v.rel.MustDeploy(framework.BaseValues())
		}
		v.rel.MustDeploy(framework.Merge(framework.BaseValues(), v.values))
	}
	floorNS := env.NewNamespace(t, "bench-floor", framework.Restricted())
	var bareHarness, bareAPI []float64
	bareJob(t, floorNS, -1) // a warm-up, not a sample: the first Job of a new namespace pays for its setup
	for i := 0; i < runs; i++ {
		change := map[string]any{"env": []any{framework.EnvVar("GREETING", fmt.Sprint(i))}}
		line := []string{}
		h, a := bareJob(t, floorNS, i)
		bareHarness, bareAPI = append(bareHarness, h), append(bareAPI, a)
		line = append(line, fmt.Sprintf("bare Job %.1fs", h))
		for k := range variants {
			v := variants[(i+k)%len(variants)] // rotate which variant goes first
			stop := make(chan struct{})
			tl, wait := watchUpgrade(t, v.rel.Namespace, stop)
			start := time.Now()
			_, d := v.rel.MustDeploy(framework.Merge(framework.Merge(framework.BaseValues(), v.values), change))
			end := time.Now()
			close(stop)
			wait()
			v.wall = append(v.wall, d.Seconds())
			starts := processStarts(context.Background(), v.rel)
			for name, sec := range tl.phases(start, end, starts) {
				v.phases[name] = append(v.phases[name], sec)
			}
			if done, ok := v.rel.MigrationFinished(v.rel.AppIdentity(context.Background())); ok && len(starts) > 0 {
				// the database's end of the migration (demo_migrate_runs) to the first app process of its
				// identity (the demo's clock): in job mode, where the pods wait before it, the decision to app
				// start as seen from evidence the gate does not write
				first := time.Time{}
				for _, at := range starts {
					if first.IsZero() || at.Before(first) {
						first = at
					}
				}
				name := "8 migration finished (database) -> first app process started"
				v.phases[name] = append(v.phases[name], first.Sub(done).Seconds())
			}
			line = append(line, fmt.Sprintf("%s %.1fs", v.name, d.Seconds()))
		}
		t.Logf("run %d/%d: %s", i+1, runs, strings.Join(line, ", "))
	}
	res := map[string]any{"runs": runs}
	medians := map[string]float64{}
	for _, v := range variants {
		phases := map[string]any{}
		names := make([]string, 0, len(v.phases))
		for name := range v.phases {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			phases[name] = map[string]float64{"p50": percentile(v.phases[name], 0.5), "min": percentile(v.phases[name], 0), "max": percentile(v.phases[name], 1)}
		}
		medians[v.name] = percentile(v.wall, 0.5)
		res[v.name] = map[string]any{"wallSec": v.wall, "medianSec": medians[v.name], "phasesSec": phases}
		t.Logf("%s: median %.2fs (%.1f-%.1f); phases (p50): %v", v.name, medians[v.name], percentile(v.wall, 0), percentile(v.wall, 1), phases)
	}
	ratios := map[string]float64{}
	for _, v := range variants {
		base := strings.Fields(v.name)[0] + " migration off"
		if v.name != base {
			ratios[v.name+" / "+base] = medians[v.name] / maxf(medians[base], 0.001)
		}
	}
	res["ratios"] = ratios
	t.Logf("ratios (medians): %v", ratios)
	// the floor: a bare upgrade of the same Helm plus a bare Job; what premigrate adds is the rest
	bareJobSec := percentile(bareHarness, 0.5)
	res["bareJob"] = map[string]any{"harnessSec": bareHarness, "apiServerSec": bareAPI, "medianSec": bareJobSec}
	overhead := map[string]float64{}
	for _, v := range variants {
		base := strings.Fields(v.name)[0] + " migration off"
		if v.name != base {
			overhead[v.name] = medians[v.name] - (medians[base] + bareJobSec)
		}
	}
	res["aboveFloorSec"] = overhead
	t.Logf("bare Job: median %.2fs (API server: %.0fs); above the floor (median - (bare upgrade + bare Job)): %v",
		bareJobSec, percentile(bareAPI, 0.5), overhead)
	benchRecord("upgradeOverhead", res)
}

// processStarts is when each app process of the release's current identity started, by its own clock (the
// demo_pod_starts witness), by pod name.
func processStarts(ctx context.Context, r *framework.Release) map[string]time.Time {
	r.T.Helper()
	id := r.AppIdentity(ctx)
	out := map[string]time.Time{}
	rows := r.Psql(fmt.Sprintf(`select pod || ' ' || to_char(min(process_started_at) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
from demo_pod_starts where identity = '%s' group by pod`, id))
	for _, line := range strings.Split(rows, "\n") {
		pod, at, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
			out[pod] = t
		}
	}
	return out
}
