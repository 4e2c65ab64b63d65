package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Exit codes every command shares; a command's own codes start at 3.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitUsage   = 2
	ExitStopped = 130
)

// Action runs a command once its flags are parsed; args are its positional arguments (after --). It reports
// its own failures and returns nil, a *UsageError, or an *ExitError with the exit code.
type Action[E any] func(ctx context.Context, e E, args []string) error

// Command is a subcommand: Bind registers its options on fs and returns the Action that runs it with them.
type Command[E any] struct {
	Name    string
	Summary string
	Bind    func(fs *flag.FlagSet) Action[E]
	// Args is true for commands that take positional arguments (after --).
	Args bool
}

// Program is a command line made of subcommands, each run with the environment E.
type Program[E any] struct {
	Name    string
	Version string
	// About is the program's one line; Epilogue what its usage says after the list of commands (exit codes).
	About, Epilogue string
	Commands        []Command[E]
}

// Run dispatches args to a command; it prints usage and errors on streams (a usage mistake exits ExitUsage,
// an error the command did not report yet is logged on log and exits ExitFailed).
func (p Program[E]) Run(ctx context.Context, args []string, e E, streams Streams, log *slog.Logger) error {
	if len(args) == 0 {
		p.usage(streams.Err)
		return Exit(ExitUsage, errors.New("no command"))
	}
	name, rest := args[0], args[1:]
	switch name {
	case "version", "--version", "-version":
		_, _ = fmt.Fprintf(streams.Out, "%s %s\n", p.Name, p.Version)
		return nil
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			p.usage(streams.Out)
			return nil
		}
		name, rest = rest[0], []string{"--help"}
	}
	for _, c := range p.Commands {
		if c.Name == name {
			return p.runCommand(ctx, c, rest, e, streams, log)
		}
	}
	_, _ = fmt.Fprintf(streams.Err, "%s: unknown command %q\n\n", p.Name, name)
	p.usage(streams.Err)
	return Exit(ExitUsage, fmt.Errorf("unknown command %q", name))
}

func (p Program[E]) flagSet(c Command[E]) (*flag.FlagSet, Action[E]) {
	fs := flag.NewFlagSet(p.Name+" "+c.Name, flag.ContinueOnError)
	act := c.Bind(fs)
	fs.Usage = func() {
		extra := ""
		if c.Args {
			extra = " -- COMMAND [ARGS...]"
		}
		_, _ = fmt.Fprintf(fs.Output(), "Usage: %s %s [flags]%s\n\n%s.\n\nFlags:\n", p.Name, c.Name, extra, upperFirst(c.Summary))
		fs.PrintDefaults()
	}
	return fs, act
}

// runCommand parses the command's flags and runs it; it prints usage errors with the command's usage.
func (p Program[E]) runCommand(ctx context.Context, c Command[E], args []string, e E, streams Streams, log *slog.Logger) error {
	fs, act := p.flagSet(c)
	fs.SetOutput(streams.Err)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(streams.Out)
			fs.Usage()
			return nil
		}
		return Exit(ExitUsage, err) // the flag package printed the error and usage
	}
	var err error
	if fs.NArg() > 0 && !c.Args {
		err = Usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	} else {
		err = act(ctx, e, fs.Args())
	}
	var usageErr *UsageError
	var exitErr *ExitError
	switch {
	case err == nil || errors.As(err, &exitErr):
		return err
	case errors.As(err, &usageErr):
		_, _ = fmt.Fprintf(streams.Err, "%s: %v\n", fs.Name(), usageErr)
		fs.SetOutput(streams.Err)
		fs.Usage()
		return Exit(ExitUsage, err)
	default: // not reported yet
		log.Error(fmt.Sprintf("%s: %v", fs.Name(), err))
		return Exit(ExitFailed, err)
	}
}

func (p Program[E]) usage(w io.Writer) {
	_, _ = fmt.Fprintf(w, "%s %s: %s.\n\nUsage: %s <command> [flags]\n\nCommands:\n", p.Name, p.Version, p.About, p.Name)
	for _, c := range p.Commands {
		_, _ = fmt.Fprintf(w, "  %-8s %s\n", c.Name, c.Summary)
	}
	_, _ = fmt.Fprintf(w, "  %-8s %s\n", "version", "print the version")
	_, _ = fmt.Fprintf(w, "  %-8s %s\n", "help", "show this help, or a command's: "+p.Name+" help <command>")
	_, _ = fmt.Fprint(w, "\n"+p.Epilogue)
	for _, c := range p.Commands {
		fs, _ := p.flagSet(c)
		fs.SetOutput(w)
		_, _ = fmt.Fprintln(w)
		fs.Usage()
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// UsageError is a mistake on the command line: Program.Run prints it with the command's usage (ExitUsage).
type UsageError struct{ Err error }

func (u *UsageError) Error() string { return u.Err.Error() }
func (u *UsageError) Unwrap() error { return u.Err }

// Usagef is a *UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// OnSignals handles a command's SIGTERM and SIGINT (sigs): the first cancels ctx (cancel), so the command
// stops what it waits for; the second closes kill (a child process group gets SIGKILL) and, grace later,
// calls exit whatever the command still waits for.
func OnSignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, kill chan<- struct{}, grace time.Duration, log *slog.Logger, exit func()) {
	first := <-sigs
	cancel(fmt.Errorf("received %s", first))
	second := <-sigs
	log.Warn(fmt.Sprintf("received %s again: stopping the child's process group with SIGKILL, and exiting within %s", second, grace))
	close(kill)
	time.Sleep(grace)
	exit()
}
