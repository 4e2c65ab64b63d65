package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/migration"
)

// fakeWorkloads annotates the fake clientset's workloads as kubeclient.WorkloadClient does a real API server's.
type fakeWorkloads struct {
	cs *fake.Clientset
	ns string
}

func (f fakeWorkloads) Annotate(ctx context.Context, resource, name, key, value, fieldManager string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
	opts := metav1.PatchOptions{FieldManager: fieldManager}
	var err error
	switch resource {
	case "deployments":
		_, err = f.cs.AppsV1().Deployments(f.ns).Patch(ctx, name, types.MergePatchType, patch, opts)
	case "statefulsets":
		_, err = f.cs.AppsV1().StatefulSets(f.ns).Patch(ctx, name, types.MergePatchType, patch, opts)
	default:
		_, err = f.cs.AppsV1().DaemonSets(f.ns).Patch(ctx, name, types.MergePatchType, patch, opts)
	}
	return err
}

func deployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Annotations: map[string]string{"kept": "yes"}}}
}

func TestRunAnnotatesTheGuardedWorkloadsWithTheRecordedIdentitiesOnceItsOwnIsRecorded(t *testing.T) {
	const older = "0123456789"
	store := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shop-app-migration-records", Namespace: "shop"},
		Data: map[string]string{older: `{"completedAt":"2026-12-01T10:00:00.000Z","job":"old"}`, "pruned": "fedcba9876"}}
	cases := []struct {
		name     string
		script   string
		wantCode int
		want     string // the annotation; empty: none
	}{
		{name: "after a migration that succeeded", script: "true", wantCode: 0, want: older + " " + identity},
		{name: "never after one that failed", script: "exit 1", wantCode: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(recordsConfigMap(), store.DeepCopy(), deployment("shop-app"))
			got := h.run("run", "--identity", identity, "--records", "shop-app-migrations", "--store", "shop-app-migration-records",
				"--job", "shop-app-migrate", "--guard-workload", "deployment/shop-app", "--guard-workload", "statefulset/not-yet",
				"--", "/bin/sh", "-c", tc.script)
			if got != tc.wantCode {
				t.Fatalf("exit code = %d, want %d; stderr:\n%s", got, tc.wantCode, &h.stderr)
			}
			d, err := h.cs.AppsV1().Deployments("shop").Get(context.Background(), "shop-app", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Annotations[migration.RecordedAnnotation] != tc.want || d.Annotations["kept"] != "yes" {
				t.Errorf("annotations = %v, want %s=%q beside the others", d.Annotations, migration.RecordedAnnotation, tc.want)
			}
			if tc.wantCode == 0 && !strings.Contains(h.stderr.String(), "statefulset shop/not-yet does not exist yet") {
				t.Errorf("a missing workload is not reported as left:\n%s", &h.stderr)
			}
		})
	}
}

func TestRunRefusesAGuardWorkloadThatIsNotKindSlashName(t *testing.T) {
	for _, w := range []string{"shop-app", "cronjob/shop-app", "deployment/"} {
		h := newHarness(recordsConfigMap())
		got := h.run("run", "--identity", identity, "--records", "shop-app-migrations", "--job", "j", "--guard-workload", w, "--", "true")
		if got != exitcode.Usage || !strings.Contains(h.stderr.String(), "deployment, statefulset, daemonset") {
			t.Errorf("--guard-workload %q: exit code %d, want %d naming the kinds; stderr:\n%s", w, got, exitcode.Usage, &h.stderr)
		}
	}
}

func TestRunFailsWhenTheGuardedWorkloadCannotBeAnnotated(t *testing.T) {
	h := newHarness(recordsConfigMap(), deployment("shop-app"))
	h.cs.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "shop-app", errors.New("RBAC: access denied"))
	})
	got := h.run("run", "--identity", identity, "--records", "shop-app-migrations", "--job", "j", "--wait-for-configmap", "1s",
		"--guard-workload", "deployment/shop-app", "--", "true")
	if got != exitcode.Failed || !strings.Contains(h.stderr.String(), "could not be annotated for the guard") {
		t.Errorf("exit code %d, want %d naming the guard; stderr:\n%s", got, exitcode.Failed, &h.stderr)
	}
}
