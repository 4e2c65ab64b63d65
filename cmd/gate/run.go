package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// runFlags is `gate run [flags] -- COMMAND [ARGS...]`: the migration container's entrypoint. It runs the
// user's migration command with the container's stdin, stdout and stderr (so its log is the container's log,
// which Helm prints when the hook fails), forwards SIGTERM to it, and records the identity only when the
// command exits 0. It exits with the command's exit code, so a Job podFailurePolicy on exit codes still works.
func runFlags(fs *flag.FlagSet, e *env) func(ctx context.Context) int {
	o := registerRecordFlags(fs)
	return func(ctx context.Context) int {
		argv := fs.Args()
		if len(argv) == 0 {
			return usageError(e, fs, "the migration command is required after --")
		}
		write, code := o.prepare(e, fs)
		if code != exitOK {
			return code
		}
		logf := e.logger()
		start := e.now()
		code = runChild(ctx, argv, e.stdout, e.stderr)
		took := e.now().Sub(start).Round(time.Millisecond)
		if code != exitOK {
			logf("migration command %q exited %d after %s: nothing recorded", argv[0], code, took)
			return code
		}
		logf("migration command %q succeeded in %s", argv[0], took)
		return write(ctx)
	}
}

// runChild runs argv and returns its exit code (128+signal when a signal ended it, 127 when it could not
// start). When ctx ends (SIGTERM to the gate) the child gets SIGTERM and is waited for.
func runChild(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		_, _ = fmt.Fprintf(stderr, "gate run: starting %q: %v\n", argv[0], err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err = <-done
	}
	if err == nil {
		return exitOK
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		_, _ = fmt.Fprintf(stderr, "gate run: waiting for %q: %v\n", argv[0], err)
		return exitFailed
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exitErr.ExitCode()
}

// copyFlags is `gate copy --to PATH`: copies this executable, so an init container of the gate image can
// hand the gate to the migration container of the app image through an emptyDir.
func copyFlags(fs *flag.FlagSet, e *env) func(ctx context.Context) int {
	to := fs.String("to", "", "where to write a copy of this executable (required)")
	return func(context.Context) int {
		if *to == "" {
			return usageError(e, fs, "--to is required")
		}
		self, err := os.Executable()
		if err != nil {
			_, _ = fmt.Fprintf(e.stderr, "gate copy: finding this executable: %v\n", err)
			return exitFailed
		}
		if err := copyFile(self, *to); err != nil {
			_, _ = fmt.Fprintf(e.stderr, "gate copy: %v\n", err)
			return exitFailed
		}
		e.logger()("copied %s to %s", self, *to)
		return exitOK
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("opening %s: %w", from, err)
	}
	defer func() { _ = in.Close() }()
	tmp := to + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, to); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp, to, err)
	}
	return nil
}
