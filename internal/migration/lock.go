package migration

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/policy"
	"github.com/premigrate/premigrate/internal/record"
)

// lock takes the release's migration lock (one migration of a release at a time, whatever the tool does
// about concurrency) and decides again on the records as they are once it is held, since another migration
// may have completed during the wait. It returns done=true with the exit code when the command must not run:
// the identity was recorded meanwhile (a nil error), a migration deployed after this one already succeeded
// on this database (never backwards: its Job was created later), or the lock could not be taken.
func (r *recorder) lock(ctx context.Context, e *Env, log *slog.Logger) (*record.Lock, bool, error) {
	logf := cli.Logf(log)
	created, uid, known := r.readJob(ctx, log)
	if known {
		r.jobCreated = created
	}
	o := record.LockOptions{
		Namespace: r.ns,
		ConfigMap: r.recordsAt(),
		Holder:    record.Holder{Identity: r.o.Identity, Job: r.o.Job, JobUID: uid, JobCreated: r.jobCreated, Pod: e.Getenv("HOSTNAME")},
		Create:    r.meta,
		Running:   holderRunning(r.clients.Pods),
		Now:       e.Now,
		// --wait-for-configmap: a chart that does not let the gate create the records waits for them
		WaitForConfigMap: r.o.WaitForConfigMap,
		Log:              log,
	}
	if r.o.Store != "" {
		var w record.Options
		if err := r.storeOptions(ctx, &w); err != nil {
			err = fmt.Errorf("not running the migration: preparing the records store for the migration lock: %w", err)
			log.Error(err.Error())
			return nil, true, r.exitFor(ctx, err)
		}
		o.Create, o.Owner, o.Seed = w.Create, w.Owner, w.Seed
	}
	l, cm, err := record.Acquire(ctx, r.clients.ConfigMaps, o)
	if err != nil {
		err = fmt.Errorf("not running the migration %s: %w", r.o.Identity, err)
		log.Error(err.Error())
		return nil, true, r.exitFor(ctx, err)
	}
	release := func() {
		if err := l.Release(context.WithoutCancel(ctx)); err != nil {
			log.Warn(fmt.Sprintf("warning: %v", err))
		}
	}
	in := policy.Run{Identity: r.o.Identity, Records: cm.Data, Database: r.database, JobCreated: created, Job: r.o.Job, Keep: r.o.Keep}
	d, err := r.decide(ctx, e, log, &in, policy.UnderLock)
	if err != nil {
		release()
		return nil, true, err
	}
	switch {
	case d.Verdict == policy.Done:
		release()
		logf("migration %s was recorded by Job %s at %s while this one waited for the lock: nothing to do",
			r.o.Identity, d.Entry.Job, d.Entry.CompletedAt.Format(time.RFC3339))
		return nil, true, nil
	case d.Verdict == policy.Refuse && d.Reason == policy.DeployedLater:
		release()
		err := fmt.Errorf("not running migration %s (Job %s, created %s at the latest): migration %s of Job %s, created later (%s), already succeeded "+
			"on this database at %s, and a migration never runs after one deployed after it (an older migration against a newer schema); "+
			"the release runs %s or later now, so this Job has nothing left to do",
			r.o.Identity, r.o.Job, created.UTC().Format(time.RFC3339), d.Other, d.Entry.Job,
			d.Entry.JobCreated.UTC().Format(time.RFC3339), d.Entry.CompletedAt.UTC().Format(time.RFC3339), d.Other)
		log.Error(err.Error())
		return nil, true, cli.Exit(exitcode.Refused, err)
	case d.Verdict == policy.Refuse && d.Reason == policy.RecordsFull:
		release()
		err := fmt.Errorf("not running migration %s: %s (ConfigMap %s/%s)", r.o.Identity, d.Why, r.ns, r.recordsAt())
		log.Error(err.Error())
		return nil, true, cli.Exit(exitcode.Refused, err)
	case d.Verdict == policy.Refuse:
		release()
		err := fmt.Errorf("not running migration %s: %s; its record was pruned from ConfigMap %s/%s while this Job waited for the lock (raise migration.keepRecords)",
			r.o.Identity, d.Why, r.ns, r.recordsAt())
		log.Error(err.Error())
		return nil, true, cli.Exit(exitcode.Refused, err)
	}
	return l, false, nil
}

// holderRunning asks the API server whether the pod that holds a lock may still run its command, before a
// lock that was not renewed for its lease is taken over: a pod that is gone, or whose phase is Succeeded or
// Failed, runs nothing; one that is Pending or Running may be cut off from the API server with its migration
// still going (its Role lets the gate get pods, not list them). A lock written by no known pod (unreadable)
// falls back to the lease.
func holderRunning(pods dbid.PodGetter) func(context.Context, record.Holder) (bool, string, error) {
	return func(ctx context.Context, h record.Holder) (bool, string, error) {
		if h.Pod == "" || h.Job == "?" {
			return false, "it names no pod", nil
		}
		p, err := pods.Get(ctx, h.Pod, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, fmt.Sprintf("its pod %s is gone", h.Pod), nil
		case apierrors.IsForbidden(err):
			return true, "", fmt.Errorf("read pod %s: %w (the migration's Role grants get on pods from chart 0.4.0 on)", h.Pod, err)
		case err != nil:
			return true, "", fmt.Errorf("read pod %s: %w", h.Pod, err)
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
			return false, fmt.Sprintf("its pod %s ended (%s)", h.Pod, p.Status.Phase), nil
		}
		where := ""
		if p.Spec.NodeName != "" {
			where = " on node " + p.Spec.NodeName
		}
		return true, fmt.Sprintf("its pod %s is %s%s", h.Pod, p.Status.Phase, where), nil
	}
}

func (r *recorder) exitFor(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return cli.Exit(exitcode.Interrupted, err)
	}
	return cli.Exit(exitcode.Failed, err)
}

// readJob reads the creation time of this migration's Job, and its UID,: the order in which migrations were
// deployed (known=true). When the Job cannot be read (a later apply of job mode renamed the Role's Job) it
// returns the time this process started, after the Job's creation: a record of a Job created after that is
// still known to be of a later deploy.
func (r *recorder) readJob(ctx context.Context, log *slog.Logger) (time.Time, string, bool) {
	job, err := r.clients.Jobs.Get(ctx, r.o.Job, metav1.GetOptions{})
	if err != nil {
		why := err.Error()
		if apierrors.IsForbidden(err) {
			why = "the migration's Role does not name it: a later apply of the chart, or a chart older than the gate"
		}
		log.Warn(fmt.Sprintf("warning: cannot read Job %s/%s for its creation time (%s): checking the order of the migrations "+
			"against this pod's start instead (a migration deployed after this Job but before this pod started is not seen as later)",
			r.ns, r.o.Job, why))
		return r.started, "", false
	}
	return job.CreationTimestamp.Time, string(job.UID), true
}
