package record

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HistoryKey is the key of the run history in its ConfigMap: plain text, oldest run first, one block per run
// (a line that starts with the run's start time, then its last output lines, indented), so
// `kubectl get configmap NAME -o jsonpath='{.data.runs}'` is readable as it is.
const HistoryKey = "runs"

// Bounds of one run's output kept in the history: the last TailLines lines, each cut to TailLineBytes.
const (
	TailLines     = 20
	TailLineBytes = 240
)

// Run is one migration run as the history keeps it.
type Run struct {
	Started  time.Time
	Took     time.Duration
	Identity string
	Job      string
	Pod      string
	// Outcome says how it ended, e.g. "succeeded, recorded" or "failed: exit 1, nothing recorded".
	Outcome string
	// Tail is the last lines of the migration's output.
	Tail []string
}

// text renders r as its block of the history.
func (r Run) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  identity %s  job %s  pod %s  %s after %s\n", r.Started.UTC().Format(time.RFC3339),
		r.Identity, orDash(r.Job), orDash(r.Pod), r.Outcome, r.Took.Round(time.Millisecond))
	tail := r.Tail
	if len(tail) > TailLines {
		tail = tail[len(tail)-TailLines:]
	}
	for _, l := range tail {
		fmt.Fprintf(&b, "    %s\n", cut(l, TailLineBytes))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	s = strings.TrimRight(s, "\r\n")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + " …"
}

// AppendRun returns history (HistoryKey's value) with r's block added last and only the newest keep blocks
// kept (keep >= 1).
func AppendRun(history string, r Run, keep int) string {
	blocks := splitRuns(history)
	blocks = append(blocks, r.text())
	if keep < 1 {
		keep = 1
	}
	if len(blocks) > keep {
		blocks = blocks[len(blocks)-keep:]
	}
	return strings.Join(blocks, "")
}

// splitRuns splits a history into its blocks: each starts at a line that is not indented.
func splitRuns(history string) []string {
	var blocks []string
	for _, line := range strings.SplitAfter(history, "\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, " ") && len(blocks) > 0:
			blocks[len(blocks)-1] += line
		default:
			if !strings.HasSuffix(line, "\n") {
				line += "\n"
			}
			blocks = append(blocks, line)
		}
	}
	return blocks
}

// HistoryOptions says where to add a run.
type HistoryOptions struct {
	ConfigMap string
	Keep      int
	// Create is the metadata of the ConfigMap when it does not exist yet; Owner, when not nil, its owner, given
	// also to an existing ConfigMap that has none.
	Create *Metadata
	Owner  *metav1.OwnerReference
	// Attempts bounds the tries (conflicts, API errors); default 5.
	Attempts int
}

// WriteRun adds r to the history ConfigMap (creating it when missing): a read-modify-write with its
// resourceVersion, retried a few times. The history is for operators: the caller logs a failure and goes on.
func WriteRun(ctx context.Context, client ConfigMapClient, o HistoryOptions, r Run) error {
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	var err error
	for attempt := 1; attempt <= o.Attempts; attempt++ {
		if err = writeRunOnce(ctx, client, o, r); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		wait := time.Duration(rand.Int64N(int64(200*time.Millisecond))) * time.Duration(attempt)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return fmt.Errorf("adding the run to ConfigMap %s: %w", o.ConfigMap, err)
}

func writeRunOnce(ctx context.Context, client ConfigMapClient, o HistoryOptions, r Run) error {
	cm, err := client.Get(ctx, o.ConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		meta := o.Create
		if meta == nil {
			meta = &Metadata{}
		}
		created := meta.configMap(o.ConfigMap)
		if o.Owner != nil {
			created.OwnerReferences = []metav1.OwnerReference{*o.Owner}
		}
		created.Data = map[string]string{HistoryKey: AppendRun("", r, o.Keep)}
		if _, err := client.Create(ctx, created, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	updated := cm.DeepCopy()
	if updated.Data == nil {
		updated.Data = map[string]string{}
	}
	updated.Data[HistoryKey] = AppendRun(updated.Data[HistoryKey], r, o.Keep)
	// a history created without its owner (a pre-install hook runs before Helm creates the release's
	// ConfigMap) takes it at the first run that finds it, so helm uninstall takes the history with the release
	if o.Owner != nil && len(updated.OwnerReferences) == 0 {
		updated.OwnerReferences = []metav1.OwnerReference{*o.Owner}
	}
	if _, err := client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	return nil
}
