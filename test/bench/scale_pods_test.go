//go:build e2e

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/test/framework"
	"github.com/premigrate/premigrate/test/kindcluster"
)

// The waiters at scale as pods on the node, where the node allows (it holds about 110 pods): N pods on one
// migration, each waiting in its init container (the gate; or the real kubectl in the poller image, asking for
// the Job every 2 s) before an app container that sleeps. Everything measured comes from outside the waiters:
// the API server's own request counter, the waiting containers' working set from the kubelet (cAdvisor), and
// the time each pod's app container is running on the harness's watch of the API server after the Job's
// Complete condition arrived on the same watch. That last time includes, for both kinds alike, the kubelet
// noticing the init container's exit (its relist runs every second) and starting the app container.

// podScaleRun is one count of one kind of waiter pod.
type podScaleRun struct {
	Kind               string  `json:"kind"`
	Asked              int     `json:"asked"`              // the count the run was asked for
	Waiters            int     `json:"waiters"`            // the count that ran (the node's free pod slots may be fewer)
	AllWaitingSec      float64 `json:"allWaitingSec"`      // from the first pod's creation until every init container runs
	IdleRequestsPerSec float64 `json:"idleRequestsPerSec"` // all of the API server's requests before the pods exist
	WaitRequestsPerSec float64 `json:"waitRequestsPerSec"` // the same while every pod waits
	StartupRequests    float64 `json:"startupRequests"`    // requests from the first creation until all wait (the kubelet's own included)
	MemoryPerWaiterKiB int64   `json:"memoryPerWaiterKiB"` // mean working set of the waiting containers
	// scheduling-gate: containers the held pods started while they waited (the kubelet's statuses), and the
	// working set of the one gate ungate process that releases them all
	StartedWhileWaiting int     `json:"startedWhileWaiting"`
	UngateMemoryKiB     int64   `json:"ungateMemoryKiB"`
	FirstLetGoSec       float64 `json:"firstLetGoSec"`     // from Complete to the first waiting container's exit (containerd's clock)
	MedianLetGoSec      float64 `json:"medianLetGoSec"`    // the median over the pods
	LastLetGoSec        float64 `json:"lastLetGoSec"`      // from Complete to the last waiting container's exit
	FirstAppStartSec    float64 `json:"firstAppStartSec"`  // from Complete to the first app container running
	LastAppStartSec     float64 `json:"lastAppStartSec"`   // from Complete to the last app container running
	MedianAppStartSec   float64 `json:"medianAppStartSec"` // the median over the pods
}

func TestBenchmarkWaiterPodsAtScale(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t, "bench-scalepods", framework.Restricted())
	createWaiterRBAC(t, ns)
	startUngate(t, ns)
	window := time.Duration(envInt("BENCH_SCALE_WINDOW", 20)) * time.Second
	var runs []podScaleRun
	for _, asked := range envList(t, "BENCH_SCALE_PODS", "10,100") {
		for _, kind := range strings.Split(envOr("BENCH_SCALE_KINDS", "gate,poller,scheduling-gate"), ",") {
			n := asked
			if free := freePodSlots(t) - 1; n > free { // one slot for the migration's pod
				t.Logf("%d %s pods asked, the node has %d free pod slots beside the migration's pod: running %d", asked, kind, free, free)
				n = free
			}
			r := podScaleRun{Kind: kind, Asked: asked, Waiters: n}
			id := fmt.Sprintf("%s-%d", kind, n)
			jobName := "scale-pods-" + id
			a0 := apiRequests(t)
			time.Sleep(window)
			r.IdleRequestsPerSec = (apiRequests(t) - a0) / window.Seconds()

			s0, created := apiRequests(t), time.Now()
			for i := 0; i < n && kind == "scheduling-gate"; i++ {
				if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, heldPod(fmt.Sprintf("%s-%03d", id, i), id, jobName), metav1.CreateOptions{}); err != nil {
					t.Fatalf("creating held pod %d of %d: %v", i+1, n, err)
				}
			}
			for i := 0; i < n && kind != "scheduling-gate"; i++ {
				wait := corev1.Container{Image: "ghcr.io/premigrate/gate:" + env.AppVersion, Args: []string{"wait",
					"--identity", jobName, "--records", "bench-migrations", "--job", jobName, "--timeout", "10m", "--progress-interval", "1h"}}
				if kind == "poller" {
					wait = corev1.Container{Image: "premigrate/bench-poller:dev", Args: []string{"poll", "--job", jobName, "--interval", "2s"}}
				}
				if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, benchPod(fmt.Sprintf("%s-%03d", id, i), id, wait), metav1.CreateOptions{}); err != nil {
					t.Fatalf("creating waiter pod %d of %d: %v", i+1, n, err)
				}
			}
			framework.WaitUntil(t, fmt.Sprintf("%d %s pods to be waiting", n, kind), 10*time.Minute, func(ctx context.Context) (bool, error) {
				pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "bench=" + id})
				if err != nil {
					return false, err
				}
				waiting := 0
				for _, p := range pods.Items {
					if len(p.Status.InitContainerStatuses) > 0 && p.Status.InitContainerStatuses[0].State.Running != nil || schedulingGated(p) {
						waiting++
					}
				}
				return waiting == n, nil
			})
			r.AllWaitingSec = time.Since(created).Seconds()
			time.Sleep(5 * time.Second) // the kubelet's status updates settle; every waiter has listed or polled
			w0 := apiRequests(t)
			r.StartupRequests = w0 - s0
			time.Sleep(window)
			r.WaitRequestsPerSec = (apiRequests(t) - w0) / window.Seconds()
			if kind == "scheduling-gate" {
				// nothing runs in a held pod: the one process that waits for all of them is gate ungate
				r.StartedWhileWaiting = startedContainers(t, ns, id)
				r.UngateMemoryKiB = meanWorkingSetKiB(t, ns, "bench-ungate", "gate")
			} else {
				r.MemoryPerWaiterKiB = meanWorkingSetKiB(t, ns, id, "wait")
			}

			// the migration, and one loop over both watches: Complete, then each pod's app container running
			jw, err := env.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + jobName})
			if err != nil {
				t.Fatal(err)
			}
			pw, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "bench=" + id})
			if err != nil {
				t.Fatal(err)
			}
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: jobName, Labels: map[string]string{"premigrate.io/identity": jobName}},
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
			deadline := time.After(5 * time.Minute)
			for complete.IsZero() || len(started) < n {
				select {
				case ev := <-jw.ResultChan():
					if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type != watch.Deleted && complete.IsZero() {
						for _, c := range j.Status.Conditions {
							if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
								complete = time.Now()
							}
						}
					}
				case ev := <-pw.ResultChan():
					p, ok := ev.Object.(*corev1.Pod)
					if !ok || ev.Type == watch.Deleted {
						continue
					}
					if _, seen := started[p.Name]; !seen && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
						started[p.Name] = time.Now()
					}
				case <-deadline:
					t.Fatalf("%d %s pods: Job %s Complete at %v, %d app containers running: not all within 5 minutes", n, kind, jobName, complete, len(started))
				}
			}
			jw.Stop()
			pw.Stop()
			var after []float64
			for _, at := range started {
				after = append(after, at.Sub(complete).Seconds())
			}
			r.FirstAppStartSec, r.MedianAppStartSec, r.LastAppStartSec = percentile(after, 0), percentile(after, 0.5), percentile(after, 1)
			var letGo []float64
			if kind == "scheduling-gate" {
				letGo = after // no waiting container: the app container's start is the let-go
			} else {
				for _, at := range waitingContainerExits(t, ns, id) {
					letGo = append(letGo, at.Sub(complete).Seconds())
				}
			}
			if len(letGo) != n {
				t.Fatalf("%d %s pods: the runtime has the exit of %d waiting containers", n, kind, len(letGo))
			}
			r.FirstLetGoSec, r.MedianLetGoSec, r.LastLetGoSec = percentile(letGo, 0), percentile(letGo, 0.5), percentile(letGo, 1)
			t.Logf("%4d %-6s pods: all waiting after %.1f s; API requests/s idle %.1f, waiting %.1f (start-up %.0f requests); %d KiB per waiter; after Complete, waiters exited %.2f / %.2f / %.2f s, app containers running %.2f / %.2f / %.2f s (first / median / last)",
				n, kind, r.AllWaitingSec, r.IdleRequestsPerSec, r.WaitRequestsPerSec, r.StartupRequests, r.MemoryPerWaiterKiB,
				r.FirstLetGoSec, r.MedianLetGoSec, r.LastLetGoSec, r.FirstAppStartSec, r.MedianAppStartSec, r.LastAppStartSec)
			runs = append(runs, r)

			// free the node's slots for the next run
			if err := env.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{LabelSelector: "bench=" + id}); err != nil {
				t.Fatal(err)
			}
			if err := env.Client.BatchV1().Jobs(ns).Delete(ctx, jobName, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
				t.Fatal(err)
			}
			framework.WaitUntil(t, fmt.Sprintf("the %d %s pods to be gone", n, kind), 5*time.Minute, func(ctx context.Context) (bool, error) {
				// every pod but gate ungate's, which stays for the next runs
				pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "bench!=bench-ungate"})
				return err == nil && len(pods.Items) == 0, err
			})
		}
	}
	benchRecord("waiterPodsAtScale", map[string]any{"windowSec": window.Seconds(), "runs": runs})
}

// waitingContainerExits is when each waiting container of the pods labelled bench=id exited, by pod, from the
// container runtime on the node (containerd's own record of the exit, in nanoseconds; the API server's copy
// has whole seconds). The node runs on this machine, so its clock is the harness's.
func waitingContainerExits(t *testing.T, ns, id string) map[string]time.Time {
	t.Helper()
	node := kindcluster.Name() + "-control-plane"
	ids, err := env.Run.Stdout(t, "docker", "exec", node, "crictl", "ps", "-a", "-q", "--name", "^wait$", "--label", "io.kubernetes.pod.namespace="+ns)
	if err != nil {
		t.Fatalf("listing the waiting containers on %s: %v", node, err)
	}
	if len(strings.Fields(ids)) == 0 {
		return nil
	}
	args := append([]string{"exec", node, "crictl", "inspect"}, strings.Fields(ids)...)
	raw, err := env.Run.Stdout(t, "docker", args...)
	if err != nil {
		t.Fatalf("crictl inspect on %s: %v", node, err)
	}
	type container struct {
		Status struct {
			FinishedAt time.Time         `json:"finishedAt"`
			Labels     map[string]string `json:"labels"`
		} `json:"status"`
	}
	var list []container
	if err := json.Unmarshal([]byte(raw), &list); err != nil { // one container is an object, not a list
		var one container
		if err := json.Unmarshal([]byte(raw), &one); err != nil {
			t.Fatalf("decoding crictl inspect: %v", err)
		}
		list = []container{one}
	}
	exits := map[string]time.Time{}
	for _, c := range list {
		pod := c.Status.Labels["io.kubernetes.pod.name"]
		if strings.HasPrefix(pod, id+"-") && !c.Status.FinishedAt.IsZero() {
			exits[pod] = c.Status.FinishedAt
		}
	}
	return exits
}

// freePodSlots is how many more pods the (only) node admits: its allocatable pods less the pods on it that
// have not ended.
func freePodSlots(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("the benchmark needs the one-node cluster: %d nodes, %v", len(nodes.Items), err)
	}
	pods, err := env.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodes.Items[0].Name})
	if err != nil {
		t.Fatal(err)
	}
	used := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			used++
		}
	}
	return int(nodes.Items[0].Status.Allocatable.Pods().Value()) - used
}

// meanWorkingSetKiB is the mean working set of one container across the pods labelled bench=id, from the
// kubelet's summary (cAdvisor's numbers, not the waiters' own).
func meanWorkingSetKiB(t *testing.T, ns, id, container string) int64 {
	t.Helper()
	ctx := context.Background()
	nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing nodes: %v", err)
	}
	raw, err := env.Client.CoreV1().RESTClient().Get().Resource("nodes").Name(nodes.Items[0].Name).SubResource("proxy").Suffix("stats/summary").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the kubelet's summary: %v", err)
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
	if err := json.Unmarshal(raw, &summary); err != nil {
		t.Fatalf("decoding the kubelet's summary: %v", err)
	}
	var sum, count int64
	for _, p := range summary.Pods {
		if p.PodRef.Namespace != ns || !strings.HasPrefix(p.PodRef.Name, id+"-") {
			continue
		}
		for _, c := range p.Containers {
			if c.Name == container && c.Memory.WorkingSetBytes != nil {
				sum += *c.Memory.WorkingSetBytes
				count++
			}
		}
	}
	if count == 0 {
		t.Errorf("the kubelet's summary has no %q container of the pods %s-*", container, id)
		return 0
	}
	t.Logf("working set of %d of the %s-* pods' %q containers", count, id, container)
	return sum / count / 1024
}
