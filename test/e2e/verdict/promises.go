package verdict

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
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

// CheckPromises parses the *_test.go files in dir and returns an error naming every scenario declared in a file
// whose name does not start with the prefix of the promise it proves: files maps a file-name prefix to the
// promise's name in the framework package (before_ -> Before). A declaration is a call of Declare or
// DeclareEach whose first argument is framework.<Promise>; a file with none of the prefixes (the harness)
// declares no scenario. So the files stay grouped by the promise their scenarios prove, as the report is.
func CheckPromises(dir string, files map[string]string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("no test files in %s", dir)
	}
	fset := token.NewFileSet()
	var problems []string
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		name := filepath.Base(p)
		want := ""
		for prefix, promise := range files {
			if strings.HasPrefix(name, prefix) {
				want = promise
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			fn, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (fn.Sel.Name != "Declare" && fn.Sel.Name != "DeclareEach") {
				return true
			}
			arg, ok := call.Args[0].(*ast.SelectorExpr)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: a scenario declared with a promise that is not framework.<Promise>", fset.Position(call.Pos())))
				return true
			}
			id := "?"
			if lit, ok := call.Args[1].(*ast.BasicLit); ok {
				id = strings.Trim(lit.Value, "\"`")
			}
			switch got := arg.Sel.Name; {
			case want == "":
				problems = append(problems, fmt.Sprintf("%s: scenario %q (%s) is declared in a file of no promise: put it in a file named for its promise", name, id, got))
			case got != want:
				problems = append(problems, fmt.Sprintf("%s: scenario %q proves %s, but the file's name says %s", name, id, got, want))
			}
			return true
		})
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("every scenario is declared in a file named for the promise it proves:\n\t%s", strings.Join(problems, "\n\t"))
	}
	return nil
}
