package framework

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/logger"
	"github.com/gruntwork-io/terratest/modules/shell"
	terratesting "github.com/gruntwork-io/terratest/modules/testing"
)

// Runner runs every program the cluster tests drive (kubectl, Helm 3 and 4, ct, git, docker, the project's
// scripts) one way: through terratest's shell module, with the cluster's kubeconfig, standard input closed
// unless given, and each command line, its output as it arrives and its exit written to the test's own log
// file, results/commands/<suite>/<test>.log. A failing scenario points at that file; nothing a command printed is
// discarded. The output a caller gets is terratest's: its lines joined by "\n", without a final newline.
type Runner struct {
	// Kubeconfig is the cluster's kubeconfig, set as KUBECONFIG for every command.
	Kubeconfig string
	// Dir is where the per-test command logs go; empty logs nothing.
	Dir string

	mu    sync.Mutex
	files map[string]*logFile
	seq   int
}

// Cmd is one program to run.
type Cmd struct {
	// Bin is the program, Args its arguments.
	Bin  string
	Args []string
	// Stdin is its standard input (closed when nil).
	Stdin []byte
	// Stdout returns standard output alone: kubectl may print benign warnings on standard error (websocket
	// notices under load) that must not be parsed as a result. Standard error still goes to the log and into
	// the error.
	Stdout bool
	// Dir is the working directory (the test binary's when empty).
	Dir string
	// Env adds environment variables (KUBECONFIG is always set).
	Env map[string]string
	// OnLine, when set, sees each line of output (standard output and error) as it arrives: a benchmark stamps
	// them with its own clock.
	OnLine func(line string)
}

// Run runs bin with args and returns its combined output; an error names the command line and holds the
// output.
func (r *Runner) Run(t testing.TB, bin string, args ...string) (string, error) {
	return r.RunCmd(t, Cmd{Bin: bin, Args: args})
}

// Stdout runs bin with args and returns its standard output alone (Cmd.Stdout).
func (r *Runner) Stdout(t testing.TB, bin string, args ...string) (string, error) {
	return r.RunCmd(t, Cmd{Bin: bin, Args: args, Stdout: true})
}

// Input runs bin with args and stdin as its standard input, and returns its combined output.
func (r *Runner) Input(t testing.TB, stdin []byte, bin string, args ...string) (string, error) {
	return r.RunCmd(t, Cmd{Bin: bin, Args: args, Stdin: stdin})
}

// Must is Run that fails the test on error.
func (r *Runner) Must(t testing.TB, bin string, args ...string) string {
	t.Helper()
	out, err := r.Run(t, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// RunCmd runs c. t names the log file; nil logs to results/commands/setup.log (what runs before the tests).
func (r *Runner) RunCmd(t testing.TB, c Cmd) (string, error) {
	env := map[string]string{"KUBECONFIG": r.Kubeconfig}
	for k, v := range c.Env {
		env[k] = v
	}
	line := c.Bin + " " + strings.Join(c.Args, " ")
	log, tag := r.logFor(t)
	log.printf("%s $ %s", tag, line)
	start := time.Now()
	cmd := shell.Command{Command: c.Bin, Args: c.Args, WorkingDir: c.Dir, Env: env,
		Stdin: bytes.NewReader(c.Stdin), Logger: logger.New(lineSink{log: log, tag: tag, onLine: c.OnLine})}
	tt := t
	if tt == nil {
		tt = noTest{}
	}
	var out, stderr string
	var err error
	if c.Stdout {
		out, stderr, err = shell.RunCommandAndGetStdOutErrE(tt, cmd)
	} else {
		out, err = shell.RunCommandAndGetOutputE(tt, cmd)
	}
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		err = unwrap(err)
		log.printf("%s exit: %v after %s", tag, err, took)
		return out, fmt.Errorf("%s: %w\n%s%s", line, err, out, stderr)
	}
	log.printf("%s exit 0 after %s", tag, took)
	return out, err
}

// LogPath is the command log of the test named name.
func (r *Runner) LogPath(name string) string {
	if r.Dir == "" {
		return ""
	}
	return filepath.Join(r.Dir, unsafeChars.ReplaceAllString(name, "_")+".log")
}

// Close closes the log files.
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for _, f := range r.files {
		if f.f == nil {
			continue
		}
		if err := f.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	r.files = nil
	return first
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func (r *Runner) logFor(t testing.TB) (*logFile, string) {
	name := "setup"
	if t != nil {
		name = t.Name()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	tag := fmt.Sprintf("[%d]", r.seq)
	if r.files == nil {
		r.files = map[string]*logFile{}
	}
	if f, ok := r.files[name]; ok {
		return f, tag
	}
	f := &logFile{}
	if path := r.LogPath(name); path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			f.f, _ = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		}
	}
	r.files[name] = f
	return f, tag
}

// unwrap takes terratest's ErrWithCmdOutput apart: its message repeats standard error, which the caller's
// error already holds.
func unwrap(err error) error {
	if e := (*shell.ErrWithCmdOutput)(nil); errors.As(err, &e) {
		return e.Underlying
	}
	return err
}

// logFile is one test's command log; commands of a test may run at once, so its lines are written whole.
type logFile struct {
	mu sync.Mutex
	f  *os.File
}

func (l *logFile) printf(format string, args ...any) {
	if l.f == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// a log line that cannot be written is lost, not the command's result
	_, _ = fmt.Fprintf(l.f, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// lineSink takes each output line terratest reads, for the log and the caller's OnLine.
type lineSink struct {
	log    *logFile
	tag    string
	onLine func(string)
}

func (s lineSink) Logf(_ terratesting.TestingT, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if strings.HasPrefix(format, "Running command ") {
		return // terratest's own line: the log has the command line already
	}
	s.log.printf("%s %s", s.tag, line)
	if s.onLine != nil {
		s.onLine(line)
	}
}

// noTest stands in for a test outside of one (set-up before the tests run): terratest only names it.
type noTest struct{ testing.TB }

func (noTest) Helper()      {}
func (noTest) Name() string { return "setup" }
