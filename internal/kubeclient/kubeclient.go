// Package kubeclient builds the gate's Kubernetes API clients: typed Job and
// ConfigMap clients with the method set of client-go's typed clients, on a
// scheme that knows only batch/v1 and core/v1, so that the static binary
// stays small.
package kubeclient

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ServiceAccountDir is where Kubernetes mounts the pod's service account token, CA and namespace.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ServiceAccountNamespaceFile is where Kubernetes mounts the pod's namespace.
const ServiceAccountNamespaceFile = ServiceAccountDir + "/namespace"

// ErrNoNamespace is returned by Namespace when no source names a namespace.
var ErrNoNamespace = errors.New("no namespace: pass --namespace, set POD_NAMESPACE, or run in a pod with a service account")

// Namespace picks the namespace to work in: the flag value, then the
// POD_NAMESPACE environment variable (read through getenv), then the service
// account's namespace file.
func Namespace(flagValue string, getenv func(string) string, namespaceFile string) (string, error) {
	if ns := strings.TrimSpace(flagValue); ns != "" {
		return ns, nil
	}
	if ns := strings.TrimSpace(getenv("POD_NAMESPACE")); ns != "" {
		return ns, nil
	}
	if namespaceFile == "" {
		return "", ErrNoNamespace
	}
	b, err := os.ReadFile(namespaceFile)
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrNoNamespace
	}
	if err != nil {
		return "", fmt.Errorf("read namespace file: %w", err)
	}
	if ns := strings.TrimSpace(string(b)); ns != "" {
		return ns, nil
	}
	return "", fmt.Errorf("namespace file %s is empty: %w", namespaceFile, ErrNoNamespace)
}

// Config returns the REST configuration: from the kubeconfig file when one is
// given (the kubeconfig argument, else the KUBECONFIG environment variable read
// through getenv), otherwise the in-cluster configuration with the token and CA
// of tokenDir, or of the pod's service account when tokenDir is empty.
func Config(kubeconfig, tokenDir string, getenv func(string) string) (*rest.Config, error) {
	if kubeconfig == "" && getenv("KUBECONFIG") == "" && tokenDir != "" {
		return tokenDirConfig(tokenDir, getenv)
	}
	if kubeconfig == "" && getenv("KUBECONFIG") == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (outside a cluster pass --kubeconfig or set KUBECONFIG): %w", err)
		}
		return cfg, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	if kubeconfig == "" {
		rules.Precedence = strings.Split(getenv("KUBECONFIG"), string(os.PathListSeparator))
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// tokenDirConfig is rest.InClusterConfig with the token and CA files of dir.
func tokenDirConfig(dir string, getenv func(string) string) (*rest.Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("--token-dir is for runs in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
	}
	token := filepath.Join(dir, "token")
	if _, err := os.Stat(token); err != nil {
		return nil, fmt.Errorf("API token of --token-dir: %w", err)
	}
	ca := filepath.Join(dir, "ca.crt")
	if _, err := os.Stat(ca); err != nil {
		return nil, fmt.Errorf("CA of --token-dir: %w", err)
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		TLSClientConfig: rest.TLSClientConfig{CAFile: ca},
		BearerTokenFile: token,
	}, nil
}

// Clients hands out typed clients for the resources the gate uses.
type Clients struct {
	batch  rest.Interface
	core   rest.Interface
	apps   rest.Interface
	params runtime.ParameterCodec
}

// New builds the clients from cfg; both share one HTTP client. It registers
// only batch/v1, core/v1 and apps/v1: client-go's generated clientsets (and its
// generic typed clients, whose package also carries the fakes) would link
// every API group and the test machinery into the binary.
func New(cfg *rest.Config) (*Clients, error) {
	scheme := runtime.NewScheme()
	if err := batchv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register batch/v1: %w", err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register core/v1: %w", err)
	}
	if err := appsv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register apps/v1: %w", err)
	}
	codecs := serializer.NewCodecFactory(scheme)

	base := rest.CopyConfig(cfg)
	base.NegotiatedSerializer = codecs.WithoutConversion()
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(base)
	if err != nil {
		return nil, fmt.Errorf("build HTTP client: %w", err)
	}

	batchCfg := rest.CopyConfig(base)
	batchCfg.APIPath = "/apis"
	batchCfg.GroupVersion = &batchv1.SchemeGroupVersion
	batch, err := rest.RESTClientForConfigAndClient(batchCfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("build batch/v1 client: %w", err)
	}

	coreCfg := rest.CopyConfig(base)
	coreCfg.APIPath = "/api"
	coreCfg.GroupVersion = &corev1.SchemeGroupVersion
	core, err := rest.RESTClientForConfigAndClient(coreCfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("build core/v1 client: %w", err)
	}

	// apps/v1: patches whose answer is not decoded (Workloads), and the reads of a rollout (Deployments, ReplicaSets)
	appsCfg := rest.CopyConfig(base)
	appsCfg.APIPath = "/apis"
	appsCfg.GroupVersion = &schema.GroupVersion{Group: "apps", Version: "v1"}
	apps, err := rest.RESTClientForConfigAndClient(appsCfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("build apps/v1 client: %w", err)
	}

	return &Clients{batch: batch, core: core, apps: apps, params: runtime.NewParameterCodec(scheme)}, nil
}

// JobClient reads Jobs of one namespace.
type JobClient = Resource[*batchv1.Job, *batchv1.JobList]

// ConfigMapClient reads and updates ConfigMaps of one namespace.
type ConfigMapClient = Resource[*corev1.ConfigMap, *corev1.ConfigMapList]

// PodClient reads Pods of one namespace.
type PodClient = Resource[*corev1.Pod, *corev1.PodList]

// EventClient creates Events of one namespace.
type EventClient = Resource[*corev1.Event, *corev1.EventList]

// Events returns an Event client for namespace.
func (c *Clients) Events(namespace string) *EventClient {
	return &EventClient{
		client: c.core, params: c.params, namespace: namespace, resource: "events",
		newObject: func() *corev1.Event { return &corev1.Event{} },
		newList:   func() *corev1.EventList { return &corev1.EventList{} },
	}
}

// DeploymentClient reads Deployments of one namespace.
type DeploymentClient = Resource[*appsv1.Deployment, *appsv1.DeploymentList]

// Deployments returns a Deployment client for namespace.
func (c *Clients) Deployments(namespace string) *DeploymentClient {
	return &DeploymentClient{
		client: c.apps, params: c.params, namespace: namespace, resource: "deployments",
		newObject: func() *appsv1.Deployment { return &appsv1.Deployment{} },
		newList:   func() *appsv1.DeploymentList { return &appsv1.DeploymentList{} },
	}
}

// ReplicaSetClient reads ReplicaSets of one namespace.
type ReplicaSetClient = Resource[*appsv1.ReplicaSet, *appsv1.ReplicaSetList]

// ReplicaSets returns a ReplicaSet client for namespace.
func (c *Clients) ReplicaSets(namespace string) *ReplicaSetClient {
	return &ReplicaSetClient{
		client: c.apps, params: c.params, namespace: namespace, resource: "replicasets",
		newObject: func() *appsv1.ReplicaSet { return &appsv1.ReplicaSet{} },
		newList:   func() *appsv1.ReplicaSetList { return &appsv1.ReplicaSetList{} },
	}
}

// PersistentVolumeClaimClient reads PersistentVolumeClaims of one namespace.
type PersistentVolumeClaimClient = Resource[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList]

// Pods returns a Pod client for namespace.
func (c *Clients) Pods(namespace string) *PodClient {
	return &PodClient{
		client: c.core, params: c.params, namespace: namespace, resource: "pods",
		newObject: func() *corev1.Pod { return &corev1.Pod{} },
		newList:   func() *corev1.PodList { return &corev1.PodList{} },
	}
}

// PersistentVolumeClaims returns a PersistentVolumeClaim client for namespace.
func (c *Clients) PersistentVolumeClaims(namespace string) *PersistentVolumeClaimClient {
	return &PersistentVolumeClaimClient{
		client: c.core, params: c.params, namespace: namespace, resource: "persistentvolumeclaims",
		newObject: func() *corev1.PersistentVolumeClaim { return &corev1.PersistentVolumeClaim{} },
		newList:   func() *corev1.PersistentVolumeClaimList { return &corev1.PersistentVolumeClaimList{} },
	}
}

// Jobs returns a Job client for namespace.
func (c *Clients) Jobs(namespace string) *JobClient {
	return &JobClient{
		client: c.batch, params: c.params, namespace: namespace, resource: "jobs",
		newObject: func() *batchv1.Job { return &batchv1.Job{} },
		newList:   func() *batchv1.JobList { return &batchv1.JobList{} },
	}
}

// ConfigMaps returns a ConfigMap client for namespace.
func (c *Clients) ConfigMaps(namespace string) *ConfigMapClient {
	return &ConfigMapClient{
		client: c.core, params: c.params, namespace: namespace, resource: "configmaps",
		newObject: func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		newList:   func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} },
	}
}
