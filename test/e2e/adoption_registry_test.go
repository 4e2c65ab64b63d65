//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

var registryScenario = scenarios.Declare(framework.Adoption, framework.CI, "release-from-registry")

// The publishing path, end to end: `make release` (its layout, built by make test-e2e without PostgreSQL) is
// pushed to distribution's registry running on kind behind TLS with its own CA, the README's mirroring block
// copies it to a mirror path of that registry and installs the chart from there, and a chart that depends on
// premigrate-lib pulls the library from it. The nodes pull every image: the names exist nowhere else, and the
// kubelet's own events and the pods' image IDs (the registry's digests) say so.

// registryManifest runs the registry: a Deployment reading its TLS pair from a Secret, a NodePort Service that
// the nodes' containerd and this machine both reach on the node's address. %s: the config, the cert, the key.
const registryManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: registry
data:
  config.yml: |
    version: 0.1
    log:
      level: info
    storage:
      filesystem:
        rootdirectory: /var/lib/registry
    http:
      addr: :5000
      tls:
        certificate: /certs/tls.crt
        key: /certs/tls.key
---
apiVersion: v1
kind: Secret
metadata:
  name: registry-tls
type: kubernetes.io/tls
data:
  tls.crt: %s
  tls.key: %s
---
apiVersion: v1
kind: Service
metadata:
  name: registry
spec:
  type: NodePort
  selector:
    app: registry
  ports:
    - port: 5000
      targetPort: 5000
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: registry
spec:
  replicas: 1
  selector:
    matchLabels:
      app: registry
  template:
    metadata:
      labels:
        app: registry
    spec:
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: registry
          image: premigrate/registry:dev
          imagePullPolicy: Never
          args: [serve, /etc/distribution/config.yml]
          ports:
            - containerPort: 5000
          readinessProbe:
            httpGet: {path: /v2/, port: 5000, scheme: HTTPS}
            periodSeconds: 1
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
          volumeMounts:
            - {name: config, mountPath: /etc/distribution}
            - {name: tls, mountPath: /certs}
            - {name: data, mountPath: /var/lib/registry}
      volumes:
        - {name: config, configMap: {name: registry}}
        - {name: tls, secret: {secretName: registry-tls}}
        - {name: data, emptyDir: {}}
`

// registry is a running registry: its address (node IP and NodePort), and the CA file that clients on this
// machine trust it with (SSL_CERT_FILE: Helm, crane and hack/release are Go programs).
type registry struct {
	host   string
	caFile string
}

// tlsEnv is the environment of a client of r.
func (r registry) tlsEnv() map[string]string { return map[string]string{"SSL_CERT_FILE": r.caFile} }

// startRegistry runs distribution's registry on kind and makes every node trust it.
func startRegistry(t *testing.T) registry {
	t.Helper()
	ctx := context.Background()
	nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing the nodes: %v", err)
	}
	var nodeIP string
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP && net.ParseIP(a.Address).To4() != nil {
			nodeIP = a.Address
		}
	}
	if nodeIP == "" {
		t.Fatalf("node %s has no IPv4 InternalIP", nodes.Items[0].Name)
	}
	certPEM, keyPEM := selfSignedCert(t, nodeIP)
	ns := env.NewNamespace(t, "registry", restricted)
	manifest := fmt.Sprintf(registryManifest, b64(certPEM), b64(keyPEM))
	if out, err := env.Run.Input(t, []byte(manifest), env.Kubectl, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("creating the registry: %v\n%s", err, out)
	}
	env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", ns, "deployment/registry", "--timeout=2m")
	svc, err := env.Client.CoreV1().Services(ns).Get(ctx, "registry", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the registry's Service: %v", err)
	}
	r := registry{host: fmt.Sprintf("%s:%d", nodeIP, svc.Spec.Ports[0].NodePort), caFile: filepath.Join(t.TempDir(), "ca.crt")}
	if err := os.WriteFile(r.caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	// the Service answers on the node's port once kube-proxy has its endpoint: ask as a client would
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	framework.WaitUntil(t, "the registry to answer on "+r.host, time.Minute, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.host+"/v2/", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err := env.Cluster.TrustRegistry(r.host, certPEM); err != nil {
		t.Fatalf("telling the nodes about the registry: %v", err)
	}
	t.Logf("registry %s (namespace %s), CA %s", r.host, ns, r.caFile)
	return r
}

// selfSignedCert is a P-256 certificate for ip that is its own CA, valid for an hour.
func selfSignedCert(t *testing.T, ip string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "premigrate test registry"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.ParseIP(ip)},
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// releaseDist is the folder make test-e2e built the release into (make release-e2e).
func releaseDist(t *testing.T) string {
	t.Helper()
	d := os.Getenv("PREMIGRATE_RELEASE_DIST")
	if d == "" {
		t.Fatal("PREMIGRATE_RELEASE_DIST is not set: run the cluster tests with make test-e2e, which builds the release first (make release-e2e)")
	}
	if _, err := os.Stat(filepath.Join(d, "oci", "index.json")); err != nil {
		t.Fatalf("no release layout in %s (make release-e2e): %v", d, err)
	}
	return d
}

// readmeBlock is the first ```sh block after the heading in README.md.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.RepoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no heading %q", heading)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("README.md has no sh block after %q", heading)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// replaceAll replaces old with new in s and fails the test when s has no old: the README changed under the test.
func replaceAll(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("the README's block no longer has %q:\n%s", old, s)
	}
	return strings.ReplaceAll(s, old, new)
}

// TestTheReleaseInstallsFromAMirrorWhoseImagesTheNodesPull pushes make release's layout to a registry on kind
// (as the release workflow pushes it to ghcr.io), runs the README's mirroring block against it (crane copies
// to a mirror path, Helm 3 installs the chart from there with global.imageRegistry), and checks from the
// kubelet's events and the pods' image IDs that the nodes pulled the gate, the demo and PostgreSQL from the
// mirror, with the release's digests; the witness then finds no app start before its migration. A chart that
// depends on premigrate-lib takes the library from the mirror with Helm 4, byte for byte the release's, and its
// gated pods pull the gate from there too. Control: the same install pointed at a path the mirror does not
// hold fails, its pods unable to pull, so the images cannot have come from anywhere else.
func TestTheReleaseInstallsFromAMirrorWhoseImagesTheNodesPull(t *testing.T) {
	share(t, weightOne, 150*time.Second)
	res := scenario(t, registryScenario, env.Helm3)
	ctx := context.Background()
	dist := releaseDist(t)
	reg := startRegistry(t)
	upstream, mirror := reg.host+"/premigrate", reg.host+"/mirror"

	// the release, where the workflow would put it (ghcr.io/premigrate), here below <registry>/premigrate
	start := time.Now()
	digests := pushRelease(t, reg, dist, upstream)
	res.Numbers["push_sec"] = time.Since(start).Seconds()

	// the README's block, with its two names pointed at this registry
	block := readmeBlock(t, "### Pull from your own registry")
	block = replaceAll(t, block, "ghcr.io/premigrate/", upstream+"/")
	block = replaceAll(t, block, "MIRROR=registry.example.com", "MIRROR="+mirror)
	ns := env.NewNamespace(t, "mirror", restricted)
	runEnv := reg.tlsEnv()
	runEnv["PATH"] = filepath.Join(env.RepoRoot, "bin") + ":" + os.Getenv("PATH") // crane, and helm: Helm 3
	runEnv["HELM_NAMESPACE"] = ns
	start = time.Now()
	if out, err := env.Run.RunCmd(t, framework.Cmd{Bin: "bash", Args: []string{"-euo", "pipefail", "-c", block}, Env: runEnv}); err != nil {
		t.Fatalf("the README's block:\n%s\nfailed: %v\n%s", block, err, out)
	}
	res.Numbers["mirror_and_install_sec"] = time.Since(start).Seconds()
	r := env.NewRelease(t, ns, "my-app", env.Helm3)
	env.Run.Must(t, env.Kubectl, "rollout", "status", "-n", ns, "deployment/"+r.Fullname(), "--timeout=3m")

	// the kubelet pulled each image from the mirror, and runs what the release pushed
	assertPulledFromRegistry(t, ns, mirror, map[string]string{
		"gate:" + env.AppVersion: digests["gate"], "demo:" + env.AppVersion: digests["demo"], "postgres:15": digests["postgres"],
	})
	id := r.AppIdentity(ctx)
	if id == "" {
		t.Fatal("the app Deployment carries no identity")
	}
	r.AssertWitness(ctx, id)

	// a chart that depends on the library, taking it from the mirror (the library README's Chart.yaml line)
	libraryFromRegistry(t, reg, dist, mirror+"/premigrate/charts", digests["gate"])

	// control: a path the mirror does not hold; nothing else can supply the images
	cns := env.NewNamespace(t, "mirror-control", restricted)
	out, err := env.Run.RunCmd(t, framework.Cmd{Bin: env.Helm3, Args: []string{"install", "control", "oci://" + mirror + "/premigrate/charts/premigrate",
		"--version", chartVersion(t, env.Chart), "-n", cns, "--set", "global.imageRegistry=" + reg.host + "/absent", "--wait", "--timeout", "40s"},
		Env: reg.tlsEnv()})
	if err == nil {
		t.Fatalf("the install from a path the registry does not hold succeeded: its images came from elsewhere\n%s", out)
	}
	framework.WaitUntil(t, "a pull from the absent path to fail", time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := env.Client.CoreV1().Events(cns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "Failed" && strings.Contains(e.Message, `"`+reg.host+"/absent/premigrate/") {
				return true, nil
			}
		}
		return false, nil
	})
}

// pushRelease pushes make release's layout below to (as the release workflow pushes it to ghcr.io/premigrate),
// and the tests' PostgreSQL image beside it, and returns each repository's digest (gate, demo, postgres,
// charts/premigrate, charts/premigrate-lib).
func pushRelease(t *testing.T, reg registry, dist, to string) map[string]string {
	t.Helper()
	upstream := to
	out, err := env.Run.RunCmd(t, framework.Cmd{Bin: "go", Args: []string{"run", "./hack/release", "push", "--layout", filepath.Join(dist, "oci"), "--to", upstream},
		Dir: env.RepoRoot, Env: reg.tlsEnv(), Stdout: true})
	if err != nil {
		t.Fatalf("pushing the release: %v\n%s", err, out)
	}
	digests := map[string]string{} // repository below the registry (gate, charts/premigrate, ...) -> digest
	for _, line := range strings.Fields(out) {
		ref, digest, ok := strings.Cut(line, "@")
		if !ok {
			continue
		}
		repo, _, _ := strings.Cut(strings.TrimPrefix(ref, upstream+"/"), ":")
		digests[repo] = digest
	}
	for _, want := range []string{"gate", "demo", "charts/premigrate", "charts/premigrate-lib"} {
		if digests[want] == "" {
			t.Fatalf("the release push printed no digest for %s:\n%s", want, out)
		}
	}
	// make release-e2e leaves PostgreSQL out (its arm64 packages): the image the tests built goes beside it,
	// with a label that gives it a config (an image ID) of its own. The kubelet keeps a record of every image ID
	// it pulled and the names it pulled it by (KubeletEnsureSecretPulledImages); an image the other scenarios
	// run preloaded under ghcr.io/premigrate/postgres would, once pulled here under another name, count as
	// pulled and no longer as preloaded: the kubelet would then pull it again (pull policy IfNotPresent, from
	// ghcr.io, unreachable) or refuse it (Never).
	crane := filepath.Join(env.RepoRoot, "bin", "crane")
	pg := filepath.Join(os.Getenv("PREMIGRATE_CACHE"), "images", "postgres.tar")
	if out, err := env.Run.RunCmd(t, framework.Cmd{Bin: crane, Args: []string{"push", pg, upstream + "/postgres:15"}, Env: reg.tlsEnv()}); err != nil {
		t.Fatalf("pushing PostgreSQL: %v\n%s", err, out)
	}
	out, err = env.Run.RunCmd(t, framework.Cmd{Bin: crane, Args: []string{"mutate", upstream + "/postgres:15", "--label", "io.premigrate.test=registry"},
		Env: reg.tlsEnv(), Stdout: true})
	if err != nil {
		t.Fatalf("labelling PostgreSQL: %v\n%s", err, out)
	}
	_, digests["postgres"], _ = strings.Cut(strings.TrimSpace(out), "@")
	return digests
}

// assertPulledFromRegistry checks, for each image (name:tag below registry/premigrate) and its digest, that a
// pod of ns runs it with that digest, and that the kubelet reported pulling it (not finding it present).
func assertPulledFromRegistry(t *testing.T, ns, registry string, images map[string]string) {
	t.Helper()
	ctx := context.Background()
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]map[string]bool{} // image -> the digests its containers run, from the pods' statuses
	for _, p := range pods.Items {
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			if !strings.HasPrefix(c.Image, registry+"/premigrate/") {
				t.Errorf("pod %s container %s runs %s, not an image of %s", p.Name, c.Name, c.Image, registry)
			}
			if d := runningDigest(p, c.Name); d != "" {
				if digests[c.Image] == nil {
					digests[c.Image] = map[string]bool{}
				}
				digests[c.Image][d] = true
			}
		}
	}
	evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for image, digest := range images {
		ref := registry + "/premigrate/" + image
		if got := digests[ref]; len(got) != 1 || !got[digest] {
			t.Errorf("%s: containers run digests %v, want only %s (the digest pushed)", ref, got, digest)
		}
		pulled := regexp.MustCompile(`^Successfully pulled image "` + regexp.QuoteMeta(ref) + `"`)
		found := false
		for _, e := range evs.Items {
			found = found || (e.Reason == "Pulled" && pulled.MatchString(e.Message))
		}
		if !found {
			t.Errorf("no kubelet event says it pulled %s", ref)
		}
	}
}

// runningDigest is the digest of the image the pod's container runs, from its status's image ID
// (<repository>@sha256:...; the repository is the first name the node pulled that content by, which on a
// reused cluster may be an earlier run's registry), or "" when it has none.
func runningDigest(p corev1.Pod, container string) string {
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if s.Name == container {
			_, d, _ := strings.Cut(s.ImageID, "@")
			return d
		}
	}
	return ""
}

// libraryFromRegistry makes a copy of the example chart take premigrate-lib from repo (oci://) with Helm 4,
// checks it got the release's library byte for byte, and deploys it with global.imageRegistry: its gated pods
// run the gate from the mirror with the release's digest, and the ledger's own evidence sees no early start.
func libraryFromRegistry(t *testing.T, reg registry, dist, repo, gateDigest string) {
	t.Helper()
	chart := filepath.Join(t.TempDir(), "ledger")
	env.Run.Must(t, "cp", "-r", env.Example, chart)
	for _, f := range []string{"Chart.lock", "charts"} {
		if err := os.RemoveAll(filepath.Join(chart, f)); err != nil {
			t.Fatal(err)
		}
	}
	chartYAML := filepath.Join(chart, "Chart.yaml")
	b, err := os.ReadFile(chartYAML)
	if err != nil {
		t.Fatal(err)
	}
	fileRepo := regexp.MustCompile(`repository: file://\S*premigrate-lib`)
	if !fileRepo.Match(b) {
		t.Fatalf("%s names no file:// repository of premigrate-lib:\n%s", chartYAML, b)
	}
	if err := os.WriteFile(chartYAML, fileRepo.ReplaceAll(b, []byte("repository: oci://"+repo)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Run.RunCmd(t, framework.Cmd{Bin: env.Helm4, Args: []string{"dependency", "update", chart}, Env: reg.tlsEnv()}); err != nil {
		t.Fatalf("helm dependency update from oci://%s: %v\n%s", repo, err, out)
	}
	libVersion := chartVersion(t, filepath.Join(env.RepoRoot, "charts", "premigrate-lib"))
	name := "premigrate-lib-" + libVersion + ".tgz"
	got, err := os.ReadFile(filepath.Join(chart, "charts", name))
	if err != nil {
		t.Fatalf("helm dependency update wrote no %s: %v", name, err)
	}
	want, err := os.ReadFile(filepath.Join(dist, name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the library from the registry (sha256 %x) is not the release's %s (sha256 %x)", sha256.Sum256(got), name, sha256.Sum256(want))
	}

	mirror := strings.TrimSuffix(repo, "/premigrate/charts")
	l := newLedger(t, env.Helm4)
	l.chart = chart
	values := map[string]any{"schemaVersion": 1, "global": map[string]any{"imageRegistry": mirror}}
	if out, err := l.deploy(values, true); err != nil {
		t.Fatalf("installing the example chart built on the library from the registry: %v\n%s", err, out)
	}
	l.assertSchema(1, 2)
	pods, err := env.Client.CoreV1().Pods(l.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ledger"})
	if err != nil {
		t.Fatal(err)
	}
	gate := mirror + "/premigrate/gate:" + env.AppVersion
	seen := 0
	for _, p := range pods.Items {
		for _, c := range p.Spec.InitContainers {
			if c.Image != gate {
				continue
			}
			seen++
			if d := runningDigest(p, c.Name); d != gateDigest {
				t.Errorf("pod %s runs the gate %s with digest %q, want %q (the release's)", p.Name, gate, d, gateDigest)
			}
		}
	}
	if seen == 0 {
		t.Errorf("no ledger pod runs the gate %s", gate)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// chartVersion is the version in a chart's Chart.yaml.
func chartVersion(t *testing.T, chart string) string {
	t.Helper()
	v, err := framework.ChartVersion(chart)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
