//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gruntwork-io/terratest/modules/helm"
	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/logger"
	"github.com/gruntwork-io/terratest/modules/shell"
)

// The CLIs the scenarios drive run through terratest: kubectl through its k8s module, Helm 3 (the `helm` on
// PATH, which make puts first: bin/helm) through its helm module, and Helm 4 through its shell module, because
// the helm module always runs the `helm` on PATH. Their output goes to the test's own messages, not to
// terratest's log (logger.Discard): a scenario prints what it needs when it fails.

// kubectlOptions are terratest's options for this cluster and a namespace ("" for none).
func kubectlOptions(ns string) *k8s.KubectlOptions {
	return &k8s.KubectlOptions{ConfigPath: env.kubeconfig, Namespace: ns, Logger: logger.Discard}
}

// runCLI runs kubectl, Helm 3, Helm 4 or another binary of the harness against the cluster and returns its
// combined output; an error names the command line and holds the output.
func runCLI(t *testing.T, bin string, args ...string) (string, error) {
	var out string
	var err error
	switch {
	case bin == env.kubectl:
		out, err = k8s.RunKubectlAndGetOutputE(t, kubectlOptions(""), args...)
	case bin == env.helm3 && len(args) > 0:
		out, err = helm.RunHelmCommandAndGetOutputE(t, &helm.Options{KubectlOptions: kubectlOptions(""), Logger: logger.Discard}, args[0], args[1:]...)
	default:
		out, err = shell.RunCommandAndGetOutputE(t, shell.Command{Command: bin, Args: args,
			Env: map[string]string{"KUBECONFIG": env.kubeconfig}, Logger: logger.Discard})
	}
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, out)
	}
	return out, nil
}

// checkCLIsOnPath makes sure terratest's k8s and helm modules, which run `kubectl` and `helm` from PATH, run
// the pinned binaries the harness names (make puts bin/ first on PATH).
func checkCLIsOnPath() error {
	for name, want := range map[string]string{"kubectl": env.kubectl, "helm": env.helm3} {
		got, err := exec.LookPath(name)
		if err == nil && got != want {
			// the same binary under two names (bin/ links to the tool cache) is the same binary
			g, errG := filepath.EvalSymlinks(got)
			w, errW := filepath.EvalSymlinks(want)
			if errG == nil && errW == nil && g == w {
				got = want
			}
		}
		if err != nil {
			return fmt.Errorf("terratest runs %q from PATH: %w: run the cluster tests through make, which puts bin/ first on PATH", name, err)
		}
		if got != want {
			return fmt.Errorf("terratest runs %q from PATH, which is %s, not the pinned %s: run the cluster tests through make, which puts bin/ first on PATH", name, got, want)
		}
	}
	return nil
}
