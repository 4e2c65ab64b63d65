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
// file), create (the file with the text), patch (the text is a diff, applied with git apply: exact context, no
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
		err = os.WriteFile(path, []byte(s.Text), 0o644)
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
