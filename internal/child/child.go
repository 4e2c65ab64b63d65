// Package child runs a command as a container's main process should: in its own process group, signalled as a
// group when the caller stops, reaped with its orphans when the caller is PID 1, its output passed through.
package child

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/premigrate/premigrate/internal/cli"
)

// isInit reports whether the gate is the container's init process (PID 1), which must reap the orphans the
// kernel re-parents to it. A variable so tests can run the init mode in a test process made a subreaper.
var isInit = func() bool { return os.Getpid() == 1 }

// hardStop is closed on the caller's second SIGTERM or SIGINT (StopHardOn): Run then sends SIGKILL to the
// command's process group, which ignored or outlived the first signal's SIGTERM.
var hardStop <-chan struct{} = make(chan struct{})

// StopHardOn makes Run send SIGKILL to the command's process group once c closes (the caller's second signal).
// Set it once, before the first Run.
func StopHardOn(c <-chan struct{}) { hardStop = c }

// outputDrain bounds how long Run waits, once the command exited, for output that descendants outliving
// it still write through a pipe (only when stdout or stderr is not a file, as in tests).
var outputDrain = 2 * time.Second

// Run runs argv and returns its exit code (128+signal when a signal ended it, 127 when it could not
// start, 1 when waiting for it failed). It is a correct container PID 1:
//
//   - the command runs in a process group of its own; when ctx ends (SIGTERM or SIGINT to the gate), the
//     whole group gets SIGTERM, so the tool's own children (a shell script's psql) stop too, and the
//     command is waited for; when hardStop closes (a second signal to the gate) while it is waited for,
//     the group gets SIGKILL;
//   - as PID 1 (isInit), it waits with wait4(-1) and so also reaps the orphaned descendants re-parented
//     to it, keeping only the command's own status; otherwise it waits with exec.Cmd.Wait.
//
// The command gets s.In as its stdin (a nil In is /dev/null); the gate's own lines go to log.
func Run(ctx context.Context, argv []string, s cli.Streams, log *slog.Logger) int {
	out, err := newChildOutput(s.Out, s.Err)
	if err != nil {
		log.Error(fmt.Sprintf("gate run: starting %q: %v", argv[0], err))
		return 127
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.In, out.stdout, out.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	asInit := isInit()
	if err := cmd.Start(); err != nil {
		out.finish(0)
		log.Error(fmt.Sprintf("gate run: starting %q: %v", argv[0], err))
		return 127
	}
	out.started()
	pid := cmd.Process.Pid

	type result struct {
		status syscall.WaitStatus
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		if asInit {
			r.status, r.err = reapUntil(pid)
		} else {
			r.status, r.err = waitCmd(cmd)
		}
		done <- r
	}()
	var r result
	var killErr error
	select {
	case r = <-done:
	case <-ctx.Done():
		select {
		case r = <-done: // reaped already: its pid, and so its group id, may be reused
		default:
			// Not reaped a moment ago, so the group id is still the command's: a pid is reused only after
			// its reap, and the kernel hands out pids in sequence, not within microseconds.
			if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
				killErr = fmt.Errorf("sending SIGTERM to the process group of %q (%d): %w", argv[0], pid, err)
			}
			select {
			case r = <-done:
			case <-hardStop:
				select {
				case r = <-done: // reaped meanwhile: as above, its group id may be reused
				default:
					log.Warn(fmt.Sprintf("gate run: a second signal: sending SIGKILL to the process group of %q (%d)", argv[0], pid))
					if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
						killErr = fmt.Errorf("sending SIGKILL to the process group of %q (%d): %w", argv[0], pid, err)
					}
					r = <-done
				}
			}
		}
	}
	out.finish(outputDrain)
	if killErr != nil {
		log.Error(fmt.Sprintf("gate run: %v", killErr))
	}
	if asInit {
		_ = cmd.Process.Release() // reaped by wait4: only the pidfd is left to close
	}
	if r.err != nil {
		log.Error(fmt.Sprintf("gate run: waiting for %q: %v", argv[0], r.err))
		return 1
	}
	return exitCode(r.status)
}

// waitCmd waits for the command with exec.Cmd.Wait and returns its wait status.
func waitCmd(cmd *exec.Cmd) (syscall.WaitStatus, error) {
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return 0, err
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return 0, fmt.Errorf("unexpected process state %T", cmd.ProcessState.Sys())
	}
	return ws, nil
}

// reapUntil reaps every child of this process with wait4(-1) until pid exits, and returns pid's status.
// The other children it reaps are orphans the kernel re-parented to PID 1 (or to a subreaper): their
// status is of no interest, reaping them only keeps them from staying zombies.
func reapUntil(pid int) (syscall.WaitStatus, error) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return 0, fmt.Errorf("reaping child processes (wait4): %w", err)
		case got == pid:
			return ws, nil
		}
	}
}

// exitCode is the shell's convention: the exit status, or 128+signal when a signal ended the process.
func exitCode(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 1
}

// childOutput gives the command files for its stdout and stderr: the writers themselves when they are files
// (the container's stdout and stderr), else pipes copied into the writers. exec.Cmd would copy too, but only
// its Wait collects those copies, and in init mode the command is waited for with wait4 instead.
type childOutput struct {
	stdout, stderr *os.File
	writeEnds      []*os.File // the gate's copies of the pipes' write ends, closed once the command started
	readEnds       []*os.File
	copies         sync.WaitGroup
}

func newChildOutput(stdout, stderr io.Writer) (*childOutput, error) {
	o := &childOutput{}
	var err error
	if o.stdout, err = o.file(stdout); err != nil {
		o.finish(0)
		return nil, err
	}
	if sameWriter(stdout, stderr) {
		o.stderr = o.stdout // one pipe, one copy: the writer is not called concurrently
		return o, nil
	}
	if o.stderr, err = o.file(stderr); err != nil {
		o.finish(0)
		return nil, err
	}
	return o, nil
}

func (o *childOutput) file(w io.Writer) (*os.File, error) {
	if f, ok := w.(*os.File); ok && f != nil {
		return f, nil
	}
	if w == nil {
		w = io.Discard
	}
	r, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating an output pipe: %w", err)
	}
	o.readEnds = append(o.readEnds, r)
	o.writeEnds = append(o.writeEnds, pw)
	o.copies.Add(1)
	go func() {
		defer o.copies.Done()
		_, _ = io.Copy(w, r)
	}()
	return pw, nil
}

// started closes the gate's copies of the write ends, so a copy ends once the command and its descendants
// closed theirs.
func (o *childOutput) started() {
	for _, f := range o.writeEnds {
		_ = f.Close()
	}
	o.writeEnds = nil
}

// finish waits up to drain for the copies to end, then closes the read ends, cutting off descendants that
// outlive the command and still hold the pipe, and waits for the copies to return.
func (o *childOutput) finish(drain time.Duration) {
	o.started()
	copied := make(chan struct{})
	go func() {
		o.copies.Wait()
		close(copied)
	}()
	timer := time.NewTimer(drain)
	defer timer.Stop()
	select {
	case <-copied:
	case <-timer.C:
	}
	for _, f := range o.readEnds {
		_ = f.Close()
	}
	<-copied
}

// sameWriter reports whether a and b are the same writer; writers of uncomparable types never are.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}
