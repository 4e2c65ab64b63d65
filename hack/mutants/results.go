package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// clusterResultsFile holds the cluster level's results, committed: a cluster run takes hours, so it is run by
// hand (make test-mutants MUTANTS_LEVEL=cluster) and its results are checked by the unit tests against the
// tree: a result whose mutant's files changed after the commit it ran on is stale.
const clusterResultsFile = "hack/mutants/cluster-results.yaml"

// clusterResult is one mutant's last cluster run.
type clusterResult struct {
	ID       string  `json:"id"`
	Commit   string  `json:"commit"`   // the commit the mutated files came from
	Edits    string  `json:"edits"`    // a hash of the mutant's edits as they ran
	Scenario string  `json:"scenario"` // the scenario it ran and that caught it (results from before the tiers: a -run regexp)
	Outcome  string  `json:"outcome"`  // caught, survived or error
	Detail   string  `json:"detail,omitempty"`
	At       string  `json:"at"`
	Minutes  float64 `json:"minutes"`
}

func editsHash(m mutant) string {
	b, _ := json.Marshal(m.Edits)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

func readClusterResults(path string) (map[string]clusterResult, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]clusterResult{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var list []clusterResult
	if err := yaml.UnmarshalStrict(b, &list); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	out := map[string]clusterResult{}
	for _, r := range list {
		out[r.ID] = r
	}
	return out, nil
}

// saveClusterResults merges results of a run on commit into the committed file.
func saveClusterResults(path, commit string, results []result) error {
	all, err := readClusterResults(path)
	if err != nil {
		return err
	}
	for _, r := range results {
		all[r.m.ID] = clusterResult{ID: r.m.ID, Commit: commit, Edits: editsHash(r.m), Scenario: r.m.Scenario,
			Outcome: r.outcome, Detail: r.detail, At: time.Now().UTC().Format(time.RFC3339),
			Minutes: float64(r.took.Round(6*time.Second)) / float64(time.Minute)}
	}
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	list := make([]clusterResult, 0, len(ids))
	for _, id := range ids {
		list = append(list, all[id])
	}
	b, err := yaml.Marshal(list)
	if err != nil {
		return err
	}
	header := "# Written by `make test-mutants MUTANTS_LEVEL=cluster` (hack/mutants): each mutant's last cluster run.\n"
	return os.WriteFile(path, append([]byte(header), b...), 0o644)
}

// committed refuses a cluster run while a file a chosen mutant edits has uncommitted changes: the result
// names the commit its files came from.
func committed(root string, ms []mutant) error {
	var files []string
	for _, m := range ms {
		for _, e := range m.Edits {
			files = append(files, e.File)
		}
	}
	cmd := exec.Command("git", append([]string{"status", "--porcelain", "--"}, files...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git status: %w", err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Errorf("commit these first, the cluster results name the commit they ran on:\n%s", s)
	}
	return nil
}

// staleClusterResults lists the results that no longer describe the tree, in two kinds. broken: the mutant's
// edits changed, or a file it edits changed after the commit it ran on (the unit tests fail: what was mutated
// is not what the tree has). stale: the result ran another scenario than the table names now (before the
// tiers, a -run of every variant of a test), or the file that declares its scenario, the cluster tests' harness
// or test/framework changed after that commit (the proof that caught it is not the one CI runs now: MUTANTS.md
// says so, and `make test-mutants MUTANTS_LEVEL=cluster` runs it again).
func staleClusterResults(root string, ms []mutant, results map[string]clusterResult) (broken, stale []string, err error) {
	files, err := scenarioFiles(root)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range ms {
		r, ok := results[m.ID]
		if !ok {
			continue
		}
		if r.Edits != editsHash(m) {
			broken = append(broken, fmt.Sprintf("%s: its edits changed since its cluster run on %s", m.ID, r.Commit))
			continue
		}
		var mutated []string
		for _, e := range m.Edits {
			mutated = append(mutated, e.File)
		}
		changed, err := changedSince(root, r.Commit, mutated)
		if err != nil {
			return nil, nil, err
		}
		if len(changed) > 0 {
			broken = append(broken, fmt.Sprintf("%s: %s changed since its cluster run on %s", m.ID, strings.Join(changed, ", "), r.Commit))
			continue
		}
		if r.Scenario != m.Scenario {
			stale = append(stale, fmt.Sprintf("%s: it ran %s, and the table names scenario %s", m.ID, r.Scenario, m.Scenario))
			continue
		}
		changed, err = changedSince(root, r.Commit, append([]string{files[m.Scenario]}, clusterHarness...))
		if err != nil {
			return nil, nil, err
		}
		if len(changed) > 0 {
			stale = append(stale, fmt.Sprintf("%s: %s changed since its cluster run on %s", m.ID, strings.Join(changed, ", "), r.Commit))
		}
	}
	return broken, stale, nil
}

// changedSince lists the paths (files or folders) that differ between commit and the working tree.
func changedSince(root, commit string, paths []string) ([]string, error) {
	var changed []string
	for _, p := range paths {
		cmd := exec.Command("git", "diff", "--quiet", commit, "--", p)
		cmd.Dir = root
		if err := cmd.Run(); err != nil {
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
				return nil, fmt.Errorf("git diff %s -- %s: %w", commit, p, err)
			}
			changed = append(changed, p)
		}
	}
	return changed, nil
}

// writeMarkdown writes MUTANTS.md: every mutant with this run's unit result and its committed cluster result.
func writeMarkdown(root, path string, all []mutant, unit []result) error {
	cluster, err := readClusterResults(filepath.Join(root, clusterResultsFile))
	if err != nil {
		return err
	}
	broken, stale, err := staleClusterResults(root, all, cluster)
	if err != nil {
		return err
	}
	isStale := map[string]string{}
	for _, s := range append(broken, stale...) {
		id, why, _ := strings.Cut(s, ": ")
		isStale[id] = why
	}
	byID := map[string]result{}
	for _, r := range unit {
		byID[r.m.ID] = r
	}
	var b strings.Builder
	b.WriteString(markdownHeader)
	fmt.Fprintf(&b, "Unit level: run %s on commit %s (`go run ./hack/mutants --level unit --markdown MUTANTS.md`); it runs again in every `make test`.\n\n",
		time.Now().UTC().Format("2006-01-02"), headCommit())
	b.WriteString("| mutant | what it breaks | unit or render test | unit | cluster scenarios | cluster |\n|---|---|---|---|---|---|\n")
	nCaught, ran, unitOnly := 0, 0, 0
	for _, m := range all {
		u := byID[m.ID]
		unitCell := u.outcome
		if u.outcome == "" {
			unitCell = "not run"
		}
		clusterCell, scenarioCell := "not run", "`"+m.Scenario+"`"
		if m.UnitOnly != "" {
			clusterCell, scenarioCell = "unit only: "+m.UnitOnly, "none"
			unitOnly++
		}
		if c, ok := cluster[m.ID]; ok {
			clusterCell = fmt.Sprintf("%s on %s (%.0f min)", c.Outcome, c.Commit, c.Minutes)
			if why, ok := isStale[m.ID]; ok {
				clusterCell = fmt.Sprintf("stale (%s): %s", why, c.Outcome)
			} else {
				ran++
				if c.Outcome == caught {
					nCaught++
				}
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` (%s) | %s | %s | %s |\n", m.ID, m.Breaks, m.Test, m.Package, unitCell, scenarioCell, clusterCell)
	}
	fmt.Fprintf(&b, "\n%d mutants; at the cluster level %d results are current (their scenario as the table names it, nothing it runs changed since) and %d of them were caught, %d are stale (run them again), %d without a cluster scenario (unit only, with the reason), %d not run.\n",
		len(all), ran, nCaught, len(isStale), unitOnly, len(all)-ran-len(isStale)-unitOnly)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

const markdownHeader = `# Mutants

Each mutant breaks one protection of the chart, the library or the gate on purpose (the table:
[hack/mutants/mutants.yaml](hack/mutants/mutants.yaml)); a test must then fail on an assertion. A build
failure, a panic or a timeout is an error of the run, never a catch; each chosen test passes on the unmutated
tree first; an edit whose text is gone or occurs more than once fails the run (a stranded mutant).

- **Unit level**: each mutant's unit or render test. Part of ` + "`make test`" + ` (` + "`make test-mutants-unit`" + `), so a refactor
  that strands a mutant or lets one survive fails CI the same day.
- **Cluster level**: ` + "`make test-mutants MUTANTS_LEVEL=cluster [MUTANTS=<regexp>]`" + ` runs each mutant's cluster
  scenario (its ID, a scenario of the CI tier that ` + "`make test`" + ` runs: test/e2e/verdict fails ` + "`make test`" + ` otherwise) on kind
  without consulting its unit test (images rebuilt from the mutated tree when it edits Go code), after every
  chosen scenario passed once on the unmutated tree, and writes [hack/mutants/cluster-results.yaml](hack/mutants/cluster-results.yaml)
  with the commit it ran on and the scenario that caught it. The unit tests of hack/mutants fail when a file a
  mutant edits changed after that commit. A result is **stale** here when it ran another scenario than the
  table names now (before the tiers, a -run of every variant of a test), or when its scenario's test file, the
  cluster tests' harness or test/framework changed after that commit: run it again.
`

var errFailed = errors.New("exit status 1")

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
