package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/gate"
	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/internal/ungate"
)

// ungateOptions are the flags of `gate ungate`.
type ungateOptions struct {
	k8s      k8sFlags
	db       databaseFlags
	selector string
	gateName string
	records  string
	store    string
	retry    time.Duration
	progress time.Duration
}

func (o *ungateOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.selector, "selector", "", "label selector of the pods to release (required; never every pod of the namespace): the release's gated pods")
	fs.StringVar(&o.gateName, "scheduling-gate", ungate.SchedulingGate, "the scheduling gate that holds the pods: the one this command removes")
	fs.StringVar(&o.records, "records", "", "name of the records ConfigMap written by gate record (required)")
	fs.StringVar(&o.store, "store", "",
		"name of the ConfigMap that keeps the records outside the Helm release (gate run --store): once it exists its records count, those of --records until then")
	fs.DurationVar(&o.retry, "retry-after-failure", 15*time.Second, "after a migration failed or a wait ended in an error, ask again this much later (a new Job of the same name may succeed)")
	fs.DurationVar(&o.progress, "progress-interval", time.Minute, "period of the progress lines of each migration the pods wait for")
	o.db.register(fs)
	o.k8s.register(fs)
}

// runUngate is `gate ungate`: it runs until it is stopped, releasing each pod of --selector that carries the
// scheduling gate once the migration named by the pod's annotations succeeded (on this database), as gate
// wait decides it for one pod.
func runUngate(ctx context.Context, o *ungateOptions, e *env) error {
	if o.selector == "" {
		return cli.Usagef("--selector is required: the gate never watches every pod of the namespace")
	}
	sel, err := labels.Parse(o.selector)
	if err != nil {
		return cli.Usagef("--selector %q: %v", o.selector, err)
	}
	if sel.Empty() {
		return cli.Usagef("--selector %q selects every pod: name the release's gated pods", o.selector)
	}
	if o.records == "" {
		return cli.Usagef("--records is required")
	}
	if o.retry <= 0 || o.progress <= 0 {
		return cli.Usagef("--retry-after-failure and --progress-interval must be > 0")
	}
	spec, err := o.db.spec(e.getenv)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	ns, clients, err := o.k8s.setup(e)
	if err != nil {
		return err
	}
	log := e.logger()
	wait := func(ctx context.Context, identity, job string) (gate.Result, error) {
		if err := record.CheckIdentity(identity); err != nil {
			return gate.Result{}, err
		}
		database, err := dbid.ResolveWithin(ctx, spec, clients.objects(ns), 24*time.Hour, log)
		if err != nil {
			return gate.Result{}, err
		}
		return gate.Wait(ctx, gate.Config{
			Namespace:        ns,
			Identity:         identity,
			Records:          o.records,
			Store:            o.store,
			Job:              job,
			Database:         database,
			ProgressInterval: o.progress,
			Log:              log,
		}, clients.jobs(ns), clients.configMaps(ns))
	}
	err = ungate.Run(ctx, ungate.Config{
		Namespace:         ns,
		Selector:          sel,
		Gate:              o.gateName,
		Wait:              wait,
		Pods:              clients.heldPods(ns),
		Events:            clients.events(ns),
		RetryAfterFailure: o.retry,
		Instance:          e.getenv("POD_NAME"),
		Log:               log,
	})
	if ctx.Err() != nil {
		log.Info(fmt.Sprintf("stopping: %v", context.Cause(ctx)))
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	log.Error(err.Error())
	return cli.Exit(exitcode.Failed, err)
}
