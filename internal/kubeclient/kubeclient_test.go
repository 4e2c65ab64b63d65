package kubeclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/premigrate/premigrate/internal/kubeclient"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestNamespacePrefersFlagThenEnvironmentThenServiceAccountFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "namespace")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		flag    string
		env     map[string]string
		file    string
		want    string
		wantErr bool
	}{
		{name: "the flag wins", flag: "from-flag", env: map[string]string{"POD_NAMESPACE": "from-env"}, file: file, want: "from-flag"},
		{name: "POD_NAMESPACE comes next", env: map[string]string{"POD_NAMESPACE": "from-env"}, file: file, want: "from-env"},
		{name: "the service account file comes last", file: file, want: "from-file"},
		{name: "no source is an error", file: filepath.Join(dir, "missing"), wantErr: true},
		{name: "an empty file is an error", file: empty, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kubeclient.Namespace(tt.flag, env(tt.env), tt.file)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("Namespace = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, kubeclient.ErrNoNamespace) {
				t.Errorf("err = %v, want ErrNoNamespace", err)
			}
		})
	}
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
users:
- name: test
  user:
    token: secret-token
contexts:
- name: test
  context:
    cluster: test
    user: test
current-context: test
`, server)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigReadsAKubeconfigFromTheFlagOrKUBECONFIG(t *testing.T) {
	path := writeKubeconfig(t, "https://10.0.0.1:6443")
	for name, args := range map[string]struct {
		flag string
		env  map[string]string
	}{
		"from the flag":          {flag: path},
		"from KUBECONFIG":        {env: map[string]string{"KUBECONFIG": path}},
		"the flag overrides":     {flag: path, env: map[string]string{"KUBECONFIG": "/nonexistent"}},
		"from a KUBECONFIG list": {env: map[string]string{"KUBECONFIG": "/nonexistent" + string(os.PathListSeparator) + path}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := kubeclient.Config(args.flag, "", env(args.env))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != "https://10.0.0.1:6443" || cfg.BearerToken != "secret-token" {
				t.Errorf("config = host %q token %q", cfg.Host, cfg.BearerToken)
			}
		})
	}
}

func TestConfigOutsideAClusterSaysHowToPassAKubeconfig(t *testing.T) {
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		t.Skip("running in a cluster")
	}
	_, err := kubeclient.Config("", "", env(nil))
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Fatalf("err = %v, want a hint about --kubeconfig", err)
	}
}

func TestConfigFromATokenDirectoryUsesItsTokenAndCA(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"token", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	inPod := env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"})
	cfg, err := kubeclient.Config("", dir, inPod)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://10.96.0.1:443" || cfg.BearerTokenFile != filepath.Join(dir, "token") || cfg.CAFile != filepath.Join(dir, "ca.crt") {
		t.Errorf("config = host %q token file %q CA %q", cfg.Host, cfg.BearerTokenFile, cfg.CAFile)
	}
	path := writeKubeconfig(t, "https://10.0.0.1:6443")
	if cfg, err := kubeclient.Config(path, dir, inPod); err != nil || cfg.Host != "https://10.0.0.1:6443" {
		t.Errorf("a kubeconfig must win over --token-dir: host %v, err %v", cfg, err)
	}
}

func TestConfigFromATokenDirectoryNamesWhatIsMissing(t *testing.T) {
	inPod := env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"})
	for name, tt := range map[string]struct {
		getenv func(string) string
		want   string
	}{
		"outside a pod": {getenv: env(nil), want: "KUBERNETES_SERVICE_HOST"},
		"without token": {getenv: inPod, want: "API token of --token-dir"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := kubeclient.Config("", t.TempDir(), tt.getenv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to name %q", err, tt.want)
			}
		})
	}
}

// apiServer answers the few requests the gate makes, like the API server.
func apiServer(t *testing.T) *httptest.Server {
	t.Helper()
	job := batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "shop-migrate", Namespace: "shop", Labels: map[string]string{"app": "shop"}},
	}
	cm := corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "records", Namespace: "shop", ResourceVersion: "7"},
		Data:       map[string]string{"a": "b"},
	}
	write := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		if err := json.NewEncoder(w).Encode(v); err != nil {
			t.Error(err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis/batch/v1/namespaces/shop/jobs", func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer secret-token" {
			write(w, http.StatusUnauthorized, metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Failure", Reason: metav1.StatusReasonUnauthorized, Code: 401})
			return
		}
		if r.URL.Query().Get("labelSelector") != "app=shop" {
			t.Errorf("labelSelector = %q", r.URL.Query().Get("labelSelector"))
		}
		if r.URL.Query().Get("watch") != "true" {
			write(w, http.StatusOK, batchv1.JobList{
				TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "JobList"},
				ListMeta: metav1.ListMeta{ResourceVersion: "42"},
				Items:    []batchv1.Job{job},
			})
			return
		}
		if rv := r.URL.Query().Get("resourceVersion"); rv != "42" {
			gone, _ := json.Marshal(metav1.Status{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
				Status:   "Failure", Reason: metav1.StatusReasonExpired, Code: http.StatusGone,
				Message: "too old resource version: " + rv,
			})
			write(w, http.StatusOK, metav1.WatchEvent{Type: string(watch.Error), Object: runtime.RawExtension{Raw: gone}})
			return
		}
		done := job.DeepCopy()
		done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		raw, _ := json.Marshal(done)
		write(w, http.StatusOK, metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: raw}})
	})
	mux.HandleFunc("GET /api/v1/namespaces/shop/configmaps", func(w http.ResponseWriter, r *http.Request) {
		if fs := r.URL.Query().Get("fieldSelector"); fs != "metadata.name=records" {
			t.Errorf("fieldSelector = %q", fs)
		}
		write(w, http.StatusOK, corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}, Items: []corev1.ConfigMap{cm}})
	})
	mux.HandleFunc("GET /api/v1/namespaces/shop/configmaps/records", func(w http.ResponseWriter, r *http.Request) {
		write(w, http.StatusOK, cm)
	})
	mux.HandleFunc("PUT /api/v1/namespaces/shop/configmaps/records", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var got corev1.ConfigMap
		if err := json.Unmarshal(body, &got); err != nil {
			t.Error(err)
		}
		if got.ResourceVersion != cm.ResourceVersion {
			write(w, http.StatusConflict, metav1.Status{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
				Status:   "Failure", Reason: metav1.StatusReasonConflict, Code: http.StatusConflict,
				Message: "the object has been modified",
			})
			return
		}
		got.ResourceVersion = "8"
		write(w, http.StatusOK, got)
	})
	mux.HandleFunc("POST /api/v1/namespaces/shop/configmaps", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var got corev1.ConfigMap
		if err := json.Unmarshal(body, &got); err != nil {
			t.Error(err)
		}
		if got.Name == cm.Name {
			write(w, http.StatusConflict, metav1.Status{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
				Status:   "Failure", Reason: metav1.StatusReasonAlreadyExists, Code: http.StatusConflict,
				Message: "configmaps \"records\" already exists",
			})
			return
		}
		got.UID, got.ResourceVersion = "new-uid", "1"
		write(w, http.StatusCreated, got)
	})
	mux.HandleFunc("PATCH /apis/batch/v1/namespaces/shop/jobs/shop-migrate", func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "application/merge-patch+json" {
			t.Errorf("Content-Type = %q, want a merge patch", ct)
		}
		var patch batchv1.Job
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &patch); err != nil {
			t.Error(err)
		}
		patched := job.DeepCopy()
		patched.OwnerReferences = patch.OwnerReferences
		write(w, http.StatusOK, patched)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestConfigMapClientCreatesAndReportsAnExistingObject(t *testing.T) {
	cms := clients(t, apiServer(t).URL).ConfigMaps("shop")
	ctx := context.Background()
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{})
	if err != nil || created.UID != "new-uid" {
		t.Fatalf("create = %+v, %v", created, err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "records"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("creating an existing ConfigMap: err = %v, want AlreadyExists", err)
	}
}

func TestJobClientPatchesWithAMergePatch(t *testing.T) {
	jobs := clients(t, apiServer(t).URL).Jobs("shop")
	patch := []byte(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"records","uid":"u1"}]}}`)
	got, err := jobs.Patch(context.Background(), "shop-migrate", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "u1" {
		t.Errorf("patched Job's owners = %+v", got.OwnerReferences)
	}
}

func clients(t *testing.T, host string) *kubeclient.Clients {
	t.Helper()
	c, err := kubeclient.New(&rest.Config{Host: host, BearerToken: "secret-token"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestJobClientListsAndWatchesFromTheListsResourceVersion(t *testing.T) {
	jobs := clients(t, apiServer(t).URL).Jobs("shop")
	ctx := context.Background()
	list, err := jobs.List(ctx, metav1.ListOptions{LabelSelector: "app=shop"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "shop-migrate" || list.ResourceVersion != "42" {
		t.Fatalf("list = %+v", list)
	}
	w, err := jobs.Watch(ctx, metav1.ListOptions{LabelSelector: "app=shop", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev, ok := <-w.ResultChan()
	if !ok {
		t.Fatal("watch closed without an event")
	}
	job, isJob := ev.Object.(*batchv1.Job)
	if ev.Type != watch.Modified || !isJob || len(job.Status.Conditions) != 1 {
		t.Fatalf("event = %s %#v", ev.Type, ev.Object)
	}
}

func TestJobClientDecodesWatchErrors(t *testing.T) {
	jobs := clients(t, apiServer(t).URL).Jobs("shop")
	w, err := jobs.Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=shop", ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := <-w.ResultChan()
	if ev.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) {
		t.Fatalf("event = %s %#v, want an expired error", ev.Type, ev.Object)
	}
}

func TestConfigMapClientGetsListsAndUpdatesWithOptimisticConcurrency(t *testing.T) {
	cms := clients(t, apiServer(t).URL).ConfigMaps("shop")
	ctx := context.Background()
	list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=records"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	cm, err := cms.Get(ctx, "records", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["c"] = "d"
	updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion != "8" || updated.Data["c"] != "d" {
		t.Errorf("updated = %+v", updated)
	}
	cm.ResourceVersion = "6"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update with a stale resourceVersion: err = %v, want a conflict", err)
	}
}

func TestClientsReportAPIErrorsAsStatusErrors(t *testing.T) {
	srv := apiServer(t)
	c, err := kubeclient.New(&rest.Config{Host: srv.URL, BearerToken: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Jobs("shop").List(context.Background(), metav1.ListOptions{LabelSelector: "app=shop"}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("err = %v, want Unauthorized", err)
	}
}

func TestWorkloadClientAnnotatesWithAMergePatchAsItsFieldManager(t *testing.T) {
	var method, path, contentType, manager, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		method, path, contentType, manager, body = r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.URL.Query().Get("fieldManager"), string(b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"shop-app"}}`)
	}))
	t.Cleanup(srv.Close)
	err := clients(t, srv.URL).Workloads("shop").Annotate(context.Background(), "deployments", "shop-app", "premigrate.io/recorded-identities", "a b", "premigrate")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"annotations":{"premigrate.io/recorded-identities":"a b"}}}`
	if method != http.MethodPatch || path != "/apis/apps/v1/namespaces/shop/deployments/shop-app" ||
		contentType != string(types.MergePatchType) || manager != "premigrate" || body != want {
		t.Errorf("request = %s %s (%s, fieldManager %q) %s; want PATCH of the Deployment with %s", method, path, contentType, manager, body, want)
	}
}
