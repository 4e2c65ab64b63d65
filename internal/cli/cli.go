// Package cli is what premigrate's commands (cmd/gate, cmd/demo, cmd/postgres-init) share: the
// streams a command runs with, the error that carries a command's exit code to main, and the
// logger every command writes to stderr.
//
// The pattern of a command: each subcommand parses its flags and environment into an options
// struct and runs as run(ctx, opts, env) error, where env holds the Streams (and whatever else the
// command takes from the process, replaceable in tests). A subcommand reports its own failures (a
// log line, or a usage message) and returns an *ExitError naming the exit code; main builds the
// context, calls the dispatcher and turns what it returned into the exit code with ExitCode, in
// one place.
package cli

import (
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
)

// Streams are a command's standard input, output and error.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// ExitError ends a command with exit code Code. Err is the cause, already reported to the user by the
// command (logged, or printed with the usage); it is kept for errors.Is and errors.As.
type ExitError struct {
	Code int
	Err  error
}

// Exit returns an *ExitError with code and the cause err (may be nil).
func Exit(code int, err error) error {
	return &ExitError{Code: code, Err: err}
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return fmt.Sprintf("%v (exit code %d)", e.Err, e.Code)
}

func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the process exit code for what a command returned: 0 for nil, the code of the first
// *ExitError in err's chain, 1 for any other error.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	return 1
}

// TimeFormat is the format of the time of a log line: RFC 3339 in UTC, to the millisecond.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// NewLogger returns the logger of a command: slog's text handler on w (a line of key=value pairs
// time, level, msg and the attributes), the time in UTC formatted with TimeFormat.
func NewLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 && a.Value.Kind() == slog.KindTime {
				return slog.String(slog.TimeKey, a.Value.Time().UTC().Format(TimeFormat))
			}
			return a
		},
	}))
}

// Logf adapts l to the printf-style callbacks of premigrate's internal packages: each call is one
// line at level Info with the formatted message.
func Logf(l *slog.Logger) func(format string, args ...any) {
	return func(format string, args ...any) {
		l.Info(strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
	}
}

// StdLogger adapts l to the *log.Logger that the demo's packages and net/http take: each Print is
// one line at level Info.
func StdLogger(l *slog.Logger) *log.Logger {
	return slog.NewLogLogger(l.Handler(), slog.LevelInfo)
}
