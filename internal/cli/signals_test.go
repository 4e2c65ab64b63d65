package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestTheFirstSignalCancelsTheCommandAndTheSecondKillsItsProcessGroupAndThenTheProcess(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	kill := make(chan struct{})
	exited := make(chan struct{})
	var logs bytes.Buffer
	go OnSignals(sigs, cancel, kill, 100*time.Millisecond, NewLogger(&logs), func() { close(exited) })

	sigs <- syscall.SIGTERM
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first signal did not cancel the command's context")
	}
	if got := context.Cause(ctx).Error(); got != "received terminated" {
		t.Errorf("cause = %q, want %q", got, "received terminated")
	}
	select {
	case <-kill:
		t.Fatal("the first signal closed kill: the migration must get its SIGTERM and time to stop")
	case <-exited:
		t.Fatal("the first signal ended the gate")
	case <-time.After(300 * time.Millisecond):
	}
	sigs <- os.Interrupt
	select {
	case <-kill:
	case <-time.After(5 * time.Second):
		t.Fatal("the second signal did not close kill")
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the gate did not exit after the second signal's grace")
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "received interrupt again") {
		t.Errorf("the second signal is not logged at level WARN:\n%s", logs.String())
	}
}
