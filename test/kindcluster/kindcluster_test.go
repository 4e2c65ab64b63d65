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
			got := Config("premigrate", tc.cgroupV1)
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
