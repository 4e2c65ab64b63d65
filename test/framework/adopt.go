package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// AdoptStep is one block of the adoption steps in the docs (the library README's "Adopt it", docs/adopting.md):
// what to do to which file of the adopting chart, and the block's text. Actions: append (the text to the
// file), create (the file with the text, and its folder), patch (the text is a diff, applied with git apply: exact context, no
// fuzz), delete (the text is the shell command the docs give, run in the chart's folder; the file must be gone).
type AdoptStep struct{ Action, File, Text string }

var adoptBlock = regexp.MustCompile("(?s)<!-- adopt: (append|create|patch|delete) (\\S+) -->\n```[a-z]*\n(.*?)```")

// AdoptSteps reads the adoption blocks of the Markdown file doc, in order.
func AdoptSteps(doc string) ([]AdoptStep, error) {
	b, err := os.ReadFile(doc)
	if err != nil {
		return nil, fmt.Errorf("reading the adoption steps: %w", err)
	}
	var steps []AdoptStep
	for _, m := range adoptBlock.FindAllStringSubmatch(string(b), -1) {
		steps = append(steps, AdoptStep{Action: m[1], File: m[2], Text: m[3]})
	}
	return steps, nil
}

// Apply does the step to the chart in folder chart, literally, through the runner r; a step that does not
// fit the chart fails t, naming the step.
func (s AdoptStep) Apply(t testing.TB, r *Runner, chart string) {
	t.Helper()
	path := filepath.Join(chart, s.File)
	var err error
	switch s.Action {
	case "append":
		var f *os.File
		if f, err = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0); err == nil {
			if _, err = f.WriteString("\n" + s.Text); err == nil {
				err = f.Close()
			} else {
				_ = f.Close()
			}
		}
	case "create":
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			err = os.WriteFile(path, []byte(s.Text), 0o644)
		}
	case "patch":
		_, err = r.RunCmd(t, Cmd{Bin: "git", Args: []string{"apply", "--verbose", "-"}, Stdin: []byte(s.Text), Dir: chart})
	case "delete":
		if _, err = r.RunCmd(t, Cmd{Bin: "bash", Args: []string{"-euo", "pipefail", "-c", s.Text}, Dir: chart}); err == nil {
			if _, statErr := os.Stat(path); statErr == nil {
				err = fmt.Errorf("the command left %s in place", s.File)
			}
		}
	}
	if err != nil {
		t.Fatalf("adoption step %q %s does not fit the chart %s: %v", s.Action, s.File, chart, err)
	}
}

// BuildFromDocs writes a chart into folder chart from the adoption blocks of the Markdown file doc (each a
// create, append, patch or delete step, in order), then copies the library chart lib into the charts/
// folder of each chart in libDirs (relative to chart: "." for the chart itself, "charts/worker" for a
// subchart), where `helm dependency build` would put it. It fails t when doc has no blocks.
func BuildFromDocs(t testing.TB, r *Runner, doc, chart, lib string, libDirs ...string) {
	t.Helper()
	steps, err := AdoptSteps(doc)
	if err != nil || len(steps) == 0 {
		t.Fatalf("no chart blocks in %s (%v)", doc, err)
	}
	for _, s := range steps {
		s.Apply(t, r, chart)
	}
	for _, d := range libDirs {
		dir := filepath.Join(chart, d, "charts")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := r.RunCmd(t, Cmd{Bin: "cp", Args: []string{"-r", lib, filepath.Join(dir, "premigrate-lib")}}); err != nil {
			t.Fatal(err)
		}
	}
}
