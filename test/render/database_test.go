package render

import (
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Behaviour 4: the embedded PostgreSQL.
func TestTheEmbeddedDatabaseIsAStatefulSetWithItsServicesAndSecret(t *testing.T) {
	name := fullname + "-postgresql"

	t.Run("one replica of ghcr.io/premigrate/postgres:15 with its credentials and data directory", func(t *testing.T) {
		r := render(t, renderOptions{})
		sts := mustFind[*appsv1.StatefulSet](t, r, "StatefulSet", name)
		if *sts.Spec.Replicas != 1 {
			t.Errorf("replicas %d", *sts.Spec.Replicas)
		}
		pg := container(t, sts.Spec.Template.Spec.Containers, "postgresql")
		if pg.Image != "ghcr.io/premigrate/postgres:15" {
			t.Errorf("image %q", pg.Image)
		}
		for k, v := range map[string]string{"POSTGRES_USER": "premigrate", "POSTGRES_DB": "premigrate", "PGDATA": "/var/lib/postgresql/data/pgdata"} {
			if e, ok := envVar(pg.Env, k); !ok || e.Value != v {
				t.Errorf("env %s = %+v, want %q", k, e, v)
			}
		}
		assertSecretEnv(t, pg.Env, "POSTGRES_PASSWORD", name, "password")
		if !selects(sts.Spec.Selector.MatchLabels, sts.Spec.Template.Labels) {
			t.Error("the StatefulSet does not select its own pods")
		}
	})

	t.Run("the pod runs as postgres 999 on a read-only root with emptyDirs for /tmp and the socket", func(t *testing.T) {
		sts := mustFind[*appsv1.StatefulSet](t, render(t, renderOptions{}), "StatefulSet", name)
		psc := sts.Spec.Template.Spec.SecurityContext
		if psc == nil || *psc.RunAsUser != 999 || *psc.RunAsGroup != 999 {
			t.Fatalf("pod security context %+v", psc)
		}
		pg := container(t, sts.Spec.Template.Spec.Containers, "postgresql")
		if pg.SecurityContext == nil || pg.SecurityContext.ReadOnlyRootFilesystem == nil || !*pg.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("root filesystem is writable")
		}
		mounts := map[string]string{}
		for _, m := range pg.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		vols := map[string]corev1.Volume{}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			vols[v.Name] = v
		}
		for _, path := range []string{"/tmp", "/var/run/postgresql"} {
			v, ok := vols[mounts[path]]
			if !ok || v.EmptyDir == nil {
				t.Errorf("%s is not an emptyDir: %+v", path, v)
			}
		}
		if mounts["/var/lib/postgresql/data"] != "data" {
			t.Errorf("data mount %v", mounts)
		}
	})

	t.Run("the data lives on a claim of persistence.size or on an emptyDir", func(t *testing.T) {
		sts := mustFind[*appsv1.StatefulSet](t, render(t, renderOptions{}), "StatefulSet", name)
		if len(sts.Spec.VolumeClaimTemplates) != 1 {
			t.Fatalf("claims %+v", sts.Spec.VolumeClaimTemplates)
		}
		claim := sts.Spec.VolumeClaimTemplates[0]
		if claim.Name != "data" || claim.Spec.Resources.Requests.Storage().String() != "1Gi" || claim.Spec.StorageClassName != nil {
			t.Errorf("claim %+v", claim)
		}
		sts = mustFind[*appsv1.StatefulSet](t, render(t, renderOptions{values: "postgresql: {persistence: {size: 5Gi, storageClass: fast}}"}), "StatefulSet", name)
		claim = sts.Spec.VolumeClaimTemplates[0]
		if claim.Spec.Resources.Requests.Storage().String() != "5Gi" || claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != "fast" {
			t.Errorf("configured claim %+v", claim.Spec)
		}
		sts = mustFind[*appsv1.StatefulSet](t, render(t, renderOptions{values: "postgresql: {persistence: {storageClass: '-'}}"}), "StatefulSet", name)
		if sc := sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName; sc == nil || *sc != "" {
			t.Errorf("storageClass '-' gives %v, want the empty string", sc)
		}
		r := render(t, renderOptions{values: "postgresql: {persistence: {enabled: false}}"})
		sts = mustFind[*appsv1.StatefulSet](t, r, "StatefulSet", name)
		if len(sts.Spec.VolumeClaimTemplates) != 0 {
			t.Errorf("claims without persistence: %+v", sts.Spec.VolumeClaimTemplates)
		}
		found := false
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name == "data" && v.EmptyDir != nil {
				found = true
			}
		}
		if !found {
			t.Error("no data emptyDir without persistence")
		}
		if _, ok := mustFind[*corev1.Secret](t, r, "Secret", name).Annotations["helm.sh/resource-policy"]; ok {
			t.Error("the Secret is kept after uninstall although no volume outlives it")
		}
	})

	t.Run("startup and readiness run pg_isready against the configured user and database, liveness only connects", func(t *testing.T) {
		sts := mustFind[*appsv1.StatefulSet](t, render(t, renderOptions{values: "postgresql: {auth: {username: app, database: appdb}}"}), "StatefulSet", name)
		pg := container(t, sts.Spec.Template.Spec.Containers, "postgresql")
		want := []string{"pg_isready", "-U", "app", "-d", "appdb", "-h", "127.0.0.1", "-p", "5432"}
		for what, p := range map[string]*corev1.Probe{"startup": pg.StartupProbe, "readiness": pg.ReadinessProbe} {
			if p == nil || p.Exec == nil || !equalStrings(p.Exec.Command, want) {
				t.Errorf("%s probe %+v, want exec %v", what, p, want)
			}
		}
		if p := pg.LivenessProbe; p == nil || p.TCPSocket == nil || p.TCPSocket.Port.String() != "postgresql" {
			t.Errorf("liveness probe %+v, want a TCP connection to the port named postgresql", p)
		}
		// a first start (initdb) of up to five minutes is not killed by the liveness probe
		if p := pg.StartupProbe; p == nil || p.PeriodSeconds*p.FailureThreshold < 300 {
			t.Errorf("startup probe %+v allows less than 300 s", p)
		}
	})

	t.Run("a ClusterIP and a headless Service expose port 5432", func(t *testing.T) {
		r := render(t, renderOptions{})
		sts := mustFind[*appsv1.StatefulSet](t, r, "StatefulSet", name)
		svc := mustFind[*corev1.Service](t, r, "Service", name)
		if svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 5432 {
			t.Errorf("service %+v", svc.Spec)
		}
		hl := mustFind[*corev1.Service](t, r, "Service", name+"-headless")
		if hl.Spec.ClusterIP != corev1.ClusterIPNone || hl.Spec.Ports[0].Port != 5432 {
			t.Errorf("headless service %+v", hl.Spec)
		}
		if sts.Spec.ServiceName != hl.Name {
			t.Errorf("serviceName %q, want %q", sts.Spec.ServiceName, hl.Name)
		}
		for _, s := range []*corev1.Service{svc, hl} {
			if !selects(s.Spec.Selector, sts.Spec.Template.Labels) {
				t.Errorf("%s does not select the database pod", s.Name)
			}
		}
	})

	t.Run("the Secret holds the password and a URL to the Service", func(t *testing.T) {
		r := render(t, renderOptions{values: "postgresql: {auth: {username: app, password: 'p@ss word+/', database: appdb}}"})
		sec := mustFind[*corev1.Secret](t, r, "Secret", name)
		if string(sec.Data["password"]) != "p@ss word+/" {
			t.Errorf("password %q", sec.Data["password"])
		}
		u, err := url.Parse(string(sec.Data["url"]))
		if err != nil {
			t.Fatalf("url %q: %v", sec.Data["url"], err)
		}
		pw, _ := u.User.Password()
		if u.Scheme != "postgres" || u.User.Username() != "app" || pw != "p@ss word+/" || u.Host != name+":5432" ||
			u.Path != "/appdb" || u.Query().Get("sslmode") != "disable" {
			t.Errorf("url %q parses to user %q password %q host %q path %q", sec.Data["url"], u.User.Username(), pw, u.Host, u.Path)
		}
	})

	t.Run("a generated password has 24 alphanumeric characters", func(t *testing.T) {
		sec := mustFind[*corev1.Secret](t, render(t, renderOptions{}), "Secret", name)
		if !regexp.MustCompile(`^[A-Za-z0-9]{24}$`).Match(sec.Data["password"]) {
			t.Errorf("generated password %q", sec.Data["password"])
		}
		if !strings.Contains(string(sec.Data["url"]), ":"+string(sec.Data["password"])+"@") {
			t.Errorf("url %q does not carry the password", sec.Data["url"])
		}
		if sec.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("the Secret of a persistent database is not kept: %v", sec.Annotations)
		}
	})
}

// The password is reused from the existing Secret through `lookup`, so an upgrade never changes it.
func TestTheDatabasePasswordIsKeptFromTheExistingSecret(t *testing.T) {
	name := fullname + "-postgresql"
	for _, upgrade := range []bool{false, true} {
		r := render(t, renderOptions{upgrade: upgrade, existing: []runtime.Object{existingPasswordSecret("kept-password")}})
		sec := mustFind[*corev1.Secret](t, r, "Secret", name)
		if string(sec.Data["password"]) != "kept-password" {
			t.Errorf("upgrade=%v: password %q, want the existing one", upgrade, sec.Data["password"])
		}
		if !strings.Contains(string(sec.Data["url"]), ":kept-password@") {
			t.Errorf("upgrade=%v: url %q", upgrade, sec.Data["url"])
		}
	}
	r := render(t, renderOptions{values: "postgresql: {auth: {password: explicit}}", existing: []runtime.Object{existingPasswordSecret("kept-password")}})
	if got := string(mustFind[*corev1.Secret](t, r, "Secret", name).Data["password"]); got != "explicit" {
		t.Errorf("postgresql.auth.password %q does not win over the existing Secret", got)
	}
	a := mustFind[*corev1.Secret](t, render(t, renderOptions{}), "Secret", name)
	b := mustFind[*corev1.Secret](t, render(t, renderOptions{}), "Secret", name)
	if string(a.Data["password"]) == string(b.Data["password"]) {
		t.Error("two renders without an existing Secret generated the same password")
	}
}

// A render that cannot read the cluster (helm template, --dry-run=client, Argo CD) never generates
// the embedded database's password: each such render would make another one, which `kubectl apply` or a sync
// would write while the database keeps the first. It refuses, naming the value and --dry-run=server; a render
// that reaches a cluster (the namespace's kube-root-ca.crt, or the namespace default on a first install with
// --create-namespace, which Helm renders before creating the namespace) generates one as before.
func TestARenderWithoutAClusterNeverGeneratesTheDatabasePassword(t *testing.T) {
	name := fullname + "-postgresql"
	defaultNamespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	filledInCluster := existingPasswordSecret("made-in-the-cluster")
	filledInCluster.Annotations = map[string]string{"premigrate.io/password": "generated-in-cluster"}
	notFilledYet := existingPasswordSecret("")
	notFilledYet.Data = nil
	notFilledYet.Annotations = filledInCluster.Annotations
	cases := []struct {
		name      string
		o         renderOptions
		generated bool   // a Secret with a new 24-character password
		inCluster bool   // a Secret without data, and the Job that fills it in the cluster
		password  string // else, the Secret's password ("" when no Secret is rendered)
		fails     bool
	}{
		{name: "helm template with the defaults leaves the password to the cluster", o: renderOptions{noCluster: true}, inCluster: true},
		{name: "helm template in job mode too", o: renderOptions{noCluster: true, values: "migration: {mode: job}"}, inCluster: true},
		{name: "helm template in argocd mode too", o: renderOptions{noCluster: true, values: "migration: {mode: argocd}"}, inCluster: true},
		{name: "helm template of an upgrade refuses", o: renderOptions{noCluster: true, upgrade: true}, fails: true},
		{name: "helm template with a password renders it", o: renderOptions{noCluster: true, values: "postgresql: {auth: {password: given}}"}, password: "given"},
		{name: "helm template with a Secret of the user's renders none", o: renderOptions{noCluster: true, values: "postgresql: {auth: {existingSecret: db-credentials}}"}},
		{name: "helm template with an external database renders none", o: renderOptions{noCluster: true, values: "postgresql: {enabled: false}\ndatabase: {existingSecret: db-url, existingSecretKey: url}"}},
		{name: "helm install generates one", o: renderOptions{}, generated: true},
		{name: "helm install --create-namespace generates one", o: renderOptions{noCluster: true, existing: []runtime.Object{defaultNamespace}}, generated: true},
		{name: "helm upgrade keeps the Secret's", o: renderOptions{upgrade: true, existing: []runtime.Object{existingPasswordSecret("kept-password")}}, password: "kept-password"},
		{name: "helm upgrade reads back a password made in the cluster", o: renderOptions{upgrade: true, existing: []runtime.Object{filledInCluster}}, password: "made-in-the-cluster"},
		{name: "helm upgrade leaves a Secret the cluster has not filled yet to the cluster", o: renderOptions{upgrade: true, existing: []runtime.Object{notFilledYet}}, inCluster: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := renderValues(c.o)
			if c.fails {
				if err == nil {
					t.Fatal("rendered an upgrade without a cluster and without a password: it cannot show the Secret the upgrade keeps")
				}
				for _, want := range []string{"postgresql.auth.password", "rendered without a cluster", "--dry-run=server"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the error does not name %q: %v", want, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sec, ok := r.find("Secret", name)
			job := false
			for _, o := range r.ofKind("Job") {
				job = job || strings.HasPrefix(o.name(), fullname+"-password-")
			}
			if job != c.inCluster {
				t.Errorf("the Job that fills the Secret in the cluster is rendered: %v, want %v", job, c.inCluster)
			}
			switch {
			case c.inCluster:
				if !ok {
					t.Fatalf("no Secret %s: the Job fills the chart's, and may not create one", name)
				}
				s := sec.obj.(*corev1.Secret)
				if len(s.Data) != 0 || len(s.StringData) != 0 {
					t.Errorf("the Secret carries data %v: a render without a cluster must carry no password", s.Data)
				}
				if s.Annotations["premigrate.io/password"] != "generated-in-cluster" {
					t.Errorf("the Secret's annotations %v do not say its password is made in the cluster", s.Annotations)
				}
			case c.generated:
				if !ok || !regexp.MustCompile(`^[A-Za-z0-9]{24}$`).Match(sec.obj.(*corev1.Secret).Data["password"]) {
					t.Errorf("no generated password: %v", ok)
				}
			case c.password == "":
				if ok {
					t.Errorf("a Secret %s is rendered", name)
				}
			case !ok:
				t.Errorf("no Secret %s", name)
			default:
				if got := string(sec.obj.(*corev1.Secret).Data["password"]); got != c.password {
					t.Errorf("password %q, want %q", got, c.password)
				}
			}
		})
	}
}

// A render without a cluster is the same every time (ct, kubeconform pipelines, helm template | kubectl apply,
// Argo CD): the Job that fills the Secret runs the gate with the URL to write, gets update and get on that one
// Secret (no right to create one, which could mint another account's token), and its token only in its pod.
func TestARenderWithoutAClusterIsTheSameTwiceAndItsPasswordJobMayOnlyFillTheOneSecret(t *testing.T) {
	a, b := render(t, renderOptions{noCluster: true}), render(t, renderOptions{noCluster: true})
	if !reflect.DeepEqual(a.files, b.files) {
		t.Error("two renders without a cluster differ")
	}
	var job *batchv1.Job
	for _, o := range a.ofKind("Job") {
		if strings.HasPrefix(o.name(), fullname+"-password-") {
			job = o.obj.(*batchv1.Job)
		}
	}
	if job == nil {
		t.Fatalf("no Job %s-password-<hash>; have %s", fullname, a.summary())
	}
	pod := job.Spec.Template.Spec
	assert.Equal(t, fullname+"-password", pod.ServiceAccountName)
	require.NotNil(t, pod.AutomountServiceAccountToken)
	assert.True(t, *pod.AutomountServiceAccountToken, "the token in the Job's pod")
	sa := mustFind[*corev1.ServiceAccount](t, a, "ServiceAccount", fullname+"-password")
	require.NotNil(t, sa.AutomountServiceAccountToken)
	assert.False(t, *sa.AutomountServiceAccountToken, "and nowhere else")
	require.Len(t, pod.Containers, 1)
	assert.Equal(t, []string{"/gate", "secret", "--name", fullname + "-postgresql",
		"--url", "postgres://premigrate:{password}@" + fullname + "-postgresql:5432/premigrate?sslmode=disable"}, pod.Containers[0].Command)
	role := mustFind[*rbacv1.Role](t, a, "Role", fullname+"-password")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"},
		ResourceNames: []string{fullname + "-postgresql"}, Verbs: []string{"get", "update"}}}, role.Rules)
	binding := mustFind[*rbacv1.RoleBinding](t, a, "RoleBinding", fullname+"-password")
	assert.Equal(t, fullname+"-password", binding.RoleRef.Name)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname + "-password", Namespace: namespace}}, binding.Subjects)
	// a new gate image is a new Job: kubectl apply never patches an immutable pod template
	other := render(t, renderOptions{noCluster: true, values: "gate: {image: {tag: other}}"})
	for _, o := range other.ofKind("Job") {
		if o.name() == job.Name {
			t.Errorf("a new gate image keeps the Job name %s", job.Name)
		}
	}
	// the Secret and the Job come before the database and the migration in Argo CD's waves
	argo := render(t, renderOptions{noCluster: true, values: "migration: {mode: argocd}"})
	for _, o := range argo.objects {
		if strings.HasPrefix(o.name(), fullname+"-password") || o.name() == fullname+"-postgresql" && o.kind == "Secret" {
			assert.Equal(t, "-1", o.meta.GetAnnotations()["argocd.argoproj.io/sync-wave"], "%s/%s", o.kind, o.name())
		}
	}
}

// postgresql.auth.existingSecret: the password comes from a Secret of the user's; the app and the migration
// get a URL without it and PGPASSWORD, which pgx (the demo's driver) and libpq read.
func TestTheEmbeddedDatabaseCanTakeItsPasswordFromAnExistingSecret(t *testing.T) {
	const values = "postgresql: {auth: {username: app, database: appdb, existingSecret: db-credentials, existingSecretPasswordKey: pw}}\n"
	name := fullname + "-postgresql"
	for _, c := range []struct {
		name, values string
	}{
		{"hook mode", ""},
		{"job mode, which needs no password of the chart", "migration: {mode: job}\n"},
		{"argocd mode", "migration: {mode: argocd}\n"},
		{"gate command mode", "gate: {mode: command}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, renderOptions{values: values + c.values})
			if _, ok := r.find("Secret", name); ok {
				t.Errorf("the chart still renders its Secret %s", name)
			}
			pg := container(t, mustFind[*appsv1.StatefulSet](t, r, "StatefulSet", name).Spec.Template.Spec.Containers, "postgresql")
			assertSecretEnv(t, pg.Env, "POSTGRES_PASSWORD", "db-credentials", "pw")

			// every container that connects gets a URL without the password, and PGPASSWORD from the Secret
			for key, tmpl := range r.podTemplates() {
				for _, ctr := range append(append([]corev1.Container{}, tmpl.Spec.InitContainers...), tmpl.Spec.Containers...) {
					e, ok := envVar(ctr.Env, "DATABASE_URL")
					if !ok {
						continue
					}
					u, err := url.Parse(e.Value)
					if err != nil || e.ValueFrom != nil {
						t.Fatalf("%s %s: DATABASE_URL %+v: %v", key, ctr.Name, e, err)
					}
					if _, has := u.User.Password(); has || u.User.Username() != "app" || u.Host != name+":5432" || u.Path != "/appdb" {
						t.Errorf("%s %s: DATABASE_URL %q", key, ctr.Name, e.Value)
					}
					assertSecretEnv(t, ctr.Env, "PGPASSWORD", "db-credentials", "pw")
				}
			}
			app := container(t, r.deployment(t).Spec.Template.Spec.Containers, "app")
			if _, ok := envVar(app.Env, "PGPASSWORD"); !ok {
				t.Error("the app container has no PGPASSWORD")
			}
			if _, ok := envVar(container(t, r.job(t).Spec.Template.Spec.Containers, "migrate").Env, "PGPASSWORD"); !ok {
				t.Error("the migration has no PGPASSWORD")
			}
			if !strings.Contains(r.notes, "password from Secret db-credentials key pw") {
				t.Errorf("the notes do not name the Secret:\n%s", r.notes)
			}
		})
	}

	t.Run("the key defaults to password", func(t *testing.T) {
		r := render(t, renderOptions{values: "postgresql: {auth: {existingSecret: db-credentials}}"})
		pg := container(t, mustFind[*appsv1.StatefulSet](t, r, "StatefulSet", name).Spec.Template.Spec.Containers, "postgresql")
		assertSecretEnv(t, pg.Env, "POSTGRES_PASSWORD", "db-credentials", "password")
	})
}
