package kubeclient

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// WorkloadClient annotates apps/v1 workloads (Deployments, StatefulSets,
// DaemonSets) of one namespace. It decodes nothing: the scheme knows no apps
// types.
type WorkloadClient struct {
	client    rest.Interface
	namespace string
}

// Workloads returns a workload client for namespace.
func (c *Clients) Workloads(namespace string) *WorkloadClient {
	return &WorkloadClient{client: c.apps, namespace: namespace}
}

// Annotate sets the annotation key to value on the workload called name of
// resource (its plural: "deployments"), with a JSON merge patch made as
// fieldManager: it changes no other field, and an apply by another manager
// (Helm 4, Argo CD, Flux) that does not name the annotation leaves it.
func (w *WorkloadClient) Annotate(ctx context.Context, resource, name, key, value, fieldManager string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return fmt.Errorf("encode the patch of %s %s: %w", resource, name, err)
	}
	return w.client.Patch(types.MergePatchType).
		Namespace(w.namespace).Resource(resource).Name(name).
		Param("fieldManager", fieldManager).
		Body(patch).
		Do(ctx).Error()
}
