package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/gate"
	"github.com/premigrate/premigrate/internal/record"
)

// waitOptions are the flags of `gate wait`.
type waitOptions struct {
	k8s      k8sFlags
	db       databaseFlags
	identity string
	records  string
	store    string
	job      string
	timeout  time.Duration
	progress time.Duration
	// then is the command run in place of the gate once the migration succeeded (after --), if any.
	then []string
}

func (o *waitOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.identity, "identity", "", "migration identity to wait for: a key of the records ConfigMap (required)")
	fs.StringVar(&o.records, "records", "", "name of the records ConfigMap written by gate record (required)")
	fs.StringVar(&o.store, "store", "",
		"name of the ConfigMap that keeps the records outside the Helm release (gate run --store): once it exists its records count, those of --records until then")
	fs.StringVar(&o.job, "job", "", "exact name of the migration Job of this identity (required): only that Job's Complete condition counts, never another Job's")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up after this long with exit code 4; 0 waits forever")
	fs.DurationVar(&o.progress, "progress-interval", 10*time.Second, "period of the progress lines")
	o.db.register(fs)
	o.k8s.register(fs)
}

// runWait is `gate wait`: it holds the app pod until the migration of its identity succeeded (exit 0, or
// the command after -- replaces the gate), failed (1) or the timeout passed (3).
func runWait(ctx context.Context, o *waitOptions, e *env) error {
	if err := record.CheckIdentity(o.identity); err != nil {
		return cli.Usagef("--%v", err)
	}
	if o.records == "" {
		return cli.Usagef("--records is required")
	}
	if o.job == "" {
		return cli.Usagef("--job is required")
	}
	if o.timeout < 0 || o.progress <= 0 {
		return cli.Usagef("--timeout must be >= 0 and --progress-interval > 0")
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
	limit := o.timeout
	if limit == 0 {
		limit = 24 * time.Hour
	}
	database, err := dbid.ResolveWithin(ctx, spec, clients.objects(ns), limit, log)
	if err != nil {
		log.Error(fmt.Sprintf("not starting the app: %v", err))
		if ctx.Err() != nil {
			return cli.Exit(exitcode.Interrupted, err)
		}
		return cli.Exit(exitcode.Timeout, err)
	}
	res, err := gate.Wait(ctx, gate.Config{
		Namespace:        ns,
		Identity:         o.identity,
		Records:          o.records,
		Store:            o.store,
		Job:              o.job,
		Database:         database,
		Timeout:          o.timeout,
		ProgressInterval: o.progress,
		Log:              log,
	}, clients.jobs(ns), clients.configMaps(ns))
	switch {
	case errors.Is(err, gate.ErrInvalidConfig):
		return &cli.UsageError{Err: err}
	case err != nil:
		log.Warn(fmt.Sprintf("interrupted: %v", err))
		return cli.Exit(exitcode.Interrupted, err)
	}
	switch res.Outcome {
	case gate.Succeeded:
		if len(o.then) == 0 {
			return nil
		}
		log.Info(fmt.Sprintf("starting %s", o.then[0]))
		err := e.exec(o.then)
		log.Error(fmt.Sprintf("starting %s: %v", o.then[0], err))
		return cli.Exit(exitcode.Failed, err)
	case gate.Failed:
		return cli.Exit(exitcode.Failed, errors.New(res.Summary))
	case gate.TimedOut:
		return cli.Exit(exitcode.Timeout, errors.New(res.Summary))
	default:
		err := fmt.Errorf("unexpected outcome %v", res.Outcome)
		log.Error(err.Error())
		return cli.Exit(exitcode.Failed, err)
	}
}
