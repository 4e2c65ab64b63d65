// Package gate waits until the migration of one identity has succeeded: it
// lists and watches the migration Jobs and the records ConfigMap and decides
// from their current state on every change.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/record"
)

// JobClient is the part of client-go's typed Job client (for one namespace)
// that the gate uses.
type JobClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*batchv1.JobList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ConfigMapClient is the part of client-go's typed ConfigMap client (for one
// namespace) that the gate uses.
type ConfigMapClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Config says what to wait for.
type Config struct {
	Namespace string // for messages; the clients are already namespaced
	Identity  string // migration identity: a key of the records ConfigMap
	Records   string // name of the records ConfigMap (the release's)
	// Store, when set, names the ConfigMap that keeps the records outside the release (gate run --store):
	// when it exists, its records are the ones that count; until it does, those of Records.
	Store string
	// Job is the exact name of the migration Job whose success counts. Only
	// that Job, carrying the premigrate.io/identity label equal to Identity,
	// is evidence: a Job left by an earlier install or revision under another
	// name never releases pods.
	Job string
	// Database is the database the app pod will use, as the gate sees it now. A record made on another
	// database, or a Job that completed before this database's data was created, is no evidence for it. The
	// zero ID accepts every record.
	Database dbid.ID
	// Timeout bounds the wait; 0 waits forever.
	Timeout time.Duration
	// ProgressInterval is the period of progress lines (default 10s).
	ProgressInterval time.Duration
	// MinBackoff and MaxBackoff bound the delay before listing again after
	// an error or a closed watch (defaults 500ms and 10s).
	MinBackoff, MaxBackoff time.Duration
	// Log receives the wait's lines: the start and progress at Info, an API error being retried at Warn, the
	// outcome at Info (succeeded) or Error (failed, timed out), each with the wait's attributes (identity,
	// namespace, records, job) and the outcome's. Nil discards them.
	Log *slog.Logger
}

// Outcome is how a wait ended.
type Outcome int

// Outcomes of Wait.
const (
	Succeeded Outcome = iota + 1
	Failed
	TimedOut
)

func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Failed:
		return "failed"
	case TimedOut:
		return "timed out"
	default:
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
}

// Result tells how the wait ended and why.
type Result struct {
	Outcome Outcome
	// Job is the Job whose condition decided, if one did.
	Job string
	// Reason and Message are the Job's Failed condition's, when Failed.
	Reason, Message string
	// Recorded is true when the records ConfigMap decided.
	Recorded bool
	// Summary is the final message, already logged (one log line per line).
	Summary string
}

// ErrInvalidConfig marks configuration errors (a usage error for the CLI).
var ErrInvalidConfig = errors.New("invalid configuration")

// IdentityLabel is the label that names a migration Job's identity.
const IdentityLabel = "premigrate.io/identity"

func (c *Config) validate() error {
	switch {
	case c.Identity == "":
		return fmt.Errorf("%w: identity is empty", ErrInvalidConfig)
	case c.Records == "":
		return fmt.Errorf("%w: records ConfigMap name is empty", ErrInvalidConfig)
	case c.Job == "":
		return fmt.Errorf("%w: Job name is empty", ErrInvalidConfig)
	case c.Store == c.Records:
		return fmt.Errorf("%w: the store and the records ConfigMap have the same name %q", ErrInvalidConfig, c.Store)
	case c.Timeout < 0:
		return fmt.Errorf("%w: negative timeout", ErrInvalidConfig)
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = 10 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(10*time.Second, c.MinBackoff)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.Log = c.Log.With("identity", c.Identity, "namespace", c.Namespace, "records", c.Records, "job", c.Job)
	return nil
}

// Wait blocks until the migration of cfg.Identity succeeded, failed, or the
// timeout passed. API errors are retried, never returned: the error is only
// for an invalid cfg (ErrInvalidConfig) or a cancelled ctx.
func Wait(ctx context.Context, cfg Config, jobs JobClient, configMaps ConfigMapClient) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	start := time.Now()

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	updates := make(chan func(*view))
	send := func(ctx context.Context, apply func(*view)) {
		select {
		case updates <- apply:
		case <-ctx.Done():
		}
	}
	jobSource := newJobSource(jobs, cfg.Job, cfg.Identity, func(ctx context.Context, items map[string]*batchv1.Job) {
		send(ctx, func(v *view) { v.jobs, v.jobsKnown, v.jobsErr = items, true, nil })
	}, func(ctx context.Context, err error) {
		send(ctx, func(v *view) { v.setErr(sourceJobs, err, cfg.Log) })
	})
	jobSource.backoff = backoff{min: cfg.MinBackoff, max: cfg.MaxBackoff}
	wg.Add(1)
	go func() { defer wg.Done(); jobSource.run(ctx) }()
	for _, name := range []string{cfg.Records, cfg.Store} {
		if name == "" {
			continue
		}
		src := newConfigMapSource(configMaps, name, func(ctx context.Context, items map[string]*corev1.ConfigMap) {
			send(ctx, func(v *view) { v.setConfigMap(name, items[name]) })
		}, func(ctx context.Context, err error) {
			send(ctx, func(v *view) { v.setErr(sourceRecords, err, cfg.Log) })
		})
		src.backoff = backoff{min: cfg.MinBackoff, max: cfg.MaxBackoff}
		wg.Add(1)
		go func() { defer wg.Done(); src.run(ctx) }()
	}

	v := &view{
		identity:   cfg.Identity,
		recs:       record.Records{From: cfg.Records},
		anchorName: cfg.Records,
		storeName:  cfg.Store,
		known:      map[string]bool{},
		job:        cfg.Job,
		namespace:  cfg.Namespace,
		database:   cfg.Database,
	}
	limit := "no timeout"
	if cfg.Timeout > 0 {
		limit = "timeout " + cfg.Timeout.String()
	}
	on := ""
	if cfg.Database.Bound() {
		on = " on database " + cfg.Database.Value
	}
	cfg.Log.Info(fmt.Sprintf("waiting for migration %s%s in namespace %s: key %s in ConfigMap %s, or Job %s with label %s=%s Complete (%s)",
		cfg.Identity, on, cfg.Namespace, cfg.Identity, cfg.Records, cfg.Job, IdentityLabel, cfg.Identity, limit))

	ticker := time.NewTicker(cfg.ProgressInterval)
	defer ticker.Stop()
	var timeout <-chan time.Time
	if cfg.Timeout > 0 {
		t := time.NewTimer(cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case apply := <-updates:
			apply(v)
			if d := v.decide(); d.outcome != 0 {
				res := v.result(d)
				logResult(cfg.Log, res)
				return res, nil
			}
		case <-ticker.C:
			cfg.Log.Info(v.progress(time.Since(start)))
		case <-timeout:
			res := Result{Outcome: TimedOut, Summary: fmt.Sprintf(
				"timed out after %s waiting for migration %s in namespace %s: no key %s in ConfigMap %s and Job %s of that identity not Complete; last state: %s",
				cfg.Timeout, cfg.Identity, cfg.Namespace, cfg.Identity, cfg.Records, cfg.Job, v.state())}
			logResult(cfg.Log, res)
			return res, nil
		case <-ctx.Done():
			return Result{}, fmt.Errorf("waiting for migration %s: %w", cfg.Identity, ctx.Err())
		}
	}
}

// logResult logs the outcome, a line per line of its summary: at Info when the migration succeeded, at Error
// when the app will not start (failed, timed out), with the outcome's attributes.
func logResult(log *slog.Logger, res Result) {
	level := slog.LevelError
	if res.Outcome == Succeeded {
		level = slog.LevelInfo
	}
	attrs := []any{"outcome", res.Outcome.String()}
	if res.Job != "" {
		attrs = append(attrs, "decidedBy", res.Job)
	}
	if res.Recorded {
		attrs = append(attrs, "recorded", true)
	}
	if res.Reason != "" {
		attrs = append(attrs, "reason", res.Reason)
	}
	for _, line := range strings.Split(res.Summary, "\n") {
		log.Log(context.Background(), level, line, attrs...)
	}
}

// setErr stores a source's error; the first error after a success is logged
// at once (Warn: it is retried), later ones show in the progress lines.
func (v *view) setErr(kind sourceKind, err error, log *slog.Logger) {
	prev := &v.jobsErr
	if kind == sourceRecords {
		prev = &v.cmErr
	}
	if *prev == nil {
		log.Warn(v.describeErr(kind, err), "error", err.Error())
	}
	*prev = err
}

func (v *view) result(d verdict) Result {
	switch {
	case len(d.contracted) > 0:
		return v.refusedAsContracted(d.contracted)
	case d.outcome == Succeeded && d.record != nil:
		s := fmt.Sprintf("migration %s succeeded: recorded in ConfigMap %s", v.identity, v.recs.From)
		if d.recErr == nil {
			s += fmt.Sprintf(" (completed at %s by Job %s)", d.record.CompletedAt.Format(time.RFC3339), d.record.Job)
		}
		return Result{Outcome: Succeeded, Recorded: true, Job: d.record.Job, Summary: s}
	case d.outcome == Succeeded:
		return Result{Outcome: Succeeded, Job: d.job.Name, Summary: fmt.Sprintf(
			"migration %s succeeded: Job %s is Complete", v.identity, d.job.Name)}
	case d.pruned:
		return Result{Outcome: Failed, Reason: "RecordPruned", Summary: fmt.Sprintf(
			"migration %s ran on this database, but its record was pruned from ConfigMap %s/%s (it keeps the newest "+
				"migration.keepRecords) and its Job is gone: its migration will not run again (an older migration on a newer "+
				"schema); not starting the app\nraise migration.keepRecords, or roll forward to a recorded revision",
			v.identity, v.namespace, v.recs.From)}
	default:
		return Result{Outcome: Failed, Job: d.job.Name, Reason: d.cond.Reason, Message: d.cond.Message, Summary: fmt.Sprintf(
			"migration %s failed: Job %s/%s is Failed: %s: %s; not starting the app\nread the migration's logs with: kubectl logs -n %s job/%s -c migrate",
			v.identity, v.namespace, d.job.Name, d.cond.Reason, d.cond.Message, v.namespace, d.job.Name)}
	}
}
