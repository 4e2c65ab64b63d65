// chartserver serves a Helm chart repository (index.yaml and the packaged charts) over plain HTTP, for
// Flux and Argo CD on the offline kind cluster (hack/gitops.sh). The files come from one ConfigMap, read
// through the Kubernetes API with the pod's service account at most once a second, so a refreshed
// ConfigMap is served at once, without a restart and without waiting for the kubelet to update a volume
// (data and binaryData keys are file names). With -dir it serves a local directory instead.
//
//	chartserver -addr :8080 -configmap gitops-charts/charts
//	chartserver -addr 127.0.0.1:8080 -dir ./repo
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// configMapFiles reads a ConfigMap's data and binaryData through the API server and caches them briefly.
type configMapFiles struct {
	client    *http.Client
	url       string
	tokenFile string
	ttl       time.Duration

	mu      sync.Mutex
	fetched time.Time
	files   map[string][]byte
	version string
}

func newConfigMapFiles(ref string, ttl time.Duration) (*configMapFiles, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("-configmap wants NAMESPACE/NAME, got %q", ref)
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("KUBERNETES_SERVICE_HOST/PORT are not set: not in a pod? (use -dir)")
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("no certificate in " + saDir + "/ca.crt")
	}
	return &configMapFiles{
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}},
		url:       "https://" + net.JoinHostPort(host, port) + "/api/v1/namespaces/" + ns + "/configmaps/" + name,
		tokenFile: saDir + "/token",
		ttl:       ttl,
	}, nil
}

// get returns the files and the ConfigMap's resourceVersion, from the cache when it is fresh enough.
func (c *configMapFiles) get() (map[string][]byte, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files != nil && time.Since(c.fetched) < c.ttl {
		return c.files, c.version, nil
	}
	token, err := os.ReadFile(c.tokenFile) // re-read: the kubelet rotates it
	if err != nil {
		return nil, "", err
	}
	req, err := http.NewRequest(http.MethodGet, c.url, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return nil, "", fmt.Errorf("GET %s: %s: %s", c.url, resp.Status, strings.TrimSpace(b.String()))
	}
	var cm struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Data       map[string]string `json:"data"`
		BinaryData map[string]string `json:"binaryData"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cm); err != nil {
		return nil, "", fmt.Errorf("decoding the ConfigMap: %w", err)
	}
	files := map[string][]byte{}
	for k, v := range cm.Data {
		files[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, "", fmt.Errorf("binaryData %q: %w", k, err)
		}
		files[k] = b
	}
	c.files, c.version, c.fetched = files, cm.Metadata.ResourceVersion, time.Now()
	return files, c.version, nil
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".yaml", ".yml":
		return "application/x-yaml"
	case ".tgz", ".gz":
		return "application/gzip"
	case ".prov", ".txt":
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

func (c *configMapFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	files, version, err := c.get()
	if err != nil {
		log.Printf("%s %s: %v", r.Method, r.URL.Path, err)
		http.Error(w, "the chart repository is not available: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "" {
		names := make([]string, 0, len(files))
		for k := range files {
			names = append(names, k)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintf(w, "resourceVersion %s\n%s\n", version, strings.Join(names, "\n"))
		return
	}
	b, ok := files[name]
	if !ok {
		log.Printf("%s /%s: not found", r.Method, name)
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", contentType(name))
	w.Header().Set("Cache-Control", "no-cache")
	log.Printf("%s /%s: %d bytes (resourceVersion %s)", r.Method, name, len(b), version)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	cmRef := flag.String("configmap", "", "serve the files of this ConfigMap (NAMESPACE/NAME)")
	dir := flag.String("dir", "", "serve this directory instead")
	ttl := flag.Duration("ttl", time.Second, "how long a read of the ConfigMap is reused")
	flag.Parse()

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	switch {
	case *cmRef != "" && *dir == "":
		files, err := newConfigMapFiles(*cmRef, *ttl)
		if err != nil {
			log.Fatal(err)
		}
		mux.Handle("/", files)
	case *dir != "" && *cmRef == "":
		mux.Handle("/", http.FileServer(http.Dir(*dir)))
	default:
		log.Fatal("give one of -configmap NAMESPACE/NAME and -dir DIR")
	}
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("chartserver: listening on %s", *addr)
	log.Fatal(srv.ListenAndServe())
}
