package render

import (
	"strings"
	"testing"
)

const argoValues = `
migration: {mode: argocd}
postgresql: {auth: {password: s3cret}}
`

// Behaviour 3: migration.mode job and argocd, and migration.enabled=false.
func TestTheJobAndArgoCDModesAndADisabledMigration(t *testing.T) {
	t.Run("job mode renders only plain objects and a Job named by its spec", func(t *testing.T) {
		for _, upgrade := range []bool{false, true} {
			r := render(t, renderOptions{values: "migration: {mode: job}\npostgresql: {auth: {password: pw}}", upgrade: upgrade})
			job := r.job(t)
			if !isPlainJobName(fullname, job.Name) {
				t.Errorf("upgrade=%v: job name %q", upgrade, job.Name)
			}
			assertNoHookAnnotations(t, r)
			// the ServiceAccount keeps one name (a cloud IAM binding names it); the Role and RoleBinding carry the
			// Job's, so that they live as long as it does
			for kind, name := range map[string]string{"ServiceAccount": fullname + "-migrate", "Role": job.Name, "RoleBinding": job.Name} {
				if _, ok := r.find(kind, name); !ok {
					t.Errorf("no %s %s", kind, name)
				}
			}
			if _, ok := r.find("ConfigMap", fullname+"-migrations"); !ok {
				t.Error("no records ConfigMap")
			}
		}
	})

	t.Run("argocd mode uses a Sync hook and sync waves", func(t *testing.T) {
		r := render(t, renderOptions{values: argoValues})
		job := r.job(t)
		if job.Name != fullname+"-migrate" {
			t.Errorf("job name %q", job.Name)
		}
		assertAnnotations(t, job.Annotations, map[string]string{
			"argocd.argoproj.io/hook":               "Sync",
			"argocd.argoproj.io/hook-delete-policy": "BeforeHookCreation",
			"argocd.argoproj.io/sync-wave":          "0",
		})
		waves := map[string]string{
			"Secret/" + fullname + "-postgresql":           "-1",
			"StatefulSet/" + fullname + "-postgresql":      "-1",
			"Service/" + fullname + "-postgresql":          "-1",
			"Service/" + fullname + "-postgresql-headless": "-1",
			"ConfigMap/" + fullname + "-migrations":        "-1",
			"ServiceAccount/" + fullname + "-migrate":      "-1",
			"Role/" + fullname + "-migrate":                "-1",
			"RoleBinding/" + fullname + "-migrate":         "-1",
			"Role/" + fullname + "-gate":                   "-1",
			"RoleBinding/" + fullname + "-gate":            "-1",
			"ServiceAccount/" + fullname:                   "-1",
			"Job/" + fullname + "-migrate":                 "0",
			"Deployment/" + fullname:                       "1",
			"Service/" + fullname:                          "1",
			"PodDisruptionBudget/" + fullname:              "1",
		}
		for _, o := range r.objects {
			key := o.kind + "/" + o.name()
			a := o.meta.GetAnnotations()
			for k := range a {
				if strings.HasPrefix(k, "helm.sh/hook") && o.kind != "Pod" {
					t.Errorf("%s has Helm hook annotation %s in argocd mode", key, k)
				}
			}
			if o.kind == "Pod" {
				if a["argocd.argoproj.io/hook"] != "Skip" {
					t.Errorf("test pod is not skipped by Argo CD: %v", a)
				}
				continue
			}
			want, ok := waves[key]
			if !ok {
				t.Errorf("unexpected object %s in argocd mode", key)
				continue
			}
			if a["argocd.argoproj.io/sync-wave"] != want {
				t.Errorf("%s sync-wave %q, want %q", key, a["argocd.argoproj.io/sync-wave"], want)
			}
			delete(waves, key)
		}
		for key := range waves {
			t.Errorf("argocd mode did not render %s", key)
		}
	})

	t.Run("argocd mode maps the delete policy to Argo CD's spelling", func(t *testing.T) {
		job := render(t, renderOptions{values: argoValues + "\n" + `migration: {mode: argocd, hookDeletePolicy: "hook-succeeded,before-hook-creation"}`}).job(t)
		if got := job.Annotations["argocd.argoproj.io/hook-delete-policy"]; got != "HookSucceeded,BeforeHookCreation" {
			t.Errorf("delete policy %q", got)
		}
	})

	t.Run("hook and job modes render no Argo CD annotations", func(t *testing.T) {
		for _, values := range []string{"", "migration: {mode: job}\npostgresql: {auth: {password: pw}}"} {
			for _, o := range render(t, renderOptions{values: values}).objects {
				for k := range o.meta.GetAnnotations() {
					if strings.HasPrefix(k, "argocd.argoproj.io/") {
						t.Errorf("values %q: %s/%s has %s", values, o.kind, o.name(), k)
					}
				}
			}
		}
	})

	t.Run("a disabled migration renders no Job, no support objects and no gate", func(t *testing.T) {
		for _, mode := range []string{"hook", "job", "argocd"} {
			values := "migration: {enabled: false, mode: " + mode + "}\npostgresql: {auth: {password: pw}}"
			r := render(t, renderOptions{values: values})
			if jobs := r.ofKind("Job"); len(jobs) != 0 {
				t.Errorf("mode %s: Jobs rendered: %s", mode, r.summary())
			}
			for _, o := range r.objects {
				if strings.Contains(o.name(), "-migrate") || strings.HasSuffix(o.name(), "-gate") {
					t.Errorf("mode %s: %s/%s rendered", mode, o.kind, o.name())
				}
			}
			pod := r.deployment(t).Spec.Template
			if len(pod.Spec.InitContainers) != 0 {
				t.Errorf("mode %s: init containers %v", mode, pod.Spec.InitContainers)
			}
			if _, ok := pod.Annotations["premigrate.io/identity"]; ok {
				t.Errorf("mode %s: identity annotation without a migration", mode)
			}
		}
	})
}

// assertNoHookAnnotations fails on any Helm or Argo CD hook annotation outside the helm test Pod.
func assertNoHookAnnotations(t *testing.T, r *result) {
	t.Helper()
	for _, o := range r.objects {
		if o.kind == "Pod" {
			continue
		}
		for k := range o.meta.GetAnnotations() {
			if strings.HasPrefix(k, "helm.sh/hook") || strings.HasPrefix(k, "argocd.argoproj.io/") {
				t.Errorf("%s/%s has %s", o.kind, o.name(), k)
			}
		}
	}
}
