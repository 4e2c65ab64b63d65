package migration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/premigrate/premigrate/internal/record"
)

func TestTheHolderOfALockRunsAsLongAsItsPodIsPendingOrRunning(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "node-1"},
			Status: corev1.PodStatus{Phase: phase}}
	}
	for _, tc := range []struct {
		name    string
		holder  record.Holder
		running bool
		why     string
		err     string
	}{
		{"a running pod, cut off from the API server", record.Holder{Job: "j", Pod: "running"}, true, "its pod running is Running on node node-1", ""},
		{"a pod not yet started", record.Holder{Job: "j", Pod: "pending"}, true, "its pod pending is Pending on node node-1", ""},
		{"a pod that succeeded without releasing the lock", record.Holder{Job: "j", Pod: "succeeded"}, false, "its pod succeeded ended (Succeeded)", ""},
		{"a pod that failed", record.Holder{Job: "j", Pod: "failed"}, false, "its pod failed ended (Failed)", ""},
		{"a pod that is gone", record.Holder{Job: "j", Pod: "gone"}, false, "its pod gone is gone", ""},
		{"an unreadable lock", record.Holder{Job: "?", Pod: "{garbage"}, false, "it names no pod", ""},
		{"a pod that cannot be read", record.Holder{Job: "j", Pod: "forbidden"}, true, "", "the migration's Role grants get on pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(pod("running", corev1.PodRunning), pod("pending", corev1.PodPending),
				pod("succeeded", corev1.PodSucceeded), pod("failed", corev1.PodFailed))
			cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.(k8stesting.GetAction).GetName() == "forbidden" {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "forbidden", nil)
				}
				return false, nil, nil
			})
			running, why, err := holderRunning(cs.CoreV1().Pods("ns"))(context.Background(), tc.holder)
			if running != tc.running || why != tc.why {
				t.Errorf("running %v (%q), want %v (%q)", running, why, tc.running, tc.why)
			}
			if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}
