//go:build linux

package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/premigrate/premigrate/internal/cli"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (linux/prctl.h): orphaned descendants of a subreaper are
// re-parented to it instead of to PID 1, which lets the test process stand in for a container's PID 1.
const prSetChildSubreaper = 36

// childMode is how Run waits: with exec.Cmd.Wait, or as PID 1 with wait4(-1).
type childMode struct {
	name   string
	asInit bool
}

var childModes = []childMode{{name: "not init"}, {name: "as init", asInit: true}}

// setChildMode makes the test process a subreaper for the rest of the test, so orphans re-parent to it as
// they would to a container's PID 1, and makes Run run in the given mode.
func setChildMode(t *testing.T, asInit bool) {
	t.Helper()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("making the test process a subreaper: %v", errno)
	}
	prev := isInit
	isInit = func() bool { return asInit }
	t.Cleanup(func() {
		isInit = prev
		// Reap orphans that exited after Run returned, then stop being a subreaper.
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0)
	})
}

type childRun struct {
	code           int
	stdout, stderr string
}

// startChild runs argv with Run in the background; the returned function waits for the result.
func startChild(t *testing.T, ctx context.Context, argv ...string) func() childRun {
	t.Helper()
	done := make(chan childRun, 1)
	go func() {
		// stderr takes both the command's output (copied from a pipe) and the gate's log lines, from two
		// goroutines: a bytes.Buffer would lose lines (io.Copy uses its ReadFrom, which holds the buffer)
		var stdout bytes.Buffer
		var stderr lockedBuffer
		code := Run(ctx, argv, cli.Streams{Out: &stdout, Err: &stderr}, cli.NewLogger(&stderr))
		done <- childRun{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}()
	return func() childRun {
		t.Helper()
		select {
		case r := <-done:
			return r
		case <-time.After(30 * time.Second):
			t.Fatalf("Run(%q) did not return within 30s", argv)
			return childRun{}
		}
	}
}

// lockedBuffer is a buffer safe for writers on several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func runScript(t *testing.T, ctx context.Context, script string) childRun {
	t.Helper()
	return startChild(t, ctx, "/bin/sh", "-c", script)()
}

// waitForFile returns the content of path once it exists, failing the test after timeout.
func waitForFile(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return string(b)
		}
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("reading %s: %v", path, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunChildReturnsTheCommandsExitCodeOr128PlusTheSignalThatEndedIt(t *testing.T) {
	cases := []struct {
		name   string
		script string
		want   int
	}{
		{name: "success", script: "exit 0", want: 0},
		{name: "failure", script: "exit 1", want: 1},
		{name: "refusal", script: "exit 3", want: 3},
		{name: "highest exit status", script: "exit 255", want: 255},
		{name: "SIGTERM", script: "kill -TERM $$", want: 128 + 15},
		{name: "SIGKILL", script: "kill -KILL $$", want: 128 + 9},
	}
	for _, mode := range childModes {
		t.Run(mode.name, func(t *testing.T) {
			setChildMode(t, mode.asInit)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					r := runScript(t, context.Background(), tc.script)
					if r.code != tc.want {
						t.Errorf("exit code = %d, want %d; stderr:\n%s", r.code, tc.want, r.stderr)
					}
				})
			}
		})
	}
}

func TestRunChildReturns127WhenTheCommandCannotStart(t *testing.T) {
	notExecutable := filepath.Join(t.TempDir(), "migrate.sql")
	if err := os.WriteFile(notExecutable, []byte("SELECT 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		argv []string
	}{
		{name: "missing path", argv: []string{"/does/not/exist"}},
		{name: "missing from PATH", argv: []string{"premigrate-no-such-command", "up"}},
		{name: "not executable", argv: []string{notExecutable}},
	}
	for _, mode := range childModes {
		t.Run(mode.name, func(t *testing.T) {
			setChildMode(t, mode.asInit)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					r := startChild(t, context.Background(), tc.argv...)()
					if r.code != 127 {
						t.Errorf("exit code = %d, want 127", r.code)
					}
					if want := logged(fmt.Sprintf("gate run: starting %q", tc.argv[0])); !strings.Contains(r.stderr, want) {
						t.Errorf("stderr %q does not say %q", r.stderr, want)
					}
				})
			}
		})
	}
}

func TestRunChildPassesTheCommandsOutputThrough(t *testing.T) {
	for _, mode := range childModes {
		t.Run(mode.name, func(t *testing.T) {
			setChildMode(t, mode.asInit)
			t.Run("separate writers", func(t *testing.T) {
				r := runScript(t, context.Background(), "echo applied version 2; echo a warning >&2")
				if r.code != 0 || r.stdout != "applied version 2\n" || r.stderr != "a warning\n" {
					t.Errorf("got code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
				}
			})
			t.Run("one writer for both", func(t *testing.T) {
				var out bytes.Buffer
				code := Run(context.Background(), []string{"/bin/sh", "-c", "echo one; echo two >&2; echo three"}, cli.Streams{Out: &out, Err: &out}, cli.NewLogger(&out))
				if code != 0 || out.String() != "one\ntwo\nthree\n" {
					t.Errorf("got code %d, output %q", code, out.String())
				}
			})
		})
	}
}

func TestRunChildSendsSIGTERMToTheCommandsWholeProcessGroupWhenCtxEnds(t *testing.T) {
	for _, mode := range childModes {
		t.Run(mode.name, func(t *testing.T) {
			setChildMode(t, mode.asInit)
			dir := t.TempDir()
			// The migration tool is a shell script whose own child (think psql) must stop too.
			grandchild := filepath.Join(dir, "grandchild.sh")
			script := fmt.Sprintf("trap 'echo TERM > %s/term; exit 0' TERM\necho > %s/ready\nsleep 30 &\nwait\n", dir, dir)
			if err := os.WriteFile(grandchild, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			result := startChild(t, ctx, "/bin/sh", "-c", fmt.Sprintf("sh %s &\nwait\n", grandchild))
			waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)
			cancel()
			if r := result(); r.code != 128+15 {
				t.Errorf("exit code = %d, want %d (the command ended by SIGTERM); stderr:\n%s", r.code, 128+15, r.stderr)
			}
			if got := waitForFile(t, filepath.Join(dir, "term"), 10*time.Second); got != "TERM\n" {
				t.Errorf("the grandchild wrote %q, want %q", got, "TERM\n")
			}
		})
	}
}

func TestRunChildReturnsZeroWhenTheCommandTrapsSIGTERMAndExitsCleanly(t *testing.T) {
	for _, mode := range childModes {
		t.Run(mode.name, func(t *testing.T) {
			setChildMode(t, mode.asInit)
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			result := startChild(t, ctx, "/bin/sh", "-c",
				fmt.Sprintf("trap 'echo rolled back; exit 0' TERM\necho > %s/ready\nsleep 30 &\nwait\n", dir))
			waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)
			cancel()
			if r := result(); r.code != 0 || r.stdout != "rolled back\n" {
				t.Errorf("got code %d, stdout %q, want 0 and the trap's output; stderr:\n%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}

func TestRunChildSendsSIGKILLToTheWholeProcessGroupOnASecondSignalWhenTheCommandIgnoresSIGTERM(t *testing.T) {
	for _, mode := range childModes {
		t.Run(mode.name, func(t *testing.T) {
			setChildMode(t, mode.asInit)
			kill := make(chan struct{})
			prev := hardStop
			hardStop = kill
			t.Cleanup(func() { hardStop = prev })
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// the shell and its sleep ignore SIGTERM (an ignored signal stays ignored across exec)
			result := startChild(t, ctx, "/bin/sh", "-c", fmt.Sprintf("trap '' TERM\necho > %s/ready\nsleep 60\n", dir))
			waitForFile(t, filepath.Join(dir, "ready"), 10*time.Second)
			cancel()
			done := make(chan childRun, 1)
			go func() { done <- result() }()
			select {
			case r := <-done:
				t.Fatalf("Run returned %d before the second signal: the command ignores SIGTERM", r.code)
			case <-time.After(500 * time.Millisecond):
			}
			start := time.Now()
			close(kill)
			r := <-done
			if r.code != 128+9 {
				t.Errorf("exit code = %d, want %d (the command ended by SIGKILL); stderr:\n%s", r.code, 128+9, r.stderr)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Run returned %s after the second signal", took)
			}
			if !strings.Contains(r.stderr, "level=WARN") || !strings.Contains(r.stderr, "a second signal: sending SIGKILL") {
				t.Errorf("the SIGKILL is not logged at level WARN (code %d); stderr:\n%s", r.code, r.stderr)
			}
		})
	}
}

func TestRunChildAsInitReapsOrphansAndStillReturnsTheCommandsExitCode(t *testing.T) {
	// The command orphans a short-lived grandchild (its parent shell exits at once), waits until the
	// orphan is gone, which for an exited orphan means reaped (kill -0 succeeds on a zombie), and exits 7;
	// 9 if the orphan is still there after 2s. Without init mode nobody reaps the orphan: that case shows
	// the orphan does re-parent to the test process, so the init case tests the reaping.
	cases := []struct {
		name       string
		asInit     bool
		want       int
		wantZombie bool
	}{
		{name: "as init, the orphan is reaped", asInit: true, want: 7},
		{name: "not init, the orphan stays a zombie", asInit: false, want: 9, wantZombie: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setChildMode(t, tc.asInit)
			pidFile := filepath.Join(t.TempDir(), "orphan.pid")
			script := fmt.Sprintf(`sh -c 'sleep 0.1 & echo $! > %s'
pid=$(cat %s)
i=0
while kill -0 "$pid" 2>/dev/null; do
	i=$((i+1))
	if [ "$i" -gt 40 ]; then exit 9; fi
	sleep 0.05
done
exit 7
`, pidFile, pidFile)
			r := runScript(t, context.Background(), script)
			if r.code != tc.want {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", r.code, tc.want, r.stderr)
			}
			var pid int
			if _, err := fmt.Sscan(waitForFile(t, pidFile, time.Second), &pid); err != nil {
				t.Fatalf("reading the orphan's pid: %v", err)
			}
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			if zombie := got == pid; zombie != tc.wantZombie {
				t.Errorf("orphan %d left as a zombie of the test process = %v, want %v (wait4: %d, %v)", pid, zombie, tc.wantZombie, got, err)
			}
			if !tc.wantZombie && !errors.Is(err, syscall.ECHILD) {
				t.Errorf("wait4(%d) = %d, %v; want ECHILD: the orphan was reaped already", pid, got, err)
			}
		})
	}
}

// logged is s as a log line quotes it (msg="...").
func logged(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
