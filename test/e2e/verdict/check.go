package verdict

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ScenarioFunc is the function of the e2e package that records a scenario in the report.
const ScenarioFunc = "scenario"

// CheckTests parses the *_test.go files in dir and returns an error naming every top-level test (TestMain
// left out) that records no scenario and is not in helpers. A test records a scenario when its body calls
// scenario(), in a closure or a subtest too, or uses a function of the package that does (as TestFluxRunsTheChartWithItsDefaults runs its subtests). A helper that is no test, or that
// records a scenario after all, is an error too: the list stays true.
func CheckTests(dir string, helpers []string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("no test files in %s", dir)
	}
	fset := token.NewFileSet()
	funcs := map[string]*ast.FuncDecl{}
	var tests []string
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Body == nil {
				continue
			}
			funcs[fd.Name.Name] = fd
			if isTest(fd) {
				tests = append(tests, fd.Name.Name)
			}
		}
	}
	records := recordingFuncs(funcs)

	var problems []string
	for _, name := range tests {
		helper := slices.Contains(helpers, name)
		switch {
		case !records[name] && !helper:
			problems = append(problems, fmt.Sprintf("%s records no scenario: it calls %s() neither itself nor through a function of the package, and is not a listed helper test",
				name, ScenarioFunc))
		case records[name] && helper:
			problems = append(problems, fmt.Sprintf("%s is listed as a helper test but records a scenario: take it off the list", name))
		}
	}
	for _, name := range helpers {
		if !slices.Contains(tests, name) {
			problems = append(problems, fmt.Sprintf("%s is listed as a helper test but is no test of the package", name))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("every test must record a scenario or be a listed helper test:\n\t%s", strings.Join(problems, "\n\t"))
	}
	return nil
}

// isTest says whether go test runs fd as a test the report must account for.
func isTest(fd *ast.FuncDecl) bool {
	name := fd.Name.Name
	if !strings.HasPrefix(name, "Test") || name == "TestMain" {
		return false
	}
	if r, _ := utf8.DecodeRuneInString(name[len("Test"):]); unicode.IsLower(r) {
		return false
	}
	params := fd.Type.Params.List
	if len(params) != 1 || len(params[0].Names) > 1 {
		return false
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}

// recordingFuncs returns the top-level functions that call scenario(), directly or through the top-level
// functions they use (call, or pass on as a value).
func recordingFuncs(funcs map[string]*ast.FuncDecl) map[string]bool {
	uses := map[string]map[string]bool{}
	for name, fd := range funcs {
		used := map[string]bool{}
		var visit func(ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			// a field's or a method's name is never a top-level function: in x.f only x is looked at, in
			// a struct type only the fields' types, in a struct literal's Key: Value only the value
			case *ast.SelectorExpr:
				ast.Inspect(n.X, visit)
				return false
			case *ast.Field:
				ast.Inspect(n.Type, visit)
				return false
			case *ast.KeyValueExpr:
				if _, ok := n.Key.(*ast.Ident); ok {
					ast.Inspect(n.Value, visit)
					return false
				}
			case *ast.Ident:
				if funcs[n.Name] != nil || n.Name == ScenarioFunc {
					used[n.Name] = true
				}
			}
			return true
		}
		ast.Inspect(fd.Body, visit)
		uses[name] = used
	}
	records := map[string]bool{ScenarioFunc: true}
	for changed := true; changed; {
		changed = false
		for name, used := range uses {
			if records[name] {
				continue
			}
			for u := range used {
				if records[u] {
					records[name], changed = true, true
					break
				}
			}
		}
	}
	return records
}
