package kubeclient

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// SecretClient reads Secrets of one namespace (`gate status`, to name an external database from its URL) and
// updates them (`gate secret`, to fill the embedded database's).
type SecretClient = Resource[*corev1.Secret, *corev1.SecretList]

// Secrets returns a Secret client for namespace.
func (c *Clients) Secrets(namespace string) *SecretClient {
	return &SecretClient{
		client: c.core, params: c.params, namespace: namespace, resource: "secrets",
		newObject: func() *corev1.Secret { return &corev1.Secret{} },
		newList:   func() *corev1.SecretList { return &corev1.SecretList{} },
	}
}

// LogTail reads the last lines of a container's log, of its current instance or (previous) of the one before.
func (c *Clients) LogTail(ctx context.Context, namespace, pod, container string, lines int, previous bool) (string, error) {
	b, err := c.core.Get().Namespace(namespace).Resource("pods").Name(pod).SubResource("log").
		Param("container", container).Param("tailLines", strconv.Itoa(lines)).Param("previous", strconv.FormatBool(previous)).
		DoRaw(ctx)
	return string(b), err
}
