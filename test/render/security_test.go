package render

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// modeValues are the value sets that together render every pod template of the chart.
var modeValues = map[string]string{
	"hook install":        "",
	"hook external db":    externalDB,
	"job":                 "migration: {mode: job}\npostgresql: {auth: {password: pw}}",
	"argocd":              argoValues,
	"gate command":        "gate: {mode: command}",
	"gate none":           "gate: {mode: none}",
	"migration disabled":  "migration: {enabled: false}",
	"no persistence":      "postgresql: {persistence: {enabled: false}}",
	"own migration image": "migration: {image: {repository: registry.local/migrator, tag: \"1\"}}",
}

// Behaviour 6: every pod passes the restricted Pod Security Standard by default.
func TestEveryPodPassesTheRestrictedPodSecurityStandard(t *testing.T) {
	seen := map[string]bool{}
	for mode, values := range modeValues {
		for _, upgrade := range []bool{false, true} {
			r := render(t, renderOptions{values: values, upgrade: upgrade})
			for name, pod := range r.podTemplates() {
				seen[pod.Spec.Containers[0].Name] = true
				for _, problem := range restrictedProblems(pod.Spec) {
					t.Errorf("%s (upgrade=%v) %s: %s", mode, upgrade, name, problem)
				}
			}
		}
	}
	for _, c := range []string{"app", "migrate", "postgresql", "probe"} {
		if !seen[c] {
			t.Errorf("no pod with container %q was checked", c)
		}
	}
	// The check itself notices a weakened pod.
	weak := render(t, renderOptions{values: "securityContext: {allowPrivilegeEscalation: true}\npodSecurityContext: {runAsUser: 0}"})
	if len(restrictedProblems(weak.deployment(t).Spec.Template.Spec)) == 0 {
		t.Error("a pod with privilege escalation and uid 0 passed the check")
	}
}

// restrictedProblems lists what keeps a pod spec from the restricted Pod Security Standard (and from a
// read-only root filesystem, which this chart also promises).
func restrictedProblems(spec corev1.PodSpec) []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		add("host namespaces")
	}
	// The restricted profile's volume types (image volumes joined them with Kubernetes 1.35; the cluster
	// tests apply every pod in namespaces that enforce the profile).
	for _, v := range spec.Volumes {
		s := v.VolumeSource
		if s.ConfigMap == nil && s.CSI == nil && s.DownwardAPI == nil && s.EmptyDir == nil && s.Ephemeral == nil &&
			s.Image == nil && s.PersistentVolumeClaim == nil && s.Projected == nil && s.Secret == nil {
			add("volume %s has a type the restricted profile forbids", v.Name)
		}
	}
	for _, s := range psc.Sysctls {
		add("sysctl %s", s.Name)
	}
	if psc.SELinuxOptions != nil && (psc.SELinuxOptions.User != "" || psc.SELinuxOptions.Role != "") {
		add("pod SELinux user/role")
	}
	if psc.RunAsUser != nil && *psc.RunAsUser == 0 {
		add("pod runAsUser 0")
	}
	podSeccomp := psc.SeccompProfile != nil && (psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault || psc.SeccompProfile.Type == corev1.SeccompProfileTypeLocalhost)
	if !podSeccomp {
		add("pod seccompProfile is not RuntimeDefault or Localhost")
	}
	podNonRoot := psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range all {
		sc := c.SecurityContext
		if sc == nil {
			add("container %s has no securityContext", c.Name)
			continue
		}
		if sc.Privileged != nil && *sc.Privileged {
			add("container %s is privileged", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			add("container %s allows privilege escalation", c.Name)
		}
		if sc.Capabilities == nil || !hasCap(sc.Capabilities.Drop, "ALL") {
			add("container %s does not drop ALL capabilities", c.Name)
		} else {
			for _, a := range sc.Capabilities.Add {
				if a != "NET_BIND_SERVICE" {
					add("container %s adds capability %s", c.Name, a)
				}
			}
		}
		if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot || (sc.RunAsNonRoot == nil && !podNonRoot) {
			add("container %s may run as root", c.Name)
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			add("container %s runAsUser 0", c.Name)
		}
		if sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined {
			add("container %s seccomp Unconfined", c.Name)
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			add("container %s procMount", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			add("container %s has a writable root filesystem", c.Name)
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				add("container %s uses host port %d", c.Name, p.HostPort)
			}
		}
	}
	return out
}

func hasCap(caps []corev1.Capability, want corev1.Capability) bool {
	for _, c := range caps {
		if c == want {
			return true
		}
	}
	return false
}
