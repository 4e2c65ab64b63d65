package kindcluster

import (
	"strings"
	"testing"
)

func TestConfigAddsCgroupV1SettingsOnlyWhenTheHostNeedsThem(t *testing.T) {
	cases := []struct {
		name     string
		cgroupV1 bool
		want     []string
		wantNot  []string
	}{
		{name: "cgroup v1 host", cgroupV1: true, want: []string{"failCgroupV1: false", "SystemVerification", "name: premigrate"}},
		{name: "cgroup v2 host", cgroupV1: false, want: []string{"name: premigrate"}, wantNot: []string{"failCgroupV1", "SystemVerification"}},
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
