package kindcluster

import (
	"strings"
	"testing"
)

func TestConfigAddsCgroupV1SettingsOnlyWhenTheHostNeedsThemAndAlwaysTheRegistryHostsDir(t *testing.T) {
	cases := []struct {
		name     string
		cgroupV1 bool
		want     []string
		wantNot  []string
	}{
		{name: "cgroup v1 host", cgroupV1: true, want: []string{"failCgroupV1: false", "SystemVerification", "name: premigrate", `config_path = "/etc/containerd/certs.d"`}},
		{name: "cgroup v2 host", cgroupV1: false, want: []string{"name: premigrate", `config_path = "/etc/containerd/certs.d"`}, wantNot: []string{"failCgroupV1", "SystemVerification"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Config("premigrate", tc.cgroupV1, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("config lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("config has %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestConfigTurnsTheFeatureGatesItIsGivenOnOrOffAndRefusesAnythingElse(t *testing.T) {
	got, err := Config("premigrate-oldest", true, []string{"ImageVolume=true", "Other=false"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "featureGates:\n  ImageVolume: true\n  Other: false\n") {
		t.Errorf("config lacks the feature gates:\n%s", got)
	}
	for _, bad := range []string{"ImageVolume", "ImageVolume=yes", "=true", "Image Volume=true"} {
		if _, err := Config("premigrate", false, []string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("feature gate %q: error %v, want one that names it", bad, err)
		}
	}
}

func TestTeardownDeletesOnlyAClusterItsRunCreatedAndNotOneAskedToBeKept(t *testing.T) {
	cases := []struct {
		name        string
		created     bool
		keep        bool
		wantDeleted bool
	}{
		{name: "created by this run", created: true, wantDeleted: true},
		{name: "created by this run, KEEP_CLUSTER=1", created: true, keep: true},
		{name: "reused (make demo made it)"},
		{name: "reused, KEEP_CLUSTER=1", keep: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var deleted []string
			prev := deleteByName
			deleteByName = func(name string) error { deleted = append(deleted, name); return nil }
			t.Cleanup(func() { deleteByName = prev })
			c := &Cluster{Name: "premigrate", Kubeconfig: "/tmp/kubeconfig", Created: tc.created}
			said, err := c.Teardown(tc.keep)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(deleted) == 1 && deleted[0] == "premigrate"; got != tc.wantDeleted {
				t.Errorf("deleted %v, want deleted=%v (said %q)", deleted, tc.wantDeleted, said)
			}
		})
	}
}
