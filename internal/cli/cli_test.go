package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"testing"
	"time"
)

func TestExitCodeIsZeroForNilTheCodeOfAnExitErrorElseOne(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"exit error", Exit(3, errors.New("timed out")), 3},
		{"exit error without a cause", Exit(130, nil), 130},
		{"wrapped exit error", fmt.Errorf("wait: %w", Exit(2, nil)), 2},
		{"other error", errors.New("boom"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExitCode(tc.err); got != tc.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestExitErrorKeepsItsCause(t *testing.T) {
	err := Exit(1, fmt.Errorf("reading: %w", fs.ErrNotExist))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = false", err)
	}
	if got, want := err.Error(), "reading: file does not exist (exit code 1)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestLogLinesAreKeyValuePairsWithTheUTCTimeToTheMillisecond(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf)
	at := time.Date(2026, 1, 2, 4, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	r := slog.NewRecord(at, slog.LevelWarn, `waiting for "x"`, 0)
	r.AddAttrs(slog.Int("attempt", 2))
	if err := l.Handler().Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), `time=2026-01-02T03:04:05.678Z level=WARN msg="waiting for \"x\"" attempt=2`+"\n"; got != want {
		t.Errorf("log line = %q, want %q", got, want)
	}
}

func TestLogfAndStdLoggerWriteOneInfoLineEach(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf).With("cmd", "x")
	Logf(l)("applied version %d\n", 2)
	StdLogger(l).Printf("serving on %s", ":8080")
	line := regexp.MustCompile(`^time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=INFO msg="(applied version 2|serving on :8080)" cmd=x$`)
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), &buf)
	}
	for _, l := range lines {
		if !line.Match(l) {
			t.Errorf("line %q does not match %s", l, line)
		}
	}
}
