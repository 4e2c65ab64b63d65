// Command hostpath-provisioner gives the offline kind cluster what kind's local-path-provisioner gives a stock
// one (that provisioner's module is not served by the Go module proxy): PersistentVolumes for the claims of its
// StorageClass, as world-writable directories on the node, so non-root pods (PostgreSQL as uid 999) can write
// to them. It runs in the cluster with the node folder mounted at the same path; it reconciles every two seconds.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const provisionedBy = "premigrate.io/hostpath-provisioner"

func main() {
	class := flag.String("storage-class", "standard", "StorageClass whose claims this provisions")
	root := flag.String("root", "/var/local-path", "node folder holding the volumes (mounted at the same path)")
	flag.Parse()
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatalf("in-cluster config: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("client: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	p := provisioner{cs: cs, class: *class, root: *root}
	log.Printf("provisioning claims of StorageClass %q under %s", p.class, p.root)
	for ctx.Err() == nil {
		if err := p.reconcile(ctx); err != nil {
			log.Printf("reconcile: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

type provisioner struct {
	cs    kubernetes.Interface
	class string
	root  string
}

func (p provisioner) reconcile(ctx context.Context) error {
	claims, err := p.cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" || c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != p.class {
			continue
		}
		if err := p.provision(ctx, c); err != nil {
			log.Printf("provisioning %s/%s: %v", c.Namespace, c.Name, err)
		}
	}
	vols, err := p.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing volumes: %w", err)
	}
	for _, v := range vols.Items {
		if v.Annotations["pv.kubernetes.io/provisioned-by"] != provisionedBy || v.Status.Phase != corev1.VolumeReleased {
			continue
		}
		if err := os.RemoveAll(v.Spec.HostPath.Path); err != nil {
			log.Printf("removing %s: %v", v.Spec.HostPath.Path, err)
			continue
		}
		if err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, v.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			log.Printf("deleting volume %s: %v", v.Name, err)
			continue
		}
		log.Printf("deleted volume %s", v.Name)
	}
	return nil
}

func (p provisioner) provision(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	name := "pvc-" + string(c.UID)
	dir := filepath.Join(p.root, c.Namespace+"_"+c.Name+"_"+string(c.UID))
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // the umask must not narrow it
		return fmt.Errorf("opening %s to every user: %w", dir, err)
	}
	size := c.Spec.Resources.Requests[corev1.ResourceStorage]
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisionedBy}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   c.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              p.class,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: dir, Type: ptrTo(corev1.HostPathDirectory),
			}},
		},
	}
	if _, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating volume %s: %w", name, err)
	}
	log.Printf("provisioned %s for %s/%s at %s", name, c.Namespace, c.Name, dir)
	return nil
}

func ptrTo[T any](v T) *T { return &v }
