package verdict

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var promiseFiles = map[string]string{"before_": "Before", "once_": "Once"}

func TestEveryScenarioIsDeclaredInTheFileOfItsPromise(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		problem string // "" when the check passes
	}{
		{
			name: "declarations in the files of their promises pass",
			files: map[string]string{
				"before_upgrades_test.go": `package e2e
var up = scenarios.DeclareEach(framework.Before, "upgrades", framework.In(framework.CI, "helm3"), framework.In(framework.Matrix, "helm4"))`,
				"once_test.go": `package e2e
var c = scenarios.Declare(framework.Once, framework.Matrix, "concurrent-migrations")`,
				"main_test.go": `package e2e
func TestMain(m *testing.M) {}`,
			},
		},
		{
			name: "a declaration in another promise's file fails naming both",
			files: map[string]string{"before_test.go": `package e2e
var c = scenarios.Declare(framework.Once, framework.Matrix, "concurrent-migrations")`},
			problem: `before_test.go: scenario "concurrent-migrations" proves Once, but the file's name says Before`,
		},
		{
			name: "a declaration in a harness file fails",
			files: map[string]string{"report_test.go": `package e2e
var c = scenarios.Declare(framework.Before, framework.CI, "rollback")`},
			problem: `report_test.go: scenario "rollback" (Before) is declared in a file of no promise`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPromises(pkg(t, tc.files), promiseFiles)
			if tc.problem == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.problem)
		})
	}
}

func TestTheClusterTestsFilesAreGroupedByThePromiseTheyProve(t *testing.T) {
	// the test binary runs in test/e2e/verdict: the cluster tests are one folder up
	assert.NoError(t, CheckPromises("..", PromiseFiles))
}
