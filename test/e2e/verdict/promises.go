package verdict

import (
	"fmt"
	"slices"
	"strings"
)

// PromiseFiles are the file-name prefixes of test/e2e and the promise (framework.Promises) each file's
// scenarios prove.
var PromiseFiles = map[string]string{
	"before_": "Before", "database_": "ThisDatabase", "once_": "Once", "forward_": "Forward",
	"failures_": "NeverSkipped", "paths_": "EveryPath", "gitops_": "GitOps", "adoption_": "Adoption",
	"privilege_": "LeastPrivilege", "contract_": "Contract",
}

// CheckPromises returns an error naming every scenario declared in a test file of dir (Declarations) whose name
// does not start with the prefix of the promise it proves: files maps a file-name prefix to the promise's name
// in the framework package (before_ -> Before); a file with none of the prefixes (the harness) declares no
// scenario. So the files stay grouped by the promise their scenarios prove, as the report is.
func CheckPromises(dir string, files map[string]string) error {
	decls, err := Declarations(dir)
	if err != nil {
		return err
	}
	var problems []string
	for _, d := range decls {
		want := ""
		for prefix, promise := range files {
			if strings.HasPrefix(d.File, prefix) {
				want = promise
			}
		}
		switch {
		case want == "":
			problems = append(problems, fmt.Sprintf("%s: scenario %q (%s) is declared in a file of no promise: put it in a file named for its promise", d.File, d.ID, d.Promise))
		case d.Promise != want:
			problems = append(problems, fmt.Sprintf("%s: scenario %q proves %s, but the file's name says %s", d.File, d.ID, d.Promise, want))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("every scenario is declared in a file named for the promise it proves:\n\t%s", strings.Join(problems, "\n\t"))
	}
	return nil
}
