// Package kindcluster creates, reuses and deletes the kind cluster the cluster tests and the demo run on,
// and loads premigrate's image archives into its nodes without a registry.
package kindcluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"
)

// cgroup2SuperMagic is the filesystem magic of a unified (v2) cgroup hierarchy.
const cgroup2SuperMagic = 0x63677270

// DefaultName is the cluster's name when KIND_CLUSTER_NAME does not give one (the Makefile's default too).
const DefaultName = "premigrate"

// Name is the cluster's name: $KIND_CLUSTER_NAME, or DefaultName.
func Name() string {
	if n := os.Getenv("KIND_CLUSTER_NAME"); n != "" {
		return n
	}
	return DefaultName
}

// Options says which cluster to create or reuse.
type Options struct {
	Name       string        // cluster name; an existing cluster with this name is reused
	NodeImage  string        // kind node image
	Kubeconfig string        // where the kubeconfig is written
	Wait       time.Duration // how long to wait for the control plane to be Ready
	// FeatureGates are Kubernetes feature gates the new cluster turns on or off in every component, each
	// "Name=true" or "Name=false" (make test-k8s-oldest turns on ImageVolume, beta and off by default in 1.33)
	FeatureGates []string
}

// Cluster is a running kind cluster.
type Cluster struct {
	Name       string
	Kubeconfig string
	Created    bool // false when an existing cluster was reused
	provider   *cluster.Provider
}

// HostNeedsCgroupV1Settings reports whether /sys/fs/cgroup is not a unified (v2) hierarchy. Kubernetes 1.35
// and later refuse cgroup v1 unless the kubelet sets failCgroupV1=false and kubeadm skips SystemVerification.
func HostNeedsCgroupV1Settings() bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return false
	}
	return st.Type != cgroup2SuperMagic
}

// RegistryHostsDir is where each node's containerd reads a registry's configuration (its hosts.toml and CA):
// set by Config, written by TrustRegistry.
const RegistryHostsDir = "/etc/containerd/certs.d"

// Config renders the kind cluster configuration for this host: containerd reads registry configurations from
// RegistryHostsDir (a registry with its own CA, the way a company mirror is reached), and a cgroup v1 host gets
// the settings Kubernetes needs there.
// featureGates ("Name=true" each) become kind's featureGates, which every component gets.
func Config(name string, cgroupV1 bool, featureGates []string) (string, error) {
	cfg := "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nname: " + name + "\n" + `containerdConfigPatches:
- |-
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "` + RegistryHostsDir + `"
`
	if len(featureGates) > 0 {
		cfg += "featureGates:\n"
		for _, g := range featureGates {
			k, v, ok := strings.Cut(g, "=")
			if !ok || k == "" || (v != "true" && v != "false") || strings.ContainsAny(k, " :\n") {
				return "", fmt.Errorf("kindcluster: feature gate %q is not Name=true or Name=false", g)
			}
			cfg += "  " + k + ": " + v + "\n"
		}
	}
	if !cgroupV1 {
		return cfg, nil
	}
	return cfg + `kubeadmConfigPatches:
- |
  kind: InitConfiguration
  nodeRegistration:
    ignorePreflightErrors:
    - SystemVerification
- |
  kind: JoinConfiguration
  nodeRegistration:
    ignorePreflightErrors:
    - SystemVerification
- |
  kind: KubeletConfiguration
  failCgroupV1: false
`, nil
}

// Ensure reuses the cluster named o.Name when it exists, and creates it otherwise.
func Ensure(o Options) (*Cluster, error) {
	if o.Name == "" || o.Kubeconfig == "" {
		return nil, errors.New("kindcluster: a name and a kubeconfig path are required")
	}
	p := cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(kindcmd.NewLogger()))
	c := &Cluster{Name: o.Name, Kubeconfig: o.Kubeconfig, provider: p}
	names, err := p.List()
	if err != nil {
		return nil, fmt.Errorf("listing kind clusters: %w", err)
	}
	if slices.Contains(names, o.Name) {
		herr := c.healthy()
		if herr == nil {
			if err := p.ExportKubeConfig(o.Name, o.Kubeconfig, false); err != nil {
				return nil, fmt.Errorf("exporting the kubeconfig of kind cluster %q: %w", o.Name, err)
			}
			return c, nil
		}
		// a node container left stopped by a Docker restart does not come back healthy: start afresh
		fmt.Fprintf(os.Stderr, "kind cluster %q exists but is not healthy (%v): recreating it\n", o.Name, herr)
		if err := p.Delete(o.Name, ""); err != nil {
			return nil, fmt.Errorf("deleting unhealthy kind cluster %q: %w", o.Name, err)
		}
	}
	if o.NodeImage == "" {
		return nil, errors.New("kindcluster: no node image (run `make cluster`, or set KIND_NODE_IMAGE)")
	}
	if o.Wait == 0 {
		o.Wait = 5 * time.Minute
	}
	cfg, err := Config(o.Name, HostNeedsCgroupV1Settings(), o.FeatureGates)
	if err != nil {
		return nil, err
	}
	err = p.Create(o.Name,
		cluster.CreateWithNodeImage(o.NodeImage),
		cluster.CreateWithRawConfig([]byte(cfg)),
		cluster.CreateWithKubeconfigPath(o.Kubeconfig),
		cluster.CreateWithWaitForReady(o.Wait),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
	)
	if err != nil {
		return nil, fmt.Errorf("creating kind cluster %q from %s: %w", o.Name, o.NodeImage, err)
	}
	c.Created = true
	return c, nil
}

// healthy asks the API server of every control-plane node whether it is ready.
func (c *Cluster) healthy() error {
	ns, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	if len(ns) == 0 {
		return errors.New("no nodes")
	}
	for _, n := range ns {
		cmd := n.Command("kubectl", "--kubeconfig=/etc/kubernetes/admin.conf", "get", "--raw", "/readyz", "--request-timeout=10s")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("node %s: %w", n.String(), err)
		}
	}
	// a cluster made by an older Config: its nodes cannot be told about a registry
	for _, n := range ns {
		if err := n.Command("grep", "-q", RegistryHostsDir, "/etc/containerd/config.toml").Run(); err != nil {
			return fmt.Errorf("node %s: containerd does not read %s (a cluster made before it did)", n.String(), RegistryHostsDir)
		}
	}
	return nil
}

// TrustRegistry tells every node's containerd to reach the registry host (host:port) over HTTPS with a
// certificate signed by caPEM: RegistryHostsDir/<host>/hosts.toml and ca.crt. containerd reads them on the next
// pull, without a restart.
func (c *Cluster) TrustRegistry(host string, caPEM []byte) error {
	ns, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return fmt.Errorf("listing nodes of %q: %w", c.Name, err)
	}
	dir := RegistryHostsDir + "/" + host
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = %q\n",
		"https://"+host, "https://"+host, dir+"/ca.crt")
	for _, n := range ns {
		for file, body := range map[string][]byte{"ca.crt": caPEM, "hosts.toml": []byte(hosts)} {
			cmd := n.Command("sh", "-c", `mkdir -p "$1" && cat > "$1/$2"`, "sh", dir, file)
			cmd.SetStdin(bytes.NewReader(body))
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("writing %s/%s on node %s: %w", dir, file, n.String(), err)
			}
		}
	}
	return nil
}

// Delete deletes the cluster named name, if it exists.
func Delete(name string) error {
	p := cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(kindcmd.NewLogger()))
	if err := p.Delete(name, ""); err != nil {
		return fmt.Errorf("deleting kind cluster %q: %w", name, err)
	}
	return nil
}

// Delete deletes this cluster.
func (c *Cluster) Delete() error { return Delete(c.Name) }

// deleteByName deletes a cluster; a variable so tests can see what Teardown deletes.
var deleteByName = Delete

// Teardown ends a run on c and says what it did: it deletes the cluster only when this run created it and keep
// is false. A cluster the run found (made by make demo or make cluster, or by an earlier run with
// KEEP_CLUSTER=1) stays, and so does one asked to be kept.
func (c *Cluster) Teardown(keep bool) (string, error) {
	switch {
	case keep:
		return fmt.Sprintf("cluster %q kept (KEEP_CLUSTER=1); KUBECONFIG=%s", c.Name, c.Kubeconfig), nil
	case !c.Created:
		return fmt.Sprintf("cluster %q kept: this run reused it (make demo or make cluster made it); KUBECONFIG=%s", c.Name, c.Kubeconfig), nil
	}
	if err := deleteByName(c.Name); err != nil {
		return "", err
	}
	return fmt.Sprintf("cluster %q deleted: this run created it", c.Name), nil
}

// LoadImageArchives imports docker-archive tarballs into every node's containerd. An archive whose content
// is the last one loaded under its file name is skipped, so reusing a cluster costs a hash per archive; an
// archive of that name with other content (a rebuilt image, or back from a mutant's) is loaded again.
func (c *Cluster) LoadImageArchives(paths ...string) (loaded int, err error) {
	ns, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return 0, fmt.Errorf("listing nodes of %q: %w", c.Name, err)
	}
	for _, p := range paths {
		sum, err := fileSHA256(p)
		if err != nil {
			return loaded, err
		}
		marker := "/var/lib/premigrate-images/" + filepath.Base(p) + ".sha256"
		for _, n := range ns {
			if n.Command("grep", "-qx", sum, marker).Run() == nil {
				continue
			}
			if err := loadOne(n, p); err != nil {
				return loaded, err
			}
			if err := n.Command("sh", "-c", "mkdir -p /var/lib/premigrate-images && echo "+sum+" > "+marker).Run(); err != nil {
				return loaded, fmt.Errorf("marking %s loaded on %s: %w", filepath.Base(p), n.String(), err)
			}
			loaded++
		}
	}
	return loaded, nil
}

// OnNode runs a command on the node called node (a kind node is a container of that name), for a scenario that
// changes what the node does, such as a packet filter; it returns the command's output, stdout and stderr.
func (c *Cluster) OnNode(node string, args ...string) (string, error) {
	ns, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return "", fmt.Errorf("listing nodes of %q: %w", c.Name, err)
	}
	for _, n := range ns {
		if n.String() != node {
			continue
		}
		var out bytes.Buffer
		cmd := n.Command(args[0], args[1:]...)
		cmd.SetStdout(&out)
		cmd.SetStderr(&out)
		if err := cmd.Run(); err != nil {
			return out.String(), fmt.Errorf("%s on node %s: %w: %s", strings.Join(args, " "), node, err, out.String())
		}
		return out.String(), nil
	}
	return "", fmt.Errorf("cluster %q has no node %q", c.Name, node)
}

func loadOne(n nodes.Node, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening image archive: %w", err)
	}
	defer func() { _ = f.Close() }()
	if err := nodeutils.LoadImageArchive(n, f); err != nil {
		return fmt.Errorf("loading %s into %s: %w", path, n.String(), err)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("opening image archive: %w", err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
