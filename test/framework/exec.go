package framework

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/kubectl/pkg/scheme"
	"k8s.io/streaming/pkg/httpstream"
)

// PodExec runs command in a pod's default container through the API server, as `kubectl exec` does but
// without starting a kubectl process (about 0.26 CPU-s each on this machine, and the harness asks the
// databases hundreds of times a run), and returns its standard output. The error carries its standard error.
func (e *Env) PodExec(ns, pod string, command ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := e.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("exec %s in %s/%s: %w", strings.Join(command, " "), ns, pod, err)
	}
	// kubectl's choice of container: the annotated default, else the first
	container := p.Annotations["kubectl.kubernetes.io/default-container"]
	if container == "" && len(p.Spec.Containers) > 0 {
		container = p.Spec.Containers[0].Name
	}
	req := e.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(e.RestConfig, "GET", req.URL().String())
	if err != nil {
		return "", fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.RestConfig, "POST", req.URL())
	if err != nil {
		return "", fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
	}
	executor, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
	}
	var stdout, stderr bytes.Buffer
	if err := executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		return stdout.String(), fmt.Errorf("exec %s in %s/%s: %w\n%s", strings.Join(command, " "), ns, pod, err, stderr.String())
	}
	return stdout.String(), nil
}
