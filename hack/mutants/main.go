// Command mutants breaks the chart, the library and the gate on purpose, one mutant at a time, and runs the
// test that must catch each one (the table is hack/mutants/mutants.yaml, documented in MUTANTS.md).
//
//	go run ./hack/mutants [--level unit|cluster] [--only REGEXP] [--jobs N] [--out FILE]
//
// A mutant is caught only when its test fails on an assertion: a build failure, a panic or a timeout is an
// error of the run, never a catch. Before any mutant runs, every chosen test must pass on the unmutated tree,
// and every edit's text must occur exactly once in its file (a refactor that moves or duplicates it strands
// the mutant, and the run fails until the table is fixed).
//
// --level unit (part of `make test`) runs each mutant's unit or render test. --level cluster runs each
// mutant's cluster scenarios (its unit test is not consulted) on the kind cluster of `make test-e2e`, with
// images built from the mutated tree when the mutant edits Go code; every chosen scenario first runs once on
// the unmutated tree and must pass there.
//
// The mutants run in a copy of the working tree under $PREMIGRATE_CACHE/mutants (the same path every run, so
// Go's build cache serves what a mutant did not change); the repository itself is never edited. One run at a
// time holds that copy: a second run with the same PREMIGRATE_CACHE stops at once, naming it.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"
)

// mutant is one entry of mutants.yaml.
type mutant struct {
	ID       string `json:"id"`
	Breaks   string `json:"breaks"`
	Edits    []edit `json:"edits"`
	Package  string `json:"package"`  // the unit or render test's package, e.g. ./test/render
	Test     string `json:"test"`     // its top-level test function
	Scenario string `json:"scenario"` // the ID of the cluster scenario that must catch it (test/e2e), in the CI tier
	// UnitOnly, instead of a scenario, says why no cluster scenario can catch the mutant (the protection it
	// breaks is unreachable on a real cluster, e.g. behind a server-side field selector)
	UnitOnly string `json:"unitOnly,omitempty"`
}

type edit struct {
	File string `json:"file"`
	From string `json:"from"`
	To   string `json:"to"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	level := fs.String("level", "unit", "unit (each mutant's unit or render test) or cluster (its cluster scenarios)")
	only := fs.String("only", "", "run only the mutants whose id matches this regexp")
	table := fs.String("table", "hack/mutants/mutants.yaml", "the mutant table")
	outFile := fs.String("out", "", "where to write the results as a Markdown table (default results/mutants-LEVEL.md)")
	markdown := fs.String("markdown", "", "also write the whole table, this run's unit results beside the committed cluster results, to this file (MUTANTS.md)")
	jobs := fs.Int("jobs", runtime.NumCPU(), "at the unit level, how many mutants run at once, each in its own copy of the tree (the cluster level runs one at a time)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *level != "unit" && *level != "cluster" {
		return fmt.Errorf("--level %q: want unit or cluster", *level)
	}
	if *jobs < 1 {
		return fmt.Errorf("--jobs %d: want at least 1", *jobs)
	}
	if *level == "cluster" {
		*jobs = 1 // the mutants share the cluster, and each result is saved as it comes
	}
	if *markdown != "" && (*level != "unit" || *only != "") {
		return errors.New("--markdown needs a whole run at the unit level (no --only)")
	}
	match, err := regexp.Compile(*only)
	if err != nil {
		return fmt.Errorf("--only: %w", err)
	}
	root, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("finding the repository root: %w", err)
	}
	all, err := readTable(filepath.Join(root, *table))
	if err != nil {
		return err
	}
	if err := checkEdits(root, all); err != nil {
		return err
	}
	var chosen []mutant
	for _, m := range all {
		if !match.MatchString(m.ID) {
			continue
		}
		if *level == "cluster" && m.UnitOnly != "" {
			_, _ = fmt.Fprintf(out, "mutants: %s has no cluster scenario (unit only: %s)\n", m.ID, m.UnitOnly)
			continue
		}
		chosen = append(chosen, m)
	}
	if len(chosen) == 0 {
		return fmt.Errorf("no mutant's id matches %q", *only)
	}
	if *level == "cluster" {
		if err := committed(root, chosen); err != nil {
			return err
		}
	}
	cache := os.Getenv("PREMIGRATE_CACHE")
	if cache == "" {
		return errors.New("PREMIGRATE_CACHE is not set: run through `make test-mutants` (or export it)")
	}
	logs := filepath.Join(cache, "logs", "mutants")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", logs, err)
	}
	tree := filepath.Join(cache, "mutants", "tree")
	unlock, err := lockTree(tree)
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	// the commit the copy is taken from: results name it even when HEAD moves during a long cluster run
	commit := headCommit()
	if err := copyTree(root, tree); err != nil {
		return err
	}
	r := &runner{out: out, tree: tree, root: root, logs: logs, level: *level, cache: cache}
	_, _ = fmt.Fprintf(out, "mutants: %d of %d at the %s level, in %s (logs: %s)\n", len(chosen), len(all), *level, tree, logs)
	baseline := r.baseline
	if *level == "cluster" {
		baseline = r.clusterBaseline
	}
	if *level == "cluster" {
		// the scenarios keep the cluster between mutants (KEEP_CLUSTER=1); the run deletes it at its end when it
		// created it, as make test-e2e does, and leaves one it found (make cluster, make demo)
		done, err := clusterCleanup(root, out)
		if err != nil {
			return err
		}
		defer done()
	}
	if err := baseline(chosen); err != nil {
		return err
	}
	results, err := r.all(chosen, *jobs, start, commit)
	if err != nil {
		return err
	}
	path := *outFile
	if path == "" {
		path = filepath.Join(root, "results", "mutants-"+*level+".md")
	}
	if err := writeResults(path, *level, results, time.Since(start)); err != nil {
		return err
	}
	if *markdown != "" {
		if err := writeMarkdown(root, *markdown, all, results); err != nil {
			return err
		}
	}
	var bad []string
	for _, res := range results {
		if res.outcome != caught {
			bad = append(bad, res.m.ID+" ("+res.outcome+")")
		}
	}
	_, _ = fmt.Fprintf(out, "mutants: %d of %d caught at the %s level in %s; results: %s\n", len(results)-len(bad), len(results), *level, time.Since(start).Round(time.Second), path)
	if len(bad) > 0 {
		return fmt.Errorf("not caught: %s (logs in %s)", strings.Join(bad, ", "), logs)
	}
	return nil
}

// all runs the chosen mutants, jobs at a time: the first on r's tree, each other in a copy of its own (a
// mutant's test compiles and runs mostly on one core, so two at once use the machine's two). Each line is
// printed as its mutant ends; the results keep the table's order.
func (r *runner) all(chosen []mutant, jobs int, start time.Time, commit string) ([]result, error) {
	runners := []*runner{r}
	for i := 1; i < min(jobs, len(chosen)); i++ {
		tree := fmt.Sprintf("%s-%d", r.tree, i)
		if err := copyTree(r.root, tree); err != nil {
			return nil, err
		}
		w := *r
		w.tree, w.binaries = tree, nil
		runners = append(runners, &w)
	}
	results := make([]result, len(chosen))
	next := make(chan int)
	var mu sync.Mutex
	var saveErr error
	var wg sync.WaitGroup
	done := 0
	for _, w := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res := w.one(chosen[i])
				mu.Lock()
				results[i] = res
				done++
				_, _ = fmt.Fprintf(r.out, "[%d/%d %s] %s: %s%s\n", done, len(chosen), time.Since(start).Round(time.Second), res.m.ID, strings.ToUpper(res.outcome), res.detailSuffix())
				if r.level == "cluster" && saveErr == nil {
					// saved one by one: a cluster run takes hours, and an interrupted one keeps what it judged
					saveErr = saveClusterResults(filepath.Join(r.root, clusterResultsFile), commit, []result{res})
				}
				mu.Unlock()
			}
		}()
	}
	for i := range chosen {
		next <- i
	}
	close(next)
	wg.Wait()
	return results, saveErr
}

func readTable(path string) ([]mutant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the mutant table: %w", err)
	}
	var ms []mutant
	if err := yaml.UnmarshalStrict(b, &ms); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	seen := map[string]bool{}
	idRE := regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	for _, m := range ms {
		switch {
		case !idRE.MatchString(m.ID):
			return nil, fmt.Errorf("%s: mutant id %q: want lower-case words joined by -", path, m.ID)
		case seen[m.ID]:
			return nil, fmt.Errorf("%s: mutant %s appears twice", path, m.ID)
		case m.Breaks == "" || len(m.Edits) == 0 || m.Package == "" || !strings.HasPrefix(m.Test, "Test") || (m.Scenario == "") == (m.UnitOnly == ""):
			return nil, fmt.Errorf("%s: mutant %s needs breaks, edits, package, test (a Test function) and either scenario or unitOnly (why no cluster scenario can catch it)", path, m.ID)
		case m.Scenario != "" && !scenarioIDRE.MatchString(m.Scenario):
			return nil, fmt.Errorf("%s: mutant %s: scenario %q is no scenario ID (test/e2e declares them: upgrades-helm4, ttl-failed, ...)", path, m.ID, m.Scenario)
		}
		seen[m.ID] = true
		for _, e := range m.Edits {
			if e.File == "" || e.From == "" || e.From == e.To {
				return nil, fmt.Errorf("%s: mutant %s: an edit needs a file and a from text that its to text changes", path, m.ID)
			}
		}
	}
	return ms, nil
}

// checkEdits refuses a table whose edits would not apply exactly once: a text that is gone (moved by a
// refactor) or that occurs more than once (the edit could break the wrong copy).
func checkEdits(root string, ms []mutant) error {
	var stranded []string
	for _, m := range ms {
		for _, e := range m.Edits {
			b, err := os.ReadFile(filepath.Join(root, e.File))
			if err != nil {
				stranded = append(stranded, fmt.Sprintf("%s: %v", m.ID, err))
				continue
			}
			if n := strings.Count(string(b), e.From); n != 1 {
				stranded = append(stranded, fmt.Sprintf("%s: its text occurs %d times in %s (want exactly 1): %q", m.ID, n, e.File, firstLine(e.From)))
			}
		}
	}
	if len(stranded) > 0 {
		return fmt.Errorf("stranded mutants, fix hack/mutants/mutants.yaml:\n  %s", strings.Join(stranded, "\n  "))
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// copyTree copies the files git knows of (tracked, and untracked ones not ignored) into dst, anew.
func copyTree(root, dst string) error {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	listing, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	if err := os.RemoveAll(dst); err != nil {
		return fmt.Errorf("removing the old copy %s: %w", dst, err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(listing), "\x00"), "\x00") {
		src := filepath.Join(root, f)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return fmt.Errorf("copying the tree: %w", err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("copying the tree: %w", err)
		}
		to := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return fmt.Errorf("copying the tree: %w", err)
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("copying the tree: %w", err)
		}
	}
	// the tools the cluster scenarios run
	if err := os.Symlink(filepath.Join(root, "bin"), filepath.Join(dst, "bin")); err != nil {
		return fmt.Errorf("linking bin into the copy: %w", err)
	}
	return nil
}

const (
	caught   = "caught"
	survived = "survived"
	errored  = "error"
)

type result struct {
	m       mutant
	outcome string // caught, survived or error
	by      string // the test or scenario that ran
	detail  string
	took    time.Duration
}

func (r result) detailSuffix() string {
	if r.detail == "" {
		return ""
	}
	return " (" + r.detail + ")"
}

type runner struct {
	out                     io.Writer
	tree, logs, level       string
	root                    string // the repository the tree was copied from: its git history (hack/images.sh reads it)
	cache                   string
	imagesBuiltForUnmutated bool
	binaries                map[string]string // package -> its test binary, built from the unmutated copy
}

// baseline runs every chosen test once on the unmutated copy: each must pass, or no mutant it should catch
// can be judged.
func (r *runner) baseline(ms []mutant) error {
	byPkg := map[string][]string{}
	for _, m := range ms {
		if !contains(byPkg[m.Package], m.Test) {
			byPkg[m.Package] = append(byPkg[m.Package], m.Test)
		}
	}
	pkgs := make([]string, 0, len(byPkg))
	for p := range byPkg {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		tests := byPkg[p]
		start := time.Now()
		rep, err := r.goTest(r.tree, "baseline-"+sanitize(p), p, "^("+strings.Join(tests, "|")+")$", 10*time.Minute)
		if err != nil {
			return err
		}
		for _, t := range tests {
			if rep.verdict(t) != "pass" {
				return fmt.Errorf("%s in %s does not pass on the unmutated tree (%s): no mutant it should catch can be judged (log: %s)",
					t, p, rep.verdict(t), rep.log)
			}
		}
		_, _ = fmt.Fprintf(r.out, "baseline: %d tests of %s pass on the unmutated tree (%s)\n", len(tests), p, time.Since(start).Round(time.Second))
	}
	return nil
}

// clusterBaseline runs every chosen mutant's cluster scenario once, together, on the unmutated tree: each must
// pass there, or a failure under a mutant says nothing about the mutant (a scenario broken by the machine, the
// cluster or the tree itself would count every mutant mapped to it as caught). The cluster tests enforce their
// verdict on the scenarios they are asked for (E2E_SCENARIOS): the run passes only when each ran once and passed.
func (r *runner) clusterBaseline(ms []mutant) error {
	var scenarios []string
	for _, m := range ms {
		if !contains(scenarios, m.Scenario) {
			scenarios = append(scenarios, m.Scenario)
		}
	}
	sort.Strings(scenarios)
	start := time.Now()
	_, _ = fmt.Fprintf(r.out, "baseline: %d cluster scenarios on the unmutated tree (log: %s)\n", len(scenarios),
		filepath.Join(r.logs, "baseline-cluster.json"))
	if err := r.unmutatedImages(); err != nil {
		return err
	}
	rep, err := r.e2e("baseline-cluster", r.cache, scenarios)
	if err != nil {
		return err
	}
	if bad := rep.notPassing(); len(bad) > 0 {
		return fmt.Errorf("on the unmutated tree %s: no mutant mapped to them can be judged (log: %s)", strings.Join(bad, "; "), rep.log)
	}
	_, _ = fmt.Fprintf(r.out, "baseline: %d cluster scenarios pass on the unmutated tree (%s)\n", len(scenarios), time.Since(start).Round(time.Second))
	return nil
}

// notPassing names each top-level test that did not pass (a test whose scenario this run did not ask for skips,
// and is not named), and says so when the run as a whole failed: the cluster tests' verdict failed the run when
// a scenario asked for did not run once and pass.
func (t *testReport) notPassing() []string {
	var bad []string
	for test, v := range t.results {
		if strings.Contains(test, "/") || v == "pass" || v == "skip" {
			continue
		}
		bad = append(bad, test+" did not pass ("+v+")")
	}
	sort.Strings(bad)
	if len(t.results) == 0 {
		bad = append(bad, "no test ran")
	}
	if t.exitErr != nil {
		bad = append(bad, "the cluster tests failed ("+t.exitErr.Error()+"): their verdict is the last line of the log")
	}
	return bad
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func sanitize(s string) string { return strings.Trim(unsafeChars.ReplaceAllString(s, "_"), "_") }

// one applies a mutant to the copy, runs its test and restores the copy.
func (r *runner) one(m mutant) result {
	start := time.Now()
	res := result{m: m}
	restore, err := apply(r.tree, m.Edits)
	defer func() {
		if err := restore(); err != nil {
			_, _ = fmt.Fprintf(r.out, "mutants: restoring the copy after %s: %v\n", m.ID, err)
		}
	}()
	if err != nil {
		res.outcome, res.detail = errored, err.Error()
		return res
	}
	var rep *testReport
	if r.level == "unit" {
		res.by = m.Test + " (" + m.Package + ")"
		if editsGo(m) {
			rep, err = r.goTest(r.tree, m.ID+"-unit", m.Package, "^"+m.Test+"$", 5*time.Minute)
		} else {
			rep, err = r.compiledTest(m.ID+"-unit", m.Package, "^"+m.Test+"$", 5*time.Minute)
		}
	} else {
		res.by = m.Scenario
		rep, err = r.cluster(m)
	}
	res.took = time.Since(start)
	if err != nil {
		res.outcome, res.detail = errored, err.Error()
		return res
	}
	res.outcome, res.detail = rep.judge()
	return res
}

// apply edits the copy; the returned function puts the files back.
func apply(tree string, edits []edit) (func() error, error) {
	saved := map[string][]byte{}
	restore := func() error {
		for f, b := range saved {
			if err := os.WriteFile(f, b, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range edits {
		path := filepath.Join(tree, e.File)
		b, err := os.ReadFile(path)
		if err != nil {
			return restore, err
		}
		if _, ok := saved[path]; !ok {
			saved[path] = b
		}
		if n := strings.Count(string(b), e.From); n != 1 {
			return restore, fmt.Errorf("the text occurs %d times in %s, want 1", n, e.File)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), e.From, e.To, 1)), 0o644); err != nil {
			return restore, err
		}
	}
	return restore, nil
}

// cluster runs the mutant's scenarios against the kind cluster, with images built from the mutated copy
// when it edits Go code (a chart-only mutant runs on the images of the unmutated tree).
func (r *runner) cluster(m mutant) (*testReport, error) {
	cache := r.cache
	goEdit := false
	for _, e := range m.Edits {
		goEdit = goEdit || strings.HasSuffix(e.File, ".go")
	}
	if goEdit {
		cache = filepath.Join(r.cache, "mutants", "cache-"+m.ID)
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return nil, err
		}
		_ = os.Symlink(filepath.Join(r.cache, "logs"), filepath.Join(cache, "logs"))
		if err := r.command(m.ID+"-images", cache, "hack/images.sh"); err != nil {
			return nil, err
		}
	} else if err := r.unmutatedImages(); err != nil {
		return nil, err
	}
	// a caught mutant fails its scenario: its namespaces go (kept, one mutant's after another's loaded the
	// cluster until a run of 29 mutants had 26 namespaces of finished mutants running and a load average of 77)
	env := []string{"KEEP_FAILED_NAMESPACES=0"}
	if m.Scenario == registryScenario {
		dist := filepath.Join(r.cache, "mutants", "release-"+m.ID)
		if err := r.commandEnv(m.ID+"-release", cache, []string{"RELEASE_POSTGRES=0", "RELEASE_DIST=" + dist}, "hack/release.sh"); err != nil {
			return nil, err
		}
		env = append(env, "PREMIGRATE_RELEASE_DIST="+dist)
	}
	return r.e2e(m.ID+"-cluster", cache, []string{m.Scenario}, env...)
}

// registryScenario installs the charts of `make release`'s layout from a registry (test/e2e): a mutant it
// judges gets a release built from the mutated copy, or the scenario would judge the unmutated charts.
const registryScenario = "release-from-registry"

// unmutatedImages builds the images of the unmutated tree once per run (chart-only mutants run on them).
func (r *runner) unmutatedImages() error {
	if r.imagesBuiltForUnmutated {
		return nil
	}
	if err := r.command("unmutated-images", r.cache, "hack/images.sh"); err != nil {
		return err
	}
	r.imagesBuiltForUnmutated = true
	return nil
}

// e2e runs the cluster scenarios named in the copy, on the images of cache, with env added: the cluster tests
// run those (E2E_SCENARIOS) and skip every other test before it takes any of the cluster.
func (r *runner) e2e(name, cache string, scenarios []string, env ...string) (*testReport, error) {
	node, err := r.output("hack/offline/kind/node-image.sh")
	if err != nil {
		return nil, err
	}
	// -parallel above the number of scenarios, as in make test-e2e: the scenarios' scheduler (E2E_CAPACITY) is
	// the limit. A lower -parallel deadlocks once the scenarios holding its slots wait for the scheduler while the
	// one holding the scheduler's capacity waits for a slot (a baseline of 17 scenarios hung at -parallel 4, a
	// full run of 67 at -parallel 64); test/e2e refuses less than twice its number of scenarios.
	cmd := exec.Command("go", "test", "-tags", "e2e", "-count=1", "-json", "-timeout", "40m", "-parallel", "256", "./test/e2e/")
	cmd.Dir = r.tree
	// PREMIGRATE_HISTORY: the copy has no .git, and the upgrade from the previous release takes its chart from history
	cmd.Env = append(append(os.Environ(), "PREMIGRATE_CACHE="+cache, "KEEP_CLUSTER=1", "KIND_NODE_IMAGE="+strings.TrimSpace(node),
		"PREMIGRATE_HISTORY="+r.root, "E2E_SCENARIOS="+strings.Join(scenarios, ",")), env...)
	return runGoTest(cmd, filepath.Join(r.logs, name+".json"))
}

func (r *runner) command(name, cache string, argv ...string) error {
	return r.commandEnv(name, cache, nil, argv...)
}

// commandEnv runs argv in the copy with env added, its output in the log name.
func (r *runner) commandEnv(name, cache string, env []string, argv ...string) error {
	log := filepath.Join(r.logs, name+".log")
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = r.tree, f, f
	// the copy has no .git: the previous release's images are built from the history of the repository
	cmd.Env = append(append(os.Environ(), "PREMIGRATE_CACHE="+cache, "PREMIGRATE_HISTORY="+r.root), env...)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w (log: %s)", strings.Join(argv, " "), err, log)
	}
	return nil
}

func (r *runner) output(argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stderr = r.tree, os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return string(b), nil
}

// editsGo is true when the mutant changes Go code (else only charts and data that the tests read at run time).
func editsGo(m mutant) bool {
	for _, e := range m.Edits {
		if strings.HasSuffix(e.File, ".go") {
			return true
		}
	}
	return false
}

// compiledTest runs a test of pkg from a test binary built once from the unmutated copy: a mutant that edits
// no Go code needs no build, and Go's own staleness checks cost seconds per run.
func (r *runner) compiledTest(name, pkg, runRE string, timeout time.Duration) (*testReport, error) {
	if r.binaries == nil {
		r.binaries = map[string]string{}
	}
	bin, ok := r.binaries[pkg]
	if !ok {
		bin = filepath.Join(r.tree, "..", "bin", filepath.Base(r.tree)+"-"+sanitize(pkg)+".test")
		build := exec.Command("go", "test", "-c", "-o", bin, pkg)
		build.Dir = r.tree
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the tests of %s: %w\n%s", pkg, err, out)
		}
		r.binaries[pkg] = bin
	}
	cmd := exec.Command("go", "tool", "test2json", "-t", "-p", pkg, bin, "-test.v=test2json", "-test.count=1",
		"-test.timeout", timeout.String(), "-test.run", runRE)
	cmd.Dir = filepath.Join(r.tree, pkg) // as go test runs it: in the package's folder
	return runGoTest(cmd, filepath.Join(r.logs, name+".json"))
}

func (r *runner) goTest(dir, name, pkg, runRE string, timeout time.Duration) (*testReport, error) {
	cmd := exec.Command("go", "test", "-count=1", "-json", "-timeout", timeout.String(), "-run", runRE, pkg)
	cmd.Dir = dir
	return runGoTest(cmd, filepath.Join(r.logs, name+".json"))
}

// testEvent is one line of `go test -json`.
type testEvent struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// testReport is what one `go test -json` run said.
type testReport struct {
	log       string
	results   map[string]string   // top-level or sub test -> pass, fail or skip
	output    map[string][]string // test -> its output lines
	buildFail bool
	timedOut  bool
	panicked  bool
	exitErr   error
}

func runGoTest(cmd *exec.Cmd, log string) (*testReport, error) {
	var stdout bytes.Buffer
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	cmd.Stdout = io.MultiWriter(&stdout, f)
	cmd.Stderr = f
	rep := &testReport{log: log, results: map[string]string{}, output: map[string][]string{}}
	rep.exitErr = cmd.Run()
	var exitErr *exec.ExitError
	if rep.exitErr != nil && !errors.As(rep.exitErr, &exitErr) {
		return nil, fmt.Errorf("running %s: %w", strings.Join(cmd.Args, " "), rep.exitErr)
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev testEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // a build error printed as plain text
		}
		switch {
		case ev.Action == "build-fail":
			rep.buildFail = true
		case ev.Action == "output":
			if strings.Contains(ev.Output, "panic: test timed out") {
				rep.timedOut = true
			} else if strings.HasPrefix(ev.Output, "panic: ") {
				rep.panicked = true
			}
			if strings.Contains(ev.Output, "[build failed]") || strings.Contains(ev.Output, "[setup failed]") {
				rep.buildFail = true
			}
			if ev.Test != "" {
				rep.output[ev.Test] = append(rep.output[ev.Test], ev.Output)
			}
		case ev.Test != "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
			rep.results[ev.Test] = ev.Action
		case ev.Test == "" && ev.Action == "fail" && len(rep.results) == 0:
			rep.buildFail = true // the package failed before any test ran
		}
	}
	return rep, nil
}

// verdict is the result of a top-level test: pass, fail, skip, or "not run".
func (t *testReport) verdict(test string) string {
	if v, ok := t.results[test]; ok {
		return v
	}
	return "not run"
}

// assertionLine is how t.Error, t.Fatal and testify report a failed check: "    file_test.go:123: ...".
var assertionLine = regexp.MustCompile(`^\s+(Error Trace:\s+\S+_test\.go:\d+|\S+_test\.go:\d+: )`)

// judge says whether a mutated run caught the mutant: some test failed on an assertion, and nothing else
// (a build failure, a timeout, a panic) ended the run.
func (t *testReport) judge() (string, string) {
	switch {
	case t.buildFail:
		return errored, "the mutated tree does not build: fix the mutant (log: " + t.log + ")"
	case t.timedOut:
		return errored, "timed out: not a catch (log: " + t.log + ")"
	case t.panicked:
		return errored, "a test panicked: not a catch (log: " + t.log + ")"
	}
	var failedOnAssertion []string
	for test, v := range t.results {
		if v != "fail" {
			continue
		}
		for _, line := range t.output[test] {
			if assertionLine.MatchString(line) {
				failedOnAssertion = append(failedOnAssertion, test)
				break
			}
		}
	}
	if len(failedOnAssertion) > 0 {
		sort.Strings(failedOnAssertion)
		return caught, ""
	}
	if len(t.results) == 0 {
		return errored, "no test ran (log: " + t.log + ")"
	}
	if t.exitErr != nil {
		return errored, "go test failed without a failed assertion (log: " + t.log + ")"
	}
	return survived, "every test passed on the mutated tree (log: " + t.log + ")"
}

func writeResults(path, level string, results []result, took time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Mutants, %s level\n\n", level)
	fmt.Fprintf(&b, "Run %s on the working tree of commit %s, %s in all (`go run ./hack/mutants --level %s`).\n\n",
		time.Now().UTC().Format(time.RFC3339), headCommit(), took.Round(time.Second), level)
	b.WriteString("| mutant | what it breaks | run | result | time |\n|---|---|---|---|---|\n")
	for _, r := range results {
		outcome := r.outcome
		if r.detail != "" {
			outcome += ": " + r.detail
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s | %s |\n", r.m.ID, r.m.Breaks, r.by, outcome, r.took.Round(100*time.Millisecond))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func headCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// lockTree locks the mutants' copy of the tree for this process (released by the returned func, or by the
// process's exit): two runs sharing one PREMIGRATE_CACHE would copy over and edit each other's tree, and each
// would judge the other's mutants.
func lockTree(tree string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(tree), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", filepath.Dir(tree), err)
	}
	f, err := os.OpenFile(tree+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the tree's lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("another mutant run is using %s (%w): wait for it, or give this one another PREMIGRATE_CACHE", tree, err)
	}
	return func() { _ = f.Close() }, nil
}

// clusterCleanup returns what the cluster level does at its end: delete the kind cluster of the scenarios
// ($KIND_CLUSTER_NAME, else premigrate) when it did not exist before the run.
func clusterCleanup(root string, out io.Writer) (func(), error) {
	name := os.Getenv("KIND_CLUSTER_NAME")
	if name == "" {
		name = "premigrate"
	}
	kind := filepath.Join(root, "bin", "kind")
	list, err := exec.Command(kind, "get", "clusters").Output()
	if err != nil {
		return nil, fmt.Errorf("%s get clusters (make tools installs it): %w", kind, err)
	}
	if clusterListed(string(list), name) {
		return func() { _, _ = fmt.Fprintf(out, "mutants: kind cluster %q kept: it was there before this run\n", name) }, nil
	}
	return func() {
		if b, err := exec.Command(kind, "delete", "cluster", "--name", name).CombinedOutput(); err != nil {
			_, _ = fmt.Fprintf(out, "mutants: deleting kind cluster %q, which this run created: %v\n%s", name, err, b)
			return
		}
		_, _ = fmt.Fprintf(out, "mutants: kind cluster %q deleted: this run created it\n", name)
	}, nil
}

// clusterListed reports whether the output of `kind get clusters` names the cluster.
func clusterListed(list, name string) bool {
	for _, line := range strings.Split(list, "\n") {
		if strings.TrimSpace(line) == name {
			return true
		}
	}
	return false
}
