package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/dbsecret"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/migration"
	"github.com/premigrate/premigrate/internal/rollout"
	"github.com/premigrate/premigrate/internal/ungate"
)

const identity = "abc123def0"

func job(cond batchv1.JobConditionType) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: "shop-app-migrate-" + identity, Namespace: "shop",
			Labels: map[string]string{"app.kubernetes.io/instance": "shop", "premigrate.io/identity": identity},
		},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{
			Type: cond, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit",
		}}},
	}
}

func recordsConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shop-app-migrations", Namespace: "shop"}}
}

type harness struct {
	cs             *fake.Clientset
	stdout, stderr bytes.Buffer
	env            *env
	execed         []string
}

func newHarness(objects ...runtime.Object) *harness {
	h := &harness{cs: fake.NewClientset(objects...)}
	h.env = &env{
		Streams:       cli.Streams{Out: &h.stdout, Err: &h.stderr},
		getenv:        func(k string) string { return map[string]string{"POD_NAMESPACE": "shop"}[k] },
		namespaceFile: "",
		newClients: func(k8sFlags, func(string) string) (*apiClients, error) {
			return &apiClients{
				jobs:       func(ns string) jobClient { return h.cs.BatchV1().Jobs(ns) },
				configMaps: func(ns string) configMapClient { return h.cs.CoreV1().ConfigMaps(ns) },
				pods:       func(ns string) dbid.PodGetter { return h.cs.CoreV1().Pods(ns) },
				claims:     func(ns string) dbid.ClaimGetter { return h.cs.CoreV1().PersistentVolumeClaims(ns) },
				workloads:  func(ns string) migration.WorkloadAnnotator { return fakeWorkloads{cs: h.cs, ns: ns} },
				heldPods:   func(ns string) ungate.Pods { return h.cs.CoreV1().Pods(ns) },
				events:     func(ns string) ungate.Events { return h.cs.CoreV1().Events(ns) },
				secrets:    func(ns string) dbsecret.Client { return h.cs.CoreV1().Secrets(ns) },
				rollout: func(ns, name string) rollout.Source {
					return rollout.Deployment{Name: name, Deployments: h.cs.AppsV1().Deployments(ns), ReplicaSets: h.cs.AppsV1().ReplicaSets(ns), Pods: h.cs.CoreV1().Pods(ns)}
				},
			}, nil
		},
		now: time.Now,
		exec: func(argv []string) error {
			h.execed = argv
			return errExecInTest
		},
	}
	return h
}

// errExecInTest is what the harness's exec returns: the process cannot be replaced in a test.
var errExecInTest = errors.New("exec in a test")

// run runs the gate with args and returns its exit code.
func (h *harness) run(args ...string) int {
	return cli.ExitCode(run(context.Background(), args, h.env))
}

// logged is how s appears within the msg value of a log line: quotes and backslashes escaped.
func logged(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func TestWaitExitCodes(t *testing.T) {
	waitArgs := []string{"wait", "--identity", identity, "--records", "shop-app-migrations",
		"--job", "shop-app-migrate-" + identity, "--timeout", "300ms"}
	tests := []struct {
		name    string
		objects []runtime.Object
		args    []string
		want    int
		stderr  string
	}{
		{name: "exits 0 when the Job is Complete", objects: []runtime.Object{job(batchv1.JobComplete)}, args: waitArgs, want: 0,
			stderr: "succeeded: Job shop-app-migrate-" + identity + " is Complete"},
		{name: "exits 1 when the Job Failed", objects: []runtime.Object{job(batchv1.JobFailed), recordsConfigMap()}, args: waitArgs, want: 1,
			stderr: "kubectl logs -n shop job/shop-app-migrate-" + identity + " -c migrate"},
		{name: "exits 4 on timeout", args: waitArgs, want: exitcode.Timeout, stderr: "timed out after 300ms"},
		{name: "exits 2 without an identity", args: []string{"wait", "--records", "r"}, want: 2, stderr: "--identity is required"},
		{name: "exits 2 with an identity that is no ConfigMap key", args: []string{"wait", "--identity", "a/b", "--records", "r"}, want: 2,
			stderr: "not a valid ConfigMap key"},
		{name: "exits 2 without the records ConfigMap", args: []string{"wait", "--identity", identity}, want: 2, stderr: "--records is required"},
		{name: "exits 2 without the Job's name", args: []string{"wait", "--identity", identity, "--records", "r"},
			want: 2, stderr: "--job is required"},
		{name: "exits 2 on an unknown flag", args: []string{"wait", "--bogus"}, want: 2, stderr: "flag provided but not defined"},
		{name: "exits 2 on an unknown command", args: []string{"launch"}, want: 2, stderr: `unknown command "launch"`},
		{name: "exits 2 without a command", args: nil, want: 2, stderr: "Usage: gate <command>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(tt.objects...)
			if got := h.run(tt.args...); got != tt.want {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", got, tt.want, &h.stderr)
			}
			if !strings.Contains(h.stderr.String(), tt.stderr) {
				t.Errorf("stderr does not contain %q:\n%s", tt.stderr, &h.stderr)
			}
		})
	}
}

func TestWaitRunsTheCommandAfterDashDashOnlyOnceTheMigrationSucceeded(t *testing.T) {
	tests := []struct {
		name     string
		job      *batchv1.Job
		wantExec bool
		want     int
	}{
		{name: "Complete", job: job(batchv1.JobComplete), wantExec: true, want: exitcode.Failed /* the test's exec fails */},
		{name: "Failed", job: job(batchv1.JobFailed), want: exitcode.Failed},
		{name: "absent until the timeout", want: exitcode.Timeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objects := []runtime.Object{recordsConfigMap()}
			if tt.job != nil {
				objects = append(objects, tt.job)
			}
			h := newHarness(objects...)
			got := h.run("wait", "--identity", identity, "--records", "shop-app-migrations", "--job", "shop-app-migrate-"+identity,
				"--timeout", "300ms", "--", "/app", "serve", "--port=8080")
			if got != tt.want {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", got, tt.want, &h.stderr)
			}
			if tt.wantExec {
				if strings.Join(h.execed, " ") != "/app serve --port=8080" {
					t.Errorf("executed %q, want the command after --", h.execed)
				}
				if !strings.Contains(h.stderr.String(), "starting /app") || !strings.Contains(h.stderr.String(), errExecInTest.Error()) {
					t.Errorf("stderr does not say what started and why it failed:\n%s", &h.stderr)
				}
			} else if h.execed != nil {
				t.Errorf("executed %q although the migration did not succeed", h.execed)
			}
		})
	}
}

func TestWaitIgnoresACompleteJobOfItsIdentityUnderAnotherName(t *testing.T) {
	stale := job(batchv1.JobComplete)
	stale.Name = "shop-app-migrate"
	h := newHarness(stale, recordsConfigMap())
	if got := h.run("wait", "--identity", identity, "--records", "shop-app-migrations", "--job", "shop-app-migrate-"+identity,
		"--timeout", "300ms"); got != exitcode.Timeout {
		t.Fatalf("exit code = %d, want %d (the stale Job must not release the pod); stderr:\n%s", got, exitcode.Timeout, &h.stderr)
	}
}

func TestWaitNeedsANamespace(t *testing.T) {
	h := newHarness()
	h.env.getenv = func(string) string { return "" }
	if got := h.run("wait", "--identity", identity, "--records", "r", "--job", "j"); got != 2 {
		t.Fatalf("exit code = %d, want 2", got)
	}
	if !strings.Contains(h.stderr.String(), "no namespace") {
		t.Errorf("stderr does not explain:\n%s", &h.stderr)
	}
}

func TestRunRequiresItsRecordsFlags(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--records", "r", "--job", "j", "--", "true"},
		{"run", "--identity", identity, "--job", "j", "--", "true"},
		{"run", "--identity", identity, "--records", "r", "--", "true"},
		{"run", "--identity", identity, "--records", "r", "--job", "j", "--keep", "-1", "--", "true"},
	} {
		h := newHarness()
		if got := h.run(args...); got != 2 {
			t.Errorf("%v: exit code = %d, want 2", args, got)
		}
	}
}

func TestProbeExitCodes(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ok.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer broken.Close()
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"exits 0 on a 2xx answer", []string{"probe", "--url", ok.URL}, 0},
		{"exits 4 on timeout", []string{"probe", "--url", broken.URL, "--timeout", "100ms", "--interval", "10ms"}, exitcode.Timeout},
		{"exits 2 without a URL", []string{"probe"}, 2},
		{"exits 2 with an invalid URL", []string{"probe", "--url", "ftp://x"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			if got := h.run(tt.args...); got != tt.want {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", got, tt.want, &h.stderr)
			}
		})
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	flags := map[string][]string{
		"wait":  {"namespace", "kubeconfig", "identity", "records", "job", "timeout", "progress-interval"},
		"run":   {"namespace", "kubeconfig", "identity", "records", "job", "keep", "wait-for-configmap", "fail-fast-exit-codes"},
		"probe": {"url", "timeout", "interval"},
	}
	h := newHarness()
	if got := h.run("--help"); got != 0 {
		t.Fatalf("gate --help: exit code %d", got)
	}
	all := h.stdout.String()
	for cmd, names := range flags {
		h := newHarness()
		if got := h.run(cmd, "--help"); got != 0 {
			t.Fatalf("gate %s --help: exit code %d", cmd, got)
		}
		for _, name := range names {
			for where, text := range map[string]string{"gate --help": all, "gate " + cmd + " --help": h.stdout.String()} {
				if !strings.Contains(text, "-"+name+" ") {
					t.Errorf("%s does not document --%s", where, name)
				}
			}
		}
	}
}

func TestVersionPrintsTheBuildVersion(t *testing.T) {
	h := newHarness()
	if got := h.run("version"); got != 0 || h.stdout.String() != "gate dev\n" {
		t.Errorf("gate version: exit %d, output %q", got, h.stdout.String())
	}
}

func TestLogLinesAreKeyValuePairsStartingWithTheTime(t *testing.T) {
	h := newHarness(job(batchv1.JobComplete))
	if got := h.run("wait", "--identity", identity, "--records", "shop-app-migrations", "--job", "shop-app-migrate-"+identity); got != exitcode.OK {
		t.Fatalf("exit code = %d; stderr:\n%s", got, &h.stderr)
	}
	line := regexp.MustCompile(`^time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=[A-Z]+ msg=`)
	for _, l := range strings.Split(strings.TrimSpace(h.stderr.String()), "\n") {
		if !line.MatchString(l) {
			t.Errorf("log line without time, level and msg: %q", l)
		}
	}
}
