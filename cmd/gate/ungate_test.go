package main

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/ungate"
)

func heldPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: types.UID("uid-" + name),
			Labels:      map[string]string{"premigrate.io/gated-by": "shop-app-gate"},
			Annotations: map[string]string{ungate.IdentityAnnotation: identity, ungate.JobAnnotation: "shop-app-migrate-" + identity},
		},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: ungate.SchedulingGate}}},
	}
}

func TestUngateReleasesAHeldPodOnceItsMigrationJobCompleted(t *testing.T) {
	h := newHarness(recordsConfigMap(), job(batchv1.JobComplete), heldPod("shop-app-1"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- cli.ExitCode(run(ctx, []string{"ungate", "--selector", "premigrate.io/gated-by=shop-app-gate", "--records", "shop-app-migrations"}, h.env))
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := h.cs.CoreV1().Pods("shop").Get(ctx, "shop-app-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Spec.SchedulingGates) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod is still held; stderr:\n%s", &h.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if got := <-done; got != exitcode.OK {
		t.Errorf("exit code after a stop = %d, want 0; stderr:\n%s", got, &h.stderr)
	}
}

func TestUngateRequiresASelectorThatNamesThePodsAndTheRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no selector", []string{"--records", "r"}, "--selector is required"},
		{"a selector of every pod", []string{"--selector", "", "--records", "r"}, "--selector is required"},
		{"a selector that does not parse", []string{"--selector", "a in (", "--records", "r"}, "--selector"},
		{"no records", []string{"--selector", "a=b"}, "--records is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			if got := h.run(append([]string{"ungate"}, tc.args...)...); got != exitcode.Usage || !strings.Contains(h.stderr.String(), tc.want) {
				t.Errorf("exit code %d, want %d with %q; stderr:\n%s", got, exitcode.Usage, tc.want, &h.stderr)
			}
		})
	}
}
