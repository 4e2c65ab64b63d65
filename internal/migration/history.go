package migration

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/record"
)

// outputTail keeps the last lines of a migration's output (both streams, as they arrive) for the run history;
// the output itself still goes to the container's log.
type outputTail struct {
	mu      sync.Mutex
	lines   []string
	partial strings.Builder
}

func (t *outputTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rest := string(p)
	for {
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		if t.partial.Len() < 4*record.TailLineBytes {
			t.partial.WriteString(rest[:i])
		}
		t.lines = append(t.lines, t.partial.String())
		t.partial.Reset()
		if len(t.lines) > 2*record.TailLines {
			t.lines = append([]string(nil), t.lines[len(t.lines)-record.TailLines:]...)
		}
		rest = rest[i+1:]
	}
	if t.partial.Len() < 4*record.TailLineBytes {
		t.partial.WriteString(rest)
	}
	return len(p), nil
}

// Lines is the last record.TailLines lines, an unfinished last line included.
func (t *outputTail) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.lines...)
	if t.partial.Len() > 0 {
		out = append(out, t.partial.String())
	}
	if len(out) > record.TailLines {
		out = out[len(out)-record.TailLines:]
	}
	return out
}

// historyWriteTimeout bounds the history write at the end of a run: it must not hold a stopping pod.
const historyWriteTimeout = 10 * time.Second

// writeHistory adds the run to the --history ConfigMap, created when missing beside the records, owned by the
// release's records ConfigMap (so the history goes with the release) when that exists: a history a pre-install
// hook created before it existed takes it at the next run. A failure is logged:
// the history is for operators and never changes a run's outcome.
func (r *recorder) writeHistory(ctx context.Context, name string, keep int, run record.Run, log *slog.Logger) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), historyWriteTimeout)
	defer cancel()
	o := record.HistoryOptions{ConfigMap: name, Keep: keep, Create: r.gateOwnedMetadata()}
	anchor, err := r.clients.ConfigMaps.Get(ctx, r.o.Records, metav1.GetOptions{})
	switch {
	case err == nil:
		o.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: anchor.Name, UID: anchor.UID}
	case !apierrors.IsNotFound(err):
		log.Warn(fmt.Sprintf("warning: run history: reading ConfigMap %s for the history's owner: %v", r.o.Records, err))
	}
	if err := record.WriteRun(ctx, r.clients.ConfigMaps, o, run); err != nil {
		log.Warn(fmt.Sprintf("warning: run history: %v: this run is missing from it", err))
		return
	}
	cli := fmt.Sprintf("kubectl get configmap %s -n %s -o jsonpath='{.data.%s}'", name, r.ns, record.HistoryKey)
	log.Info(fmt.Sprintf("run history: added this run (%s) to ConfigMap %s/%s: %s", run.Outcome, r.ns, name, cli))
}
