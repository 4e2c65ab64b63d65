//go:build e2e

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/test/framework"
)

var bench struct {
	sync.Mutex
	numbers map[string]any
}

func benchRecord(key string, v any) {
	bench.Lock()
	defer bench.Unlock()
	if bench.numbers == nil {
		bench.numbers = map[string]any{}
	}
	bench.numbers[key] = v
}

// writeBenchReport writes results/bench-<time>.json when a benchmark ran.
func writeBenchReport() error {
	bench.Lock()
	defer bench.Unlock()
	if len(bench.numbers) == 0 {
		return nil
	}
	helm3, _ := env.Run.RunCmd(nil, framework.Cmd{Bin: env.Helm3, Args: []string{"version", "--short"}})
	helm4, _ := env.Run.RunCmd(nil, framework.Cmd{Bin: env.Helm4, Args: []string{"version", "--short"}})
	doc := map[string]any{
		"date":    time.Now().UTC().Format(time.RFC3339),
		"machine": fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU()),
		"versions": map[string]string{
			"kubernetes": "v1.37.2", "helm3": strings.TrimSpace(helm3), "helm4": strings.TrimSpace(helm4), "go": runtime.Version(),
		},
		"results": bench.numbers,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the bench report: %w", err)
	}
	path := filepath.Join(env.Results, "bench-"+time.Now().UTC().Format("20060102-150405")+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Printf("bench report: %s\n%s\n", path, b)
	return nil
}

// percentile is the sample of rank floor(p*(n-1)) in sorted order: p 0.5 is the median of an odd count and the
// lower median of an even one (never a value above the middle), p 0 the minimum, p 1 the maximum.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[int(p*float64(len(s)-1))]
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// benchPod is a pod whose init container waits (the gate or the kubectl poller) before a long main container.
func benchPod(name, id string, wait corev1.Container) *corev1.Pod {
	wait.Name = "wait"
	wait.Env = append(wait.Env, corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
	spec := framework.RestrictedPod(corev1.PodSpec{
		ServiceAccountName: "waiter",
		InitContainers:     []corev1.Container{wait},
		Containers:         []corev1.Container{{Name: "app", Image: "premigrate/bench-poller:dev", Args: []string{"sleep", "1h"}}},
	})
	spec.SecurityContext.RunAsUser = ptr.To[int64](65532)
	for i := range spec.InitContainers {
		spec.InitContainers[i].ImagePullPolicy = corev1.PullNever
		spec.InitContainers[i].SecurityContext = spec.Containers[0].SecurityContext
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": id}}, Spec: spec}
}

func createWaiterRBAC(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "waiter"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "waiter"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"bench-migrations"}, Verbs: []string{"get", "list", "watch"}},
	}}
	if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "waiter"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "waiter"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "waiter", Namespace: ns}}}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bench-migrations"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitDecision is when a waiter's log says it let its pod go: the first field of its last line, after
// timeKey ("time=" in the gate's log lines, "" in the poller's).
func waitDecision(t *testing.T, ns, pod, timeKey string) time.Time {
	t.Helper()
	raw, err := env.Run.Stdout(t, env.Kubectl, "logs", "-n", ns, pod, "-c", "wait")
	if err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSpace(raw)
	lines := strings.Split(out, "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) == 0 {
		t.Fatalf("pod %s: empty wait log", pod)
	}
	ts, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], timeKey))
	if err != nil || !strings.HasPrefix(f[0], timeKey) {
		t.Fatalf("pod %s: last wait log line %q has no timestamp: %v", pod, lines[len(lines)-1], err)
	}
	return ts
}

func TestBenchmarkGateLatencyBesideKubectlPolling(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t, "bench-gate", framework.Restricted())
	createWaiterRBAC(t, ns)
	runs := envInt("BENCH_RUNS", 20)
	var gateLat, pollLat, gateStart, pollStart []float64
	var peakGateMem int64
	for i := 0; i < runs; i++ {
		id := fmt.Sprintf("bench-%02d", i)
		jobName := "mig-" + id
		gated := benchPod("gated-"+id, id, corev1.Container{Image: "ghcr.io/premigrate/gate:" + env.AppVersion, Args: []string{"wait",
			"--identity", id, "--records", "bench-migrations", "--job", jobName, "--timeout", "5m"}})
		polled := benchPod("polled-"+id, id, corev1.Container{Image: "premigrate/bench-poller:dev", Args: []string{"poll", "--job", jobName, "--interval", "2s"}})
		pods := []*corev1.Pod{gated, polled}
		if i%2 == 1 { // alternate which waiter is created first
			pods[0], pods[1] = pods[1], pods[0]
		}
		for _, p := range pods {
			if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		framework.WaitUntil(t, "both waiters to be waiting", 2*time.Minute, func(ctx context.Context) (bool, error) {
			for _, name := range []string{gated.Name, polled.Name} {
				p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if len(p.Status.InitContainerStatuses) == 0 || p.Status.InitContainerStatuses[0].State.Running == nil {
					return false, nil
				}
			}
			return true, nil
		})
		time.Sleep(time.Second) // the gate has listed and is watching; the poller has polled once
		w, err := env.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + jobName})
		if err != nil {
			t.Fatal(err)
		}
		pw, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: jobName, Labels: map[string]string{"premigrate.io/identity": id}},
			Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: framework.RestrictedPod(corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "migrate", Image: "premigrate/bench-poller:dev", Args: []string{"sleep", "2s"}}},
			})}},
		}
		job.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](65532)
		if _, err := env.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var complete time.Time
		started := map[string]time.Time{}
		stopMem := make(chan struct{})
		memDone := make(chan int64)
		go func() { memDone <- samplePeakMemory(ns, gated.Name, "wait", stopMem) }()
		// one loop reads both watches, so each event is timestamped when it arrives: the Job's Complete
		// condition, and each waiter pod's app container running (no polling interval in the numbers)
		deadline := time.After(2 * time.Minute)
		for complete.IsZero() || len(started) < 2 {
			select {
			case ev := <-w.ResultChan():
				if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type != watch.Deleted && complete.IsZero() {
					for _, c := range j.Status.Conditions {
						if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
							complete = time.Now()
						}
					}
				}
			case ev := <-pw.ResultChan():
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Deleted || (p.Name != gated.Name && p.Name != polled.Name) {
					continue
				}
				if _, seen := started[p.Name]; !seen && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
					started[p.Name] = time.Now()
				}
			case <-deadline:
				t.Fatalf("run %d: Job %s complete at %v, app containers started %v: not all within 2 minutes", i+1, jobName, complete, started)
			}
		}
		w.Stop()
		pw.Stop()
		close(stopMem)
		if m := <-memDone; m > peakGateMem {
			peakGateMem = m
		}
		g := waitDecision(t, ns, gated.Name, "time=").Sub(complete).Seconds()
		p := waitDecision(t, ns, polled.Name, "").Sub(complete).Seconds()
		gateLat, pollLat = append(gateLat, g), append(pollLat, p)
		gateStart = append(gateStart, started[gated.Name].Sub(complete).Seconds())
		pollStart = append(pollStart, started[polled.Name].Sub(complete).Seconds())
		t.Logf("run %d/%d: gate let go %.3fs after Complete, kubectl poller %.3fs; app containers seen running after %.3fs / %.3fs",
			i+1, runs, g, p, gateStart[i], pollStart[i])
		for _, name := range []string{gated.Name, polled.Name} {
			_ = env.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
	}
	res := map[string]any{
		"runs":                     runs,
		"gateDecisionP50Sec":       percentile(gateLat, 0.5),
		"gateDecisionP95Sec":       percentile(gateLat, 0.95),
		"pollerDecisionP50Sec":     percentile(pollLat, 0.5),
		"pollerDecisionP95Sec":     percentile(pollLat, 0.95),
		"gateAppStartP50Sec":       percentile(gateStart, 0.5),
		"gateAppStartP95Sec":       percentile(gateStart, 0.95),
		"pollerAppStartP50Sec":     percentile(pollStart, 0.5),
		"pollerAppStartP95Sec":     percentile(pollStart, 0.95),
		"gatePeakWorkingSetBytes":  peakGateMem,
		"decisionP50RatioPollGate": percentile(pollLat, 0.5) / maxf(percentile(gateLat, 0.5), 0.001),
		"appStartP50RatioPollGate": percentile(pollStart, 0.5) / maxf(percentile(gateStart, 0.5), 0.001),
	}
	benchRecord("gateLatency", res)
	t.Logf("gate latency: %+v", res)
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

// samplePeakMemory polls the kubelet's summary for a container's working set until stop closes.
func samplePeakMemory(ns, pod, container string, stop <-chan struct{}) int64 {
	var peak int64
	nodes, err := env.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		return 0
	}
	node := nodes.Items[0].Name
	for {
		select {
		case <-stop:
			return peak
		case <-time.After(250 * time.Millisecond):
		}
		raw, err := env.Client.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix("stats/summary").DoRaw(context.Background())
		if err != nil {
			continue
		}
		var summary struct {
			Pods []struct {
				PodRef     struct{ Name, Namespace string } `json:"podRef"`
				Containers []struct {
					Name   string `json:"name"`
					Memory struct {
						WorkingSetBytes *int64 `json:"workingSetBytes"`
					} `json:"memory"`
				} `json:"containers"`
			} `json:"pods"`
		}
		if json.Unmarshal(raw, &summary) != nil {
			continue
		}
		for _, p := range summary.Pods {
			if p.PodRef.Name != pod || p.PodRef.Namespace != ns {
				continue
			}
			for _, c := range p.Containers {
				if c.Name == container && c.Memory.WorkingSetBytes != nil && *c.Memory.WorkingSetBytes > peak {
					peak = *c.Memory.WorkingSetBytes
				}
			}
		}
	}
}

func TestBenchmarkImageSizes(t *testing.T) {
	archives, err := filepath.Glob(filepath.Join(os.Getenv("PREMIGRATE_CACHE"), "images", "*.tar"))
	if err != nil || len(archives) == 0 {
		t.Fatalf("no image archives: %v", err)
	}
	sizes := map[string]int64{}
	for _, a := range archives {
		fi, err := os.Stat(a)
		if err != nil {
			t.Fatal(err)
		}
		sizes[strings.TrimSuffix(filepath.Base(a), ".tar")] = fi.Size()
	}
	benchRecord("imageArchiveBytes", sizes)
	t.Logf("image archive sizes: %v", sizes)
}
