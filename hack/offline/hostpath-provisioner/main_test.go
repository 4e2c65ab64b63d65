package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func claim(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db", UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}

func TestAPendingClaimOfTheClassGetsAWorldWritableVolumeBoundToIt(t *testing.T) {
	root := t.TempDir()
	cs := fake.NewClientset(claim("data", "standard"), claim("other", "fast"))
	p := provisioner{cs: cs, class: "standard", root: root}
	if err := p.reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	pvs, err := cs.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pvs.Items) != 1 {
		t.Fatalf("%d volumes, want 1 (only the claim of class standard)", len(pvs.Items))
	}
	pv := pvs.Items[0]
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "data" || pv.Spec.StorageClassName != "standard" {
		t.Errorf("volume %+v is not bound to claim db/data of class standard", pv.Spec)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != "1Gi" {
		t.Errorf("capacity %s, want 1Gi", got.String())
	}
	fi, err := os.Stat(pv.Spec.HostPath.Path)
	if err != nil {
		t.Fatalf("the volume's folder: %v", err)
	}
	if fi.Mode().Perm() != 0o777 || filepath.Dir(pv.Spec.HostPath.Path) != root {
		t.Errorf("folder %s has mode %v, want 0777 under %s", pv.Spec.HostPath.Path, fi.Mode().Perm(), root)
	}
}

func TestAReleasedVolumeOfOursIsDeletedWithItsFolderAndOthersAreLeftAlone(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "db_data_uid")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	volume := func(name string, ours bool) *corev1.PersistentVolume {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}},
			Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}},
			Status:     corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased},
		}
		if ours {
			pv.Annotations["pv.kubernetes.io/provisioned-by"] = provisionedBy
		}
		return pv
	}
	cs := fake.NewClientset(volume("ours", true), volume("theirs", false))
	p := provisioner{cs: cs, class: "standard", root: root}
	if err := p.reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().PersistentVolumes().Get(context.Background(), "ours", metav1.GetOptions{}); err == nil {
		t.Error("our released volume was not deleted")
	}
	if _, err := cs.CoreV1().PersistentVolumes().Get(context.Background(), "theirs", metav1.GetOptions{}); err != nil {
		t.Errorf("a volume of another provisioner was touched: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the released volume's folder still exists (%v)", err)
	}
}
