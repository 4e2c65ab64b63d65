package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/exitcode"
)

// copyOptions are the flags of `gate copy`.
type copyOptions struct {
	to string
}

func (o *copyOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.to, "to", "", "where to write a copy of this executable (required)")
}

// runCopy is `gate copy --to PATH`: it copies this executable, so an init container of the gate image can
// hand the gate to the migration container of the app image through an emptyDir.
func runCopy(o *copyOptions, e *env) error {
	if o.to == "" {
		return cli.Usagef("--to is required")
	}
	log := e.logger()
	self, err := os.Executable()
	if err != nil {
		log.Error(fmt.Sprintf("gate copy: finding this executable: %v", err))
		return cli.Exit(exitcode.Failed, err)
	}
	if err := copyFile(self, o.to); err != nil {
		log.Error(fmt.Sprintf("gate copy: %v", err))
		return cli.Exit(exitcode.Failed, err)
	}
	log.Info(fmt.Sprintf("copied %s to %s", self, o.to))
	return nil
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
