package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/child"
	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/policy"
	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/internal/rollout"
	"github.com/premigrate/premigrate/internal/ungate"
)

// contractOptions are the flags and the command of `gate contract`.
type contractOptions struct {
	recordOptions
	deployment string
	soak       time.Duration
	timeout    time.Duration
	interval   time.Duration
	argv       []string // the contract command, after --
}

func (o *contractOptions) register(fs *flag.FlagSet) {
	o.recordOptions.register(fs)
	fs.StringVar(&o.deployment, "deployment", "", "name of the Deployment whose rollout to --identity must end before the contract runs (required)")
	fs.DurationVar(&o.soak, "soak", 0, "how long the rollout facts must hold without a break before the contract runs")
	fs.DurationVar(&o.timeout, "rollout-timeout", time.Hour, "give up waiting for the rollout after this long (exit 4; the contract did not run); 0 waits forever")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "time between two observations of the rollout")
}

// contractor is what `gate contract` needs once its flags are checked.
type contractor struct {
	*recorder
	o   *contractOptions
	src rollout.Source
	log *slog.Logger
	// dep is the Deployment as last observed under the lock: the contract's Events are about it
	dep *appsv1.Deployment
}

// runContract is `gate contract [flags] -- COMMAND [ARGS...]`: the contract step of an identity (what drops the
// schema that older versions still use). It runs the command only when the rollout of the Deployment to the
// identity has ended with nothing of another identity running or terminating (rollout.Evaluate) for --soak, and
// then the identity's migration is recorded on this database and its contract is not; it checks those facts again under
// the release's migration lock right before the command starts, and records the contract step in the
// identity's record once the command exits 0. When the Deployment left the identity (a rollback, a revert, a
// newer version), the command never runs and the gate exits 0: the contract belongs to the identity that
// serves.
func runContract(ctx context.Context, o *contractOptions, e *env) error {
	switch {
	case len(o.argv) == 0:
		return usageErrorf("the contract command is required after --")
	case o.deployment == "":
		return usageErrorf("--deployment is required")
	case o.soak < 0 || o.timeout < 0 || o.interval <= 0:
		return usageErrorf("--soak and --rollout-timeout must be >= 0, --interval > 0")
	}
	r, err := o.prepare(e)
	if err != nil {
		return err
	}
	r.started = e.now()
	c := &contractor{recorder: r, o: o, log: e.logger(), src: r.clients.rollout(r.ns, o.deployment)}
	if err := r.resolve(ctx, o.waitCM, c.log); err != nil {
		return err
	}
	for {
		// the rollout first: in job mode (and under Argo CD) the contract Job may start before the migration of
		// its identity is recorded, and the rollout cannot end before it is (the pods wait for it)
		v, err := rollout.Wait(ctx, rollout.WaitConfig{Identity: o.identity, Soak: o.soak, Timeout: o.timeout, Interval: o.interval, Log: c.log}, c.src)
		switch {
		case errors.Is(err, rollout.ErrTimeout):
			err = fmt.Errorf("not running the contract of %s: %w", o.identity, err)
			c.log.Error(err.Error())
			return cli.Exit(exitTimeout, err)
		case err != nil:
			return r.exitFor(ctx, err)
		case v.State == rollout.Left:
			c.log.Info(fmt.Sprintf("not running the contract of %s, and never while another identity serves: %s", o.identity, v.Reason))
			return nil
		}
		if done, err := c.decide(ctx); done {
			return err
		}
		lock, done, err := c.lock(ctx, e)
		if done {
			return err
		}
		if lock == nil {
			continue // the facts broke before the lock was taken: wait again
		}
		return c.run(ctx, e, lock)
	}
}

// decide reads the records: it returns done=true (with the exit) when the contract must not run: the identity's
// migration is not recorded on this database (refused), or its contract already ran (exit 0).
func (c *contractor) decide(ctx context.Context) (bool, error) {
	rs, err := c.where().Read(ctx, c.clients.configMaps(c.ns))
	if err != nil {
		err = fmt.Errorf("not running the contract of %s: reading the records: %w", c.o.identity, err)
		c.log.Error(err.Error())
		return true, c.exitFor(ctx, err)
	}
	return c.decideOn(rs.Data, rs.From)
}

// decideOn is decide on records already read (from names their ConfigMap).
func (c *contractor) decideOn(data map[string]string, from string) (bool, error) {
	switch d := policy.Contract(data, c.o.identity, c.database); d.Verdict {
	case policy.Refuse:
		err := fmt.Errorf("not running the contract of %s: its migration is not recorded on this database (ConfigMap %s/%s): "+
			"a contract runs only after the migration it completes", c.o.identity, c.ns, from)
		c.log.Error(err.Error())
		return true, cli.Exit(exitRefused, err)
	case policy.Done:
		c.log.Info(fmt.Sprintf("the contract of %s already ran (Job %s at %s): nothing to do", c.o.identity, d.Contract.Job,
			d.Contract.At.UTC().Format(time.RFC3339)))
		return true, nil
	}
	return false, nil
}

// lock takes the release's migration lock and checks the records and the rollout again under it. It returns
// the lock when the contract may run, nil (and done=false) when the rollout facts broke meanwhile, and done=true
// with the exit when it must not run at all.
func (c *contractor) lock(ctx context.Context, e *env) (*record.Lock, bool, error) {
	created, uid, _ := c.readJob(ctx, c.log)
	l, cm, err := record.Acquire(ctx, c.clients.configMaps(c.ns), record.LockOptions{
		Namespace:        c.ns,
		ConfigMap:        c.recordsAt(),
		Holder:           record.Holder{Identity: c.o.identity, Job: c.o.job, JobUID: uid, JobCreated: created, Pod: e.getenv("HOSTNAME")},
		WaitForConfigMap: c.o.waitCM,
		Running:          holderRunning(c.clients.pods(c.ns)),
		Now:              e.now,
		Log:              c.log,
	})
	if err != nil {
		err = fmt.Errorf("not running the contract of %s: %w", c.o.identity, err)
		c.log.Error(err.Error())
		return nil, true, c.exitFor(ctx, err)
	}
	release := func() {
		if err := l.Release(context.WithoutCancel(ctx)); err != nil {
			c.log.Warn(fmt.Sprintf("warning: %v", err))
		}
	}
	if done, err := c.decideOn(cm.Data, c.recordsAt()); done {
		release()
		return nil, true, err
	}
	o, err := c.src.Observe(ctx)
	if err != nil {
		release()
		c.log.Warn(fmt.Sprintf("cannot observe the rollout again under the lock: %v; waiting again", err))
		return nil, false, nil
	}
	switch v := rollout.Evaluate(o, c.o.identity); v.State {
	case rollout.Done:
		c.log.Info(fmt.Sprintf("under the release's migration lock the rollout facts still hold: %s", v.Reason))
		c.dep = o.Deployment
		return l, false, nil
	case rollout.Left:
		release()
		c.log.Info(fmt.Sprintf("not running the contract of %s, and never while another identity serves: %s", c.o.identity, v.Reason))
		return nil, true, nil
	default:
		release()
		c.log.Info(fmt.Sprintf("the rollout facts broke while the lock was taken (%s): waiting again", v.Reason))
		return nil, false, nil
	}
}

// run runs the contract command under lock and records the contract step when it exits 0.
func (c *contractor) run(ctx context.Context, e *env, lock *record.Lock) error {
	defer func() {
		if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
			c.log.Warn(fmt.Sprintf("warning: %v: the next migration of this release waits until the lock expires", err))
		}
	}()
	// The start is recorded before the command runs: from then on the schema may change under the code of the
	// identities deployed before this one, so their pods are refused (policy.ContractedAfter), whether the
	// command then succeeds, fails or is stopped halfway; a rollback during the contract starts none of them.
	o := record.ContractOptions{Namespace: c.ns, ConfigMap: c.recordsAt(), Identity: c.o.identity, Job: c.o.job, Retry: c.o.waitCM, Now: e.now, Log: c.log}
	if err := record.WriteContractStarted(ctx, c.clients.configMaps(c.ns), o); err != nil {
		err = fmt.Errorf("not running the contract of %s: its start could not be recorded, and the older identities' pods must be refused "+
			"before it runs: %w", c.o.identity, err)
		c.log.Error(err.Error())
		c.tell(ctx, corev1.EventTypeWarning, reasonContractFailed, err.Error())
		return c.exitFor(ctx, err)
	}
	// as for a migration (gate run), a lock that cannot be renewed never stops the command halfway
	start := e.now()
	code := child.Run(ctx, c.o.argv, e.Streams, c.log)
	took := e.now().Sub(start).Round(time.Millisecond)
	end := policy.Conclude(policy.Ended{Code: code, LockLost: lost(lock), Stopped: ctx.Err() != nil})
	var err error
	switch end.Reason {
	case policy.LockLost:
		err = fmt.Errorf("contract command %q exited %d after %s, but the lock was lost while it ran: not recording it; the next run repeats it", c.o.argv[0], code, took)
		c.tell(ctx, corev1.EventTypeWarning, reasonContractFailed, err.Error())
	case policy.CommandFailed:
		err = fmt.Errorf("contract command %q exited %d after %s: nothing recorded; the running pods are untouched, and the next deploy of %s runs it again",
			c.o.argv[0], code, took, c.o.identity)
		c.tell(ctx, corev1.EventTypeWarning, reasonContractFailed, fmt.Sprintf("the contract of identity %s (Job %s) failed: %v", c.o.identity, c.o.job, err))
	case policy.Stopped:
		err = fmt.Errorf("contract command %q exited 0 after %s, but the gate was asked to stop while it ran: not recording it; the next run repeats it", c.o.argv[0], took)
		c.tell(ctx, corev1.EventTypeWarning, reasonContractFailed, err.Error())
	}
	if !end.Record {
		c.log.Error(err.Error())
		return exitOf(end, code, nil, err, c.log)
	}
	cli.Logf(c.log)("contract command %q succeeded in %s", c.o.argv[0], took)
	err = record.WriteContracted(ctx, c.clients.configMaps(c.ns), o)
	if err != nil {
		c.log.Error(err.Error())
		c.tell(ctx, corev1.EventTypeWarning, reasonContractFailed, fmt.Sprintf("the contract of identity %s (Job %s) ran but could not be recorded: %v", c.o.identity, c.o.job, err))
		return c.exitFor(ctx, err)
	}
	c.tell(ctx, corev1.EventTypeNormal, reasonContractCompleted, fmt.Sprintf("the contract of identity %s (Job %s) ran in %s, after the rollout left nothing older, and is recorded", c.o.identity, c.o.job, took))
	return nil
}

// The reasons of the Events the contract posts on its Deployment (kubectl describe deployment, kubectl events).
const (
	reasonContractFailed    = "ContractFailed"
	reasonContractCompleted = "ContractCompleted"
)

// tell posts an Event on the Deployment the contract waited for, where operators look; a failure to post it is
// only logged (the Job's log and status say the same).
func (c *contractor) tell(ctx context.Context, typ, reason, message string) {
	if c.dep == nil || c.clients.events == nil {
		return
	}
	if len(message) > 1000 {
		message = message[:1000] + "..."
	}
	now := metav1.Now()
	d := c.dep
	_, err := c.clients.events(c.ns).Create(context.WithoutCancel(ctx), &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: d.Name + ".", Namespace: c.ns},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: d.Name, UID: d.UID, ResourceVersion: d.ResourceVersion,
		},
		Reason:              reason,
		Message:             message,
		Type:                typ,
		Source:              corev1.EventSource{Component: "premigrate-gate"},
		ReportingController: "premigrate.io/gate",
		ReportingInstance:   c.o.job,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}, metav1.CreateOptions{FieldManager: ungate.FieldManager})
	if err != nil {
		c.log.Warn(fmt.Sprintf("posting the Event %s on Deployment %s: %v", reason, d.Name, err))
	}
}
