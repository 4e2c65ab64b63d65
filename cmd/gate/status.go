package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/kubeclient"
	"github.com/premigrate/premigrate/internal/status"
)

// statusOptions are the flags of `gate status`.
type statusOptions struct {
	k8s     k8sFlags
	release string
}

func (o *statusOptions) register(fs *flag.FlagSet) {
	o.k8s.register(fs)
	fs.StringVar(&o.release, "release", "", "the Helm release (or Argo CD Application, Flux HelmRelease) to report on: its app.kubernetes.io/instance label (required)")
}

// runStatus reads the release's records, runs, Jobs and gated pods and prints what each waiting pod waits for
// and what to do; it exits 0 (nothing waits), 2 (pods wait for a running migration), 3 (pods are held until
// someone acts) or 1 (it could not read the release).
func runStatus(ctx context.Context, o *statusOptions, e *env) error {
	if o.release == "" {
		return cli.Usagef("--release is required")
	}
	log := e.logger()
	ns, err := kubeclient.Namespace(o.k8s.namespace, e.getenv, e.namespaceFile)
	if err != nil {
		log.Error(err.Error())
		return cli.Exit(exitcode.Failed, err)
	}
	cfg, err := kubeclient.Config(o.k8s.kubeconfig, o.k8s.tokenDir, e.getenv)
	if err == nil {
		cfg.UserAgent = "premigrate-gate/" + version
	}
	var c *kubeclient.Clients
	if err == nil {
		c, err = kubeclient.New(cfg)
	}
	var s status.Snapshot
	if err == nil {
		s, err = status.Read(ctx, c, ns, o.release)
	}
	if err != nil {
		log.Error(fmt.Sprintf("reading release %s in namespace %s: %v", o.release, ns, err))
		return cli.Exit(exitcode.Failed, err)
	}
	r := status.Build(s)
	if err := r.Write(e.Out); err != nil {
		return cli.Exit(exitcode.Failed, err)
	}
	if r.Code != status.OK {
		return cli.Exit(r.Code, nil)
	}
	return nil
}
