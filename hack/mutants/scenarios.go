package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The cluster scenarios are declared in test/e2e (framework.Scenarios: Declare and DeclareEach, with literal
// promises, tiers and IDs, which test/e2e/verdict checks). The mutants name a scenario by its ID; a result goes
// stale when the file that declares its scenario, the cluster tests' harness or test/framework changed after it
// ran (staleClusterResults).

// clusterHarness are the files every cluster scenario runs through besides its own test file.
var clusterHarness = []string{
	"test/framework", "test/e2e/main_test.go", "test/e2e/scenarios_test.go", "test/e2e/share_test.go",
	"test/e2e/report_test.go", "test/e2e/knobs_test.go", "test/e2e/schedule", "test/e2e/verdict",
}

var (
	declareRE     = regexp.MustCompile(`\bDeclare\(framework\.\w+, framework\.\w+, "([^"]+)"\)`)
	declareEachRE = regexp.MustCompile(`\bDeclareEach\(framework\.\w+, "([^"]+)",((?:\s*framework\.In\(framework\.\w+, "[^"]+"\),?)+)\s*\)`)
	variantRE     = regexp.MustCompile(`framework\.In\(framework\.\w+, "([^"]+)"\)`)
	scenarioIDRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

// scenarioFiles maps every scenario ID declared in root's test/e2e to the file that declares it, relative to
// root.
func scenarioFiles(root string) (map[string]string, error) {
	paths, err := filepath.Glob(filepath.Join(root, "test", "e2e", "*_test.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading the cluster tests: %w", err)
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		for _, m := range declareRE.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = rel
		}
		for _, m := range declareEachRE.FindAllStringSubmatch(string(b), -1) {
			for _, v := range variantRE.FindAllStringSubmatch(m[2], -1) {
				out[m[1]+"-"+v[1]] = rel
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenario is declared in %s", filepath.Join(root, "test", "e2e"))
	}
	return out, nil
}
