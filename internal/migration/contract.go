package migration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/child"
	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/policy"
	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/internal/rollout"
	"github.com/premigrate/premigrate/internal/ungate"
)

// ContractConfig is what `gate contract` runs, and when, beside its Config.
type ContractConfig struct {
	// Deployment is the Deployment whose rollout to the identity must end before the contract runs.
	Deployment string
	// Soak is how long the rollout facts must hold without a break; RolloutTimeout how long to wait for them
	// (0: forever); Interval the time between two observations.
	Soak, RolloutTimeout, Interval time.Duration
	// Argv is the contract command.
	Argv []string
}

// contractor is what `gate contract` needs once its flags are checked.
type contractor struct {
	*recorder
	cc  *ContractConfig
	src rollout.Source
	log *slog.Logger
	// dep is the Deployment as last observed under the lock: the contract's Events are about it
	dep *appsv1.Deployment
}

// Contract is `gate contract [flags] -- COMMAND [ARGS...]`: the contract step of an identity (what drops the
// schema that older versions still use). It runs the command only when the rollout of the Deployment to the
// identity has ended with nothing of another identity running or terminating (rollout.Evaluate) for --soak, and
// then the identity's migration is recorded on this database and its contract is not; it checks those facts again under
// the release's migration lock right before the command starts, and records the contract step in the
// identity's record once the command exits 0. When the Deployment left the identity (a rollback, a revert, a
// newer version), the command never runs and the gate exits 0: the contract belongs to the identity that
// serves.
func Contract(ctx context.Context, cfg *Config, o *ContractConfig, e *Env, clients Clients) error {
	r := newRecorder(cfg, clients)
	r.started = e.Now()
	c := &contractor{recorder: r, cc: o, log: e.Log, src: clients.Rollout(o.Deployment)}
	if err := r.resolve(ctx, cfg.WaitForConfigMap, c.log); err != nil {
		return err
	}
	for {
		// the rollout first: in job mode (and under Argo CD) the contract Job may start before the migration of
		// its identity is recorded, and the rollout cannot end before it is (the pods wait for it)
		v, err := rollout.Wait(ctx, rollout.WaitConfig{Identity: cfg.Identity, Soak: o.Soak, Timeout: o.RolloutTimeout, Interval: o.Interval, Log: c.log}, c.src)
		switch {
		case errors.Is(err, rollout.ErrTimeout):
			err = fmt.Errorf("not running the contract of %s: %w", cfg.Identity, err)
			c.log.Error(err.Error())
			return cli.Exit(exitcode.Timeout, err)
		case err != nil:
			return r.exitFor(ctx, err)
		case v.State == rollout.Left:
			c.log.Info(fmt.Sprintf("not running the contract of %s, and never while another identity serves: %s", cfg.Identity, v.Reason))
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
	rs, err := c.where().Read(ctx, c.clients.ConfigMaps)
	if err != nil {
		err = fmt.Errorf("not running the contract of %s: reading the records: %w", c.o.Identity, err)
		c.log.Error(err.Error())
		return true, c.exitFor(ctx, err)
	}
	return c.decideOn(rs.Data, rs.From)
}

// decideOn is decide on records already read (from names their ConfigMap).
func (c *contractor) decideOn(data map[string]string, from string) (bool, error) {
	switch d := policy.Contract(data, c.o.Identity, c.database); d.Verdict {
	case policy.Refuse:
		err := fmt.Errorf("not running the contract of %s: its migration is not recorded on this database (ConfigMap %s/%s): "+
			"a contract runs only after the migration it completes", c.o.Identity, c.ns, from)
		c.log.Error(err.Error())
		return true, cli.Exit(exitcode.Refused, err)
	case policy.Done:
		c.log.Info(fmt.Sprintf("the contract of %s already ran (Job %s at %s): nothing to do", c.o.Identity, d.Contract.Job,
			d.Contract.At.UTC().Format(time.RFC3339)))
		return true, nil
	}
	return false, nil
}

// lock takes the release's migration lock and checks the records and the rollout again under it. It returns
// the lock when the contract may run, nil (and done=false) when the rollout facts broke meanwhile, and done=true
// with the exit when it must not run at all.
func (c *contractor) lock(ctx context.Context, e *Env) (*record.Lock, bool, error) {
	created, uid, _ := c.readJob(ctx, c.log)
	l, cm, err := record.Acquire(ctx, c.clients.ConfigMaps, record.LockOptions{
		Namespace:        c.ns,
		ConfigMap:        c.recordsAt(),
		Holder:           record.Holder{Identity: c.o.Identity, Job: c.o.Job, JobUID: uid, JobCreated: created, Pod: e.Getenv("HOSTNAME")},
		WaitForConfigMap: c.o.WaitForConfigMap,
		Running:          holderRunning(c.clients.Pods),
		Now:              e.Now,
		Log:              c.log,
	})
	if err != nil {
		err = fmt.Errorf("not running the contract of %s: %w", c.o.Identity, err)
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
	switch v := rollout.Evaluate(o, c.o.Identity); v.State {
	case rollout.Done:
		c.log.Info(fmt.Sprintf("under the release's migration lock the rollout facts still hold: %s", v.Reason))
		c.dep = o.Deployment
		return l, false, nil
	case rollout.Left:
		release()
		c.log.Info(fmt.Sprintf("not running the contract of %s, and never while another identity serves: %s", c.o.Identity, v.Reason))
		return nil, true, nil
	default:
		release()
		c.log.Info(fmt.Sprintf("the rollout facts broke while the lock was taken (%s): waiting again", v.Reason))
		return nil, false, nil
	}
}

// run runs the contract command under lock and records the contract step when it exits 0.
func (c *contractor) run(ctx context.Context, e *Env, lock *record.Lock) error {
	defer func() {
		if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
			c.log.Warn(fmt.Sprintf("warning: %v: the next migration of this release waits until the lock expires", err))
		}
	}()
	// The start is recorded before the command runs: from then on the schema may change under the code of the
	// identities deployed before this one, so their pods are refused (policy.ContractedAfter), whether the
	// command then succeeds, fails or is stopped halfway; a rollback during the contract starts none of them.
	o := record.ContractOptions{Namespace: c.ns, ConfigMap: c.recordsAt(), Identity: c.o.Identity, Job: c.o.Job, Retry: c.o.WaitForConfigMap, Now: e.Now, Log: c.log}
	if err := record.WriteContractStarted(ctx, c.clients.ConfigMaps, o); err != nil {
		err = fmt.Errorf("not running the contract of %s: its start could not be recorded, and the older identities' pods must be refused "+
			"before it runs: %w", c.o.Identity, err)
		c.log.Error(err.Error())
		c.tell(ctx, corev1.EventTypeWarning, reasonContractFailed, err.Error())
		return c.exitFor(ctx, err)
	}
	// as for a migration (gate run), a lock that cannot be renewed never stops the command halfway
	start := e.Now()
	code := child.Run(ctx, c.cc.Argv, e.Streams, c.log)
	took := e.Now().Sub(start).Round(time.Millisecond)
	end := policy.Conclude(policy.Ended{Code: code, LockLost: lost(lock), Stopped: ctx.Err() != nil})
	var err error
	switch end.Reason {
	case policy.LockLost:
		err = fmt.Errorf("contract command %q exited %d after %s, but the lock was lost while it ran: not recording it; the next run repeats it", c.cc.Argv[0], code, took)
		c.tell(ctx, corev1.EventTypeWarning, reasonContractFailed, err.Error())
	case policy.CommandFailed:
		err = fmt.Errorf("contract command %q exited %d after %s: nothing recorded; the running pods are untouched, and the next deploy of %s runs it again",
			c.cc.Argv[0], code, took, c.o.Identity)
		c.tell(ctx, corev1.EventTypeWarning, reasonContractFailed, fmt.Sprintf("the contract of identity %s (Job %s) failed: %v", c.o.Identity, c.o.Job, err))
	case policy.Stopped:
		err = fmt.Errorf("contract command %q exited 0 after %s, but the gate was asked to stop while it ran: not recording it; the next run repeats it", c.cc.Argv[0], took)
		c.tell(ctx, corev1.EventTypeWarning, reasonContractFailed, err.Error())
	}
	if !end.Record {
		c.log.Error(err.Error())
		return exitOf(end, code, nil, err, c.log)
	}
	cli.Logf(c.log)("contract command %q succeeded in %s", c.cc.Argv[0], took)
	err = record.WriteContracted(ctx, c.clients.ConfigMaps, o)
	if err != nil {
		c.log.Error(err.Error())
		c.tell(ctx, corev1.EventTypeWarning, reasonContractFailed, fmt.Sprintf("the contract of identity %s (Job %s) ran but could not be recorded: %v", c.o.Identity, c.o.Job, err))
		return c.exitFor(ctx, err)
	}
	c.tell(ctx, corev1.EventTypeNormal, reasonContractCompleted, fmt.Sprintf("the contract of identity %s (Job %s) ran in %s, after the rollout left nothing older, and is recorded", c.o.Identity, c.o.Job, took))
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
	if c.dep == nil || c.clients.Events == nil {
		return
	}
	if len(message) > 1000 {
		message = message[:1000] + "..."
	}
	now := metav1.Now()
	d := c.dep
	_, err := c.clients.Events.Create(context.WithoutCancel(ctx), &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: d.Name + ".", Namespace: c.ns},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: d.Name, UID: d.UID, ResourceVersion: d.ResourceVersion,
		},
		Reason:              reason,
		Message:             message,
		Type:                typ,
		Source:              corev1.EventSource{Component: "premigrate-gate"},
		ReportingController: "premigrate.io/gate",
		ReportingInstance:   c.o.Job,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}, metav1.CreateOptions{FieldManager: ungate.FieldManager})
	if err != nil {
		c.log.Warn(fmt.Sprintf("posting the Event %s on Deployment %s: %v", reason, d.Name, err))
	}
}
