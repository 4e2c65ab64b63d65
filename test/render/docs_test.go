package render

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Behaviour 8: NOTES.txt explains the run and the helm test Pod probes the Service.
func TestTheNotesAndTheTestPodExplainAndProbeTheRelease(t *testing.T) {
	t.Run("the notes name the mode, the identity, the log command and what to do on failure", func(t *testing.T) {
		for _, c := range []struct {
			name, values string
			upgrade      bool
			mode         string
		}{
			{"hook install", "", false, "Migration mode: hook"},
			{"hook upgrade", "", true, "Migration mode: hook"},
			{"job", "migration: {mode: job}\npostgresql: {auth: {password: pw}}", false, "Migration mode: job"},
			{"argocd", argoValues, false, "Migration mode: argocd"},
		} {
			r := render(t, renderOptions{values: c.values, upgrade: c.upgrade})
			job := r.job(t)
			id := identityOf(t, r)
			for _, want := range []string{
				c.mode,
				"Migration identity: " + id,
				"kubectl -n " + namespace + " logs job/" + job.Name + " -c migrate",
				"If the migration failed",
				"describe job/" + job.Name,
			} {
				if !strings.Contains(r.notes, want) {
					t.Errorf("%s: notes lack %q:\n%s", c.name, want, r.notes)
				}
			}
		}
		r := render(t, renderOptions{values: "migration: {enabled: false}"})
		if !strings.Contains(r.notes, "Migration: disabled") || strings.Contains(r.notes, "logs job/") {
			t.Errorf("notes of a disabled migration:\n%s", r.notes)
		}
	})

	t.Run("the test Pod runs gate probe against the Service's /readyz", func(t *testing.T) {
		r := render(t, renderOptions{values: "service: {port: 8088}"})
		pod := mustFind[*corev1.Pod](t, r, "Pod", fullname+"-test")
		if pod.Annotations["helm.sh/hook"] != "test" {
			t.Errorf("annotations %v", pod.Annotations)
		}
		if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("restartPolicy %q", pod.Spec.RestartPolicy)
		}
		c := container(t, pod.Spec.Containers, "probe")
		if c.Image != "ghcr.io/premigrate/gate:0.3.0" || !equalStrings(c.Command, []string{"/gate"}) {
			t.Errorf("image %q command %v", c.Image, c.Command)
		}
		if !containsSeq(c.Args, "probe", "--url", "http://"+fullname+":8088/readyz") {
			t.Errorf("args %v", c.Args)
		}
		if problems := restrictedProblems(pod.Spec); len(problems) > 0 {
			t.Errorf("test pod: %v", problems)
		}
		if _, ok := render(t, renderOptions{values: "tests: {enabled: false}"}).find("Pod", fullname+"-test"); ok {
			t.Error("tests.enabled=false still renders the test Pod")
		}
	})

	t.Run("the test Pod GETs the app's own path and stays out of job mode's kubectl apply unless asked", func(t *testing.T) {
		const job = "migration: {mode: job}\npostgresql: {auth: {password: pw}}\n"
		for _, c := range []struct {
			name, values, url string // url "": no test Pod
		}{
			{"the readiness probe's path by default", "", "/readyz"},
			{"the readiness probe's path when the app has another", "readinessProbe: {httpGet: {path: /ping, port: http}}", "/ping"},
			{"/ when the readiness probe is no HTTP GET", "readinessProbe: {httpGet: null, tcpSocket: {port: http}}", "/"},
			{"/ without a readiness probe", "readinessProbe: {}", "/"},
			{"/ for another image, whose default readiness probe is a TCP connect", "image: {repository: registry.example.com/my-app}\ncommand: [/my-app]", "/"},
			{"tests.path over the probe's", "tests: {path: /status}", "/status"},
			{"none in job mode by default", job, ""},
			{"one in job mode when asked", job + "tests: {enabled: true}", "/readyz"},
			{"none when disabled", "tests: {enabled: false}", ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := render(t, renderOptions{values: c.values})
				pod, ok := r.find("Pod", fullname+"-test")
				switch {
				case c.url == "" && ok:
					t.Fatalf("a test Pod is rendered")
				case c.url == "":
					if strings.Contains(r.notes, "helm test") {
						t.Errorf("the notes offer helm test without a test Pod:\n%s", r.notes)
					}
					return
				case !ok:
					t.Fatalf("no test Pod")
				}
				args := container(t, pod.obj.(*corev1.Pod).Spec.Containers, "probe").Args
				if !containsSeq(args, "--url", "http://"+fullname+":80"+c.url) {
					t.Errorf("args %v, want --url http://%s:80%s", args, fullname, c.url)
				}
			})
		}
	})

	t.Run("the notes name the records' store and speak of the demo's variables only for the demo", func(t *testing.T) {
		r := render(t, renderOptions{})
		if want := "get configmap " + fullname + "-migration-records -o jsonpath='{.data}'"; !strings.Contains(r.notes, want) {
			t.Errorf("notes lack %q:\n%s", want, r.notes)
		}
		if !strings.Contains(r.notes, "SCHEMA_ACCEPT_DATA_LOSS") {
			t.Errorf("the demo's notes do not name SCHEMA_ACCEPT_DATA_LOSS:\n%s", r.notes)
		}
		own := render(t, renderOptions{values: "image: {repository: registry.example.com/shop, tag: '1.0'}\ncommand: [/shop]\nmigration: {args: [migrate]}"})
		if strings.Contains(own.notes, "SCHEMA_ACCEPT_DATA_LOSS") {
			t.Errorf("the notes of another app name the demo's SCHEMA_ACCEPT_DATA_LOSS:\n%s", own.notes)
		}
	})
}

// Behaviour 9: chart-testing values files exist for the default, job mode and gate command mode, and
// each renders on install and upgrade.
func TestTheChartTestingValuesFilesRender(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range files {
		have[filepath.Base(f)] = true
	}
	for _, want := range []string{"default-values.yaml", "job-mode-values.yaml", "gate-command-values.yaml"} {
		if !have[want] {
			t.Errorf("ci/%s is missing (have %v)", want, have)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, upgrade := range []bool{false, true} {
			r, err := renderValues(renderOptions{values: string(b), upgrade: upgrade})
			if err != nil {
				t.Errorf("%s (upgrade=%v): %v", filepath.Base(f), upgrade, err)
				continue
			}
			if _, ok := r.find("Pod", fullname+"-test"); !ok {
				t.Errorf("%s: no helm test Pod for ct install", filepath.Base(f))
			}
		}
	}
	job := render(t, renderOptions{values: readChartFile(t, "ci/job-mode-values.yaml")}).job(t)
	if !strings.HasPrefix(job.Name, fullname+"-migrate-") {
		t.Errorf("ci/job-mode-values.yaml does not select job mode: %s", job.Name)
	}
	d := render(t, renderOptions{values: readChartFile(t, "ci/gate-command-values.yaml")}).deployment(t)
	if w := container(t, d.Spec.Template.Spec.InitContainers, "wait-for-migration"); w.Image != "ghcr.io/premigrate/demo:0.3.0" {
		t.Errorf("ci/gate-command-values.yaml does not select gate command mode: %s", w.Image)
	}
}

// Behaviour 10: the README explains the design and carries the helm-docs values table.
func TestTheReadmeExplainsTheDesignAndListsEveryValue(t *testing.T) {
	readme := readChartFile(t, "README.md")
	tmpl := readChartFile(t, "README.md.gotmpl")
	for _, want := range []string{`{{ template "chart.valuesSection" . }}`, `{{ template "chart.header" . }}`} {
		if !strings.Contains(tmpl, want) {
			t.Errorf("README.md.gotmpl lacks %s", want)
		}
	}
	for _, want := range []string{
		"before-hook-creation",
		"pre-install",
		"deadlock",
		"ttlSecondsAfterFinished",
		"PreSync",
		"Sync",
		"-migrations",
		"| Key | Type | Default | Description |",
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not mention %q", want)
		}
	}
	// The hand-written part of the template and the README agree (the table is generated).
	intro := strings.SplitN(tmpl, "{{ template \"chart.valuesSection\" . }}", 2)[0]
	for _, line := range strings.Split(intro, "\n") {
		if strings.HasPrefix(line, "## ") && !strings.Contains(readme, line) {
			t.Errorf("README.md lacks the section %q of README.md.gotmpl", line)
		}
	}
	documented, _ := documentedPaths(t)
	for _, p := range documented {
		row := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(p) + ` \| [a-z]+( or [a-z]+)* \| `)
		if !row.MatchString(readme) {
			t.Errorf("README.md values table has no row for %s", p)
		}
	}
}
