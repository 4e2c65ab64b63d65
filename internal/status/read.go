package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/kubeclient"
)

// Read reads what Build judges: the release's ConfigMaps, Jobs and pods by its instance label, and
// for each pod that waits, its gate's last log line and the database its gate names.
func Read(ctx context.Context, c *kubeclient.Clients, ns, release string) (Snapshot, error) {
	s := Snapshot{Release: release, Namespace: ns, Logs: map[string]string{}, Databases: map[string]dbid.ID{}}
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release}
	cms, err := c.ConfigMaps(ns).List(ctx, sel)
	if err != nil {
		return s, fmt.Errorf("listing ConfigMaps: %w", err)
	}
	s.Sets = sets(cms.Items)
	jobs, err := c.Jobs(ns).List(ctx, sel)
	if err != nil {
		return s, fmt.Errorf("listing Jobs: %w", err)
	}
	s.Jobs = jobs.Items
	pods, err := c.Pods(ns).List(ctx, sel)
	if err != nil {
		return s, fmt.Errorf("listing pods: %w", err)
	}
	s.Pods = pods.Items
	for _, p := range s.Pods {
		gate := gateContainer(p)
		if p.Annotations[IdentityAnnotation] == "" || gate == nil {
			continue
		}
		if line := lastLine(ctx, c, ns, p.Name); line != "" {
			s.Logs[p.Name] = line
		}
		id, err := podDatabase(ctx, c, ns, *gate)
		if err != nil {
			s.Notes = append(s.Notes, fmt.Sprintf("pod %s is judged without the database its gate names (%v): a record of another database counts", p.Name, err))
			continue
		}
		s.Databases[p.Name] = id
	}
	return s, nil
}

// sets groups the release's ConfigMaps of premigrate by the fullname they start with.
func sets(cms []corev1.ConfigMap) []Set {
	byName := map[string]*Set{}
	var names []string
	for i := range cms {
		cm := &cms[i]
		for suffix, slot := range map[string]func(*Set) **corev1.ConfigMap{
			"-migrations":        func(s *Set) **corev1.ConfigMap { return &s.Anchor },
			"-migration-records": func(s *Set) **corev1.ConfigMap { return &s.Store },
			"-migration-runs":    func(s *Set) **corev1.ConfigMap { return &s.History },
		} {
			full, ok := strings.CutSuffix(cm.Name, suffix)
			if !ok {
				continue
			}
			if byName[full] == nil {
				byName[full] = &Set{Fullname: full}
				names = append(names, full)
			}
			*slot(byName[full]) = cm
		}
	}
	slices.Sort(names)
	out := make([]Set, 0, len(names))
	for _, n := range names {
		out = append(out, *byName[n])
	}
	return out
}

func gateContainer(p corev1.Pod) *corev1.Container {
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == GateContainer {
			return &p.Spec.InitContainers[i]
		}
	}
	return nil
}

// lastLine is the last line the pod's gate logged, from its current instance or the one before.
func lastLine(ctx context.Context, c *kubeclient.Clients, ns, pod string) string {
	for _, previous := range []bool{false, true} {
		out, err := c.LogTail(ctx, ns, pod, GateContainer, 1, previous)
		if line := strings.TrimSpace(out); err == nil && line != "" {
			return line
		}
	}
	return ""
}

// podDatabase names the database the pod's gate names, from its flags: the object's UID, or the URL's server
// and name from the Secret its environment reads.
func podDatabase(ctx context.Context, c *kubeclient.Clients, ns string, gate corev1.Container) (dbid.ID, error) {
	var spec dbid.Spec
	args := append(slices.Clone(gate.Command), gate.Args...)
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--database-object":
			spec.Object = args[i+1]
		case "--database-url-env":
			url, err := envFromSecret(ctx, c, ns, gate, args[i+1])
			if err != nil {
				return dbid.ID{}, err
			}
			spec.URL = url
		}
	}
	return dbid.Resolve(ctx, spec, func(ctx context.Context, kind, name string) (dbid.Object, error) {
		var m metav1.Object
		var err error
		if kind == dbid.KindPod {
			m, err = c.Pods(ns).Get(ctx, name, metav1.GetOptions{})
		} else {
			m, err = c.PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return dbid.Object{}, err
		}
		return dbid.Object{UID: string(m.GetUID()), Created: m.GetCreationTimestamp().Time}, nil
	})
}

// envFromSecret reads the value of the container's environment variable name from the Secret it refers to.
func envFromSecret(ctx context.Context, c *kubeclient.Clients, ns string, ctr corev1.Container, name string) (string, error) {
	for _, v := range ctr.Env {
		if v.Name != name {
			continue
		}
		if v.Value != "" {
			return v.Value, nil
		}
		if v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil {
			break
		}
		ref := v.ValueFrom.SecretKeyRef
		sec, err := c.Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("reading Secret %s for the database URL: %w", ref.Name, err)
		}
		if b, ok := sec.Data[ref.Key]; ok {
			return string(b), nil
		}
		return "", fmt.Errorf("secret %s has no key %s", ref.Name, ref.Key)
	}
	return "", errors.New("the gate's environment has no " + name + " from a Secret")
}
