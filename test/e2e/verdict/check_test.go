package verdict

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pkg writes Go test files into a new folder and returns it.
func pkg(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	return dir
}

const scenarioSrc = `package e2e

import "testing"

func scenario(t *testing.T, name, helm string) *int { return new(int) }

func parallel(f func(*testing.T)) func(*testing.T) { return func(t *testing.T) { t.Parallel(); f(t) } }

func fluxUpgrades(t *testing.T) { scenario(t, "flux-upgrades", "flux") }

func TestMain(m *testing.M) {}

`

func TestEveryTestMustRecordAScenarioOrBeAListedHelper(t *testing.T) {
	for _, tc := range []struct {
		name    string
		test    string
		helpers []string
		problem string // "" when the check passes
	}{
		{
			name: "a test that calls scenario() passes",
			test: `func TestRollback(t *testing.T) { res := scenario(t, "rollback", ""); _ = res }`,
		},
		{
			name: "a test that calls scenario() in a subtest's closure passes",
			test: `func TestUpgrades(t *testing.T) {
	for _, h := range []string{"helm3", "helm4"} {
		t.Run(h, func(t *testing.T) { scenario(t, "upgrades-"+h, h) })
	}
}`,
		},
		{
			name: "a test that runs a function calling scenario() as a subtest passes",
			test: `func TestFlux(t *testing.T) { t.Run("upgrades", parallel(fluxUpgrades)) }`,
		},
		{
			name:    "a listed helper test passes",
			test:    `func TestSmoke(t *testing.T) {}`,
			helpers: []string{"TestSmoke"},
		},
		{
			name:    "a test that calls scenario() nowhere fails, named",
			test:    `func TestTTLFailed(t *testing.T) { t.Log("no scenario") }`,
			problem: "TestTTLFailed records no scenario",
		},
		{
			name:    "a method named like a recording function does not count",
			test:    "func TestTTLFailed(t *testing.T) {\n\tr := struct{ fluxUpgrades func() }{fluxUpgrades: func() {}}\n\tr.fluxUpgrades()\n}",
			problem: "TestTTLFailed records no scenario",
		},
		{
			name:    "a listed helper that records a scenario fails",
			test:    `func TestRollback(t *testing.T) { scenario(t, "rollback", "") }`,
			helpers: []string{"TestRollback"},
			problem: "TestRollback is listed as a helper test but records a scenario",
		},
		{
			name:    "a listed helper that is no test fails",
			test:    `func TestRollback(t *testing.T) { scenario(t, "rollback", "") }`,
			helpers: []string{"TestGone"},
			problem: "TestGone is listed as a helper test but is no test of the package",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := pkg(t, map[string]string{
				"scenarios_test.go": scenarioSrc,
				"one_test.go":       "package e2e\n\nimport \"testing\"\n\n" + tc.test + "\n",
				"helpers.go":        "package e2e\n\nfunc TestNotInATestFile(t *testing.T) {}\n",
			})
			err := CheckTests(dir, tc.helpers)
			if tc.problem == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.problem)
		})
	}
}

func TestTheCheckFailsOnAFolderWithoutTestFilesOrWithAFileThatDoesNotParse(t *testing.T) {
	assert.ErrorContains(t, CheckTests(t.TempDir(), nil), "no test files in")
	assert.ErrorContains(t, CheckTests(pkg(t, map[string]string{"bad_test.go": "package e2e\n\nfunc {"}), nil), "bad_test.go")
}
