//go:build e2e

package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/premigrate/premigrate/test/framework"
)

// The gate at scale: 10, 100 and 1000 waiters on one migration, as processes beside the cluster that talk to
// its API server with the waiters' own ServiceAccount (the RBAC a gated pod has), against the 2 s poller. The
// node holds about 100 pods, so processes are the way to a thousand; the API server's work per waiter is the
// same (the gate: one list and one watch each of the Job and the records ConfigMap; the poller: one GET of the
// Job every 2 s). What is measured comes from outside the waiters: the API server's own request counter
// (apiserver_request_total), the kernel's resident memory of each process, and the time each process exits
// after the Job's Complete condition arrives on the harness's watch.

// waiterCreds is what a waiter process needs to reach the API server as the waiter ServiceAccount.
type waiterCreds struct {
	server, caFile, tokenFile, kubeconfig string
}

func newWaiterCreds(t *testing.T, ns string) waiterCreds {
	t.Helper()
	raw, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatalf("reading %s: %v", env.Kubeconfig, err)
	}
	cluster := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	tok, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "waiter",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of the waiter ServiceAccount: %v", err)
	}
	dir := t.TempDir()
	c := waiterCreds{server: cluster.Server, caFile: filepath.Join(dir, "ca.crt"), tokenFile: filepath.Join(dir, "token"), kubeconfig: filepath.Join(dir, "kubeconfig")}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: kind, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: waiter, user: {tokenFile: %q}}]
contexts: [{name: waiter, context: {cluster: kind, user: waiter, namespace: %q}}]
current-context: waiter
`, c.server, c.caFile, c.tokenFile, ns)
	for path, data := range map[string][]byte{c.caFile: cluster.CertificateAuthorityData, c.tokenFile: []byte(tok.Status.Token), c.kubeconfig: []byte(kc)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// buildBenchBinary builds a command of this repository for the host.
func buildBenchBinary(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	// built as what ships is built: from the product module alone (hack/images.sh)
	if _, err := env.Run.RunCmd(t, framework.Cmd{Bin: "go", Args: []string{"build", "-o", out, pkg}, Dir: env.RepoRoot,
		Env: map[string]string{"GOWORK": "off"}}); err != nil {
		t.Fatal(err)
	}
	return out
}

// apiRequests is the API server's count of requests it has served, all verbs and resources (the waiters'
// and, a small constant beside them, the cluster's own controllers').
func apiRequests(t *testing.T) float64 {
	t.Helper()
	raw, err := env.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// rssKiB is the resident memory of a process, from the kernel.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}

// scaleRun is one count of one kind of waiter.
type scaleRun struct {
	Kind                string  `json:"kind"`
	Waiters             int     `json:"waiters"`
	IdleRequestsPerSec  float64 `json:"idleRequestsPerSec"`  // all of the API server's requests while nothing waits
	WaitRequestsPerSec  float64 `json:"waitRequestsPerSec"`  // the same while the waiters wait
	StartupRequests     float64 `json:"startupRequests"`     // requests from the first start until all waited
	MemoryPerWaiterKiB  int64   `json:"memoryPerWaiterKiB"`  // mean resident memory of a waiter process
	FirstLetGoSec       float64 `json:"firstLetGoSec"`       // from Complete to the first waiter's exit
	LastLetGoSec        float64 `json:"lastLetGoSec"`        // from Complete to the last waiter's exit
	FailedWaiters       int     `json:"failedWaiters"`       // waiters that exited non-zero
	CompleteAfterJobSec float64 `json:"completeAfterJobSec"` // from the Job's creation to its Complete condition
}

func TestBenchmarkWaitersAtScale(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t, "bench-scale", framework.Restricted())
	createWaiterRBAC(t, ns)
	creds := newWaiterCreds(t, ns)
	gateBin := buildBenchBinary(t, "./cmd/gate")
	pollerBin := buildBenchBinary(t, "./hack/bench-poller")
	window := time.Duration(envInt("BENCH_SCALE_WINDOW", 20)) * time.Second
	var runs []scaleRun
	for _, n := range []int{10, 100, 1000} {
		if n > envInt("BENCH_SCALE_MAX", 1000) {
			continue
		}
		for _, kind := range []string{"gate", "poller"} {
			jobName := fmt.Sprintf("scale-%s-%d", kind, n)
			args := func(int) []string {
				if kind == "gate" {
					return []string{gateBin, "wait", "--kubeconfig", creds.kubeconfig, "--namespace", ns, "--identity", jobName, "--records", "bench-migrations",
						"--job", jobName, "--timeout", "10m", "--progress-interval", "1h"}
				}
				return []string{pollerBin, "get", "--server", creds.server, "--ca", creds.caFile, "--token", creds.tokenFile,
					"--namespace", ns, "--job", jobName, "--interval", "2s"}
			}
			r := scaleRun{Kind: kind, Waiters: n}
			a0 := apiRequests(t)
			time.Sleep(window)
			r.IdleRequestsPerSec = (apiRequests(t) - a0) / window.Seconds()

			// start the waiters; each one's exit time is taken by the harness
			exits := make([]time.Time, n)
			codes := make([]int, n)
			pids := make([]int, n)
			var wg sync.WaitGroup
			s0 := apiRequests(t)
			for i := 0; i < n; i++ {
				a := args(i)
				cmd := exec.Command(a[0], a[1:]...)
				cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
				cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
				if err := cmd.Start(); err != nil {
					t.Fatalf("starting waiter %d: %v", i, err)
				}
				pids[i] = cmd.Process.Pid
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					err := cmd.Wait()
					exits[i] = time.Now()
					if err != nil {
						codes[i] = 1
					}
				}(i)
			}
			// let them connect and settle: the gate lists and watches; the poller polls
			time.Sleep(5*time.Second + time.Duration(n)*5*time.Millisecond)
			w0 := apiRequests(t)
			r.StartupRequests = w0 - s0
			time.Sleep(window)
			r.WaitRequestsPerSec = (apiRequests(t) - w0) / window.Seconds()
			var mem int64
			for _, pid := range pids {
				mem += rssKiB(pid)
			}
			r.MemoryPerWaiterKiB = mem / int64(n)

			// the migration: a Job that sleeps 2 s; its Complete condition on the harness's watch
			jw, err := env.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + jobName})
			if err != nil {
				t.Fatal(err)
			}
			job := &batchv1.Job{
				// the gate finds the Jobs of its identity by this label, and counts only the one named --job
				ObjectMeta: metav1.ObjectMeta{Name: jobName, Labels: map[string]string{"premigrate.io/identity": jobName}},
				Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: framework.RestrictedPod(corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "migrate", Image: "premigrate/bench-poller:dev", Args: []string{"sleep", "2s"}}},
				})}},
			}
			job.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](65532)
			created := time.Now()
			if _, err := env.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var complete time.Time
			deadline := time.After(3 * time.Minute)
			for complete.IsZero() {
				select {
				case ev := <-jw.ResultChan():
					if j, ok := ev.Object.(*batchv1.Job); ok {
						for _, c := range j.Status.Conditions {
							if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
								complete = time.Now()
							}
						}
					}
				case <-deadline:
					t.Fatalf("%s: Job %s not Complete in 3 minutes", kind, jobName)
				}
			}
			jw.Stop()
			r.CompleteAfterJobSec = complete.Sub(created).Seconds()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				<-done
				t.Errorf("%d %s waiters: not all let go within 5 minutes of Complete", n, kind)
			}
			first, last := exits[0], exits[0]
			for i, e := range exits {
				if e.Before(first) {
					first = e
				}
				if e.After(last) {
					last = e
				}
				r.FailedWaiters += codes[i]
			}
			r.FirstLetGoSec, r.LastLetGoSec = first.Sub(complete).Seconds(), last.Sub(complete).Seconds()
			if r.FailedWaiters > 0 {
				t.Errorf("%d of %d %s waiters exited non-zero", r.FailedWaiters, n, kind)
			}
			t.Logf("%4d %-6s: API requests/s idle %.1f, waiting %.1f (start-up %0.f requests); %d KiB per waiter; let go %.3f-%.3f s after Complete",
				n, kind, r.IdleRequestsPerSec, r.WaitRequestsPerSec, r.StartupRequests, r.MemoryPerWaiterKiB, r.FirstLetGoSec, r.LastLetGoSec)
			runs = append(runs, r)
		}
	}
	benchRecord("waitersAtScale", map[string]any{"windowSec": window.Seconds(), "runs": runs})
}
