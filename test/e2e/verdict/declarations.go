package verdict

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Declaration is one scenario as its test file declares it: read from the source, so that the tiers can be
// checked without a cluster (CheckTiers) and a result can name the file of the scenario that judged it.
type Declaration struct {
	ID      string
	Promise string // the promise's name in the framework package: Before, ThisDatabase, ...
	Tier    string // the tier's name in the framework package: CI or Matrix
	File    string // the test file's base name
}

// Declarations parses the *_test.go files in dir and returns every scenario they declare, sorted by ID. A
// declaration is a call of Declare(framework.<Promise>, framework.<Tier>, "id") or of
// DeclareEach(framework.<Promise>, "prefix", framework.In(framework.<Tier>, "variant"), ...) (the ID
// prefix-variant). Anything else in those places (a variable, a function's result) is an error naming where:
// the tiers are code, and they must be readable from it.
func Declarations(dir string) ([]Declaration, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no test files in %s", dir)
	}
	fset := token.NewFileSet()
	var out []Declaration
	var problems []string
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		file := filepath.Base(p)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (fn.Sel.Name != "Declare" && fn.Sel.Name != "DeclareEach") {
				return true
			}
			ds, err := declared(fn.Sel.Name, call.Args)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", fset.Position(call.Pos()), err))
				return true
			}
			for _, d := range ds {
				d.File = file
				out = append(out, d)
			}
			return false
		})
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, fmt.Errorf("every scenario is declared with literal promises, tiers and IDs:\n\t%s", strings.Join(problems, "\n\t"))
	}
	slices.SortFunc(out, func(a, b Declaration) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// declared reads the scenarios of one Declare or DeclareEach call.
func declared(fn string, args []ast.Expr) ([]Declaration, error) {
	if len(args) < 3 {
		return nil, fmt.Errorf("%s with %d arguments, want at least 3", fn, len(args))
	}
	promise, ok := frameworkName(args[0])
	if !ok {
		return nil, fmt.Errorf("a scenario declared with a promise that is not framework.<Promise>")
	}
	if fn == "Declare" {
		tier, ok := frameworkName(args[1])
		if !ok {
			return nil, fmt.Errorf("a scenario declared with a tier that is not framework.<Tier>")
		}
		id, ok := stringLit(args[2])
		if !ok {
			return nil, fmt.Errorf("a scenario declared with an ID that is not a string literal")
		}
		return []Declaration{{ID: id, Promise: promise, Tier: tier}}, nil
	}
	prefix, ok := stringLit(args[1])
	if !ok {
		return nil, fmt.Errorf("scenarios declared with a prefix that is not a string literal")
	}
	var out []Declaration
	for _, a := range args[2:] {
		in, ok := a.(*ast.CallExpr)
		if !ok || len(in.Args) != 2 {
			return nil, fmt.Errorf("a variant of %q that is not framework.In(framework.<Tier>, \"name\")", prefix)
		}
		tier, okTier := frameworkName(in.Args[0])
		name, okName := stringLit(in.Args[1])
		if fn, isSel := in.Fun.(*ast.SelectorExpr); !isSel || fn.Sel.Name != "In" || !okTier || !okName {
			return nil, fmt.Errorf("a variant of %q that is not framework.In(framework.<Tier>, \"name\")", prefix)
		}
		out = append(out, Declaration{ID: prefix + "-" + name, Promise: promise, Tier: tier})
	}
	return out, nil
}

// frameworkName is Name of framework.Name.
func frameworkName(e ast.Expr) (string, bool) {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "framework" {
		return "", false
	}
	return sel.Sel.Name, true
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
