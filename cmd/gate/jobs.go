package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/migration"
	"github.com/premigrate/premigrate/internal/record"
)

// The flags of the commands the migration and contract Jobs run (package migration does the work).

// recordOptions are the flags that name the records, shared by the commands that read or write them.
type recordOptions struct {
	k8s      k8sFlags
	db       databaseFlags
	identity string
	records  string
	store    string
	job      string
	keep     int
	waitCM   time.Duration
	create   string
}

func (o *recordOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.identity, "identity", "", "migration identity that succeeded: the key to write (required)")
	fs.StringVar(&o.records, "records", "", "name of the records ConfigMap (required)")
	fs.StringVar(&o.store, "store", "",
		"name of the ConfigMap that keeps the records, outside the Helm release so that no apply strategy (helm --force, a replace) wipes them: "+
			"created when missing, owned by the object of --database-object (the records live as long as the data they describe), "+
			"by nothing when only --database-url-env names the database, else by the --records ConfigMap; it starts with the records kept there "+
			"before (empty: the records are kept in --records itself)")
	fs.StringVar(&o.job, "job", "", "name of the migration Job, stored with the record (required)")
	fs.IntVar(&o.keep, "keep", 20, "keep only the newest N records, by completion time; 0 keeps all")
	fs.DurationVar(&o.waitCM, "wait-for-configmap", 2*time.Minute,
		"retry this long while the API server fails or (without --create-records) the ConfigMap does not exist yet")
	fs.StringVar(&o.create, "create-records", "",
		`create the records ConfigMap when it is missing, with this metadata: {"labels":{...},"annotations":{...}} (the chart passes its own, Helm's ownership included, so Helm adopts it)`)
	o.db.register(fs)
	o.k8s.register(fs)
}

// prepare checks the flags and builds the configuration, the process's environment and the clients.
func (o *recordOptions) prepare(e *env) (*migration.Config, *migration.Env, migration.Clients, error) {
	if err := record.CheckIdentity(o.identity); err != nil {
		return nil, nil, migration.Clients{}, cli.Usagef("--%v", err)
	}
	switch {
	case o.records == "":
		return nil, nil, migration.Clients{}, cli.Usagef("--records is required")
	case o.job == "":
		return nil, nil, migration.Clients{}, cli.Usagef("--job is required")
	case o.keep < 0:
		return nil, nil, migration.Clients{}, cli.Usagef("--keep must be >= 0")
	case o.waitCM < 0:
		return nil, nil, migration.Clients{}, cli.Usagef("--wait-for-configmap must be >= 0")
	}
	spec, err := o.db.spec(e.getenv)
	if err != nil {
		return nil, nil, migration.Clients{}, &cli.UsageError{Err: err}
	}
	var meta *record.Metadata
	if o.create != "" {
		m, err := record.ParseMetadata(o.create)
		if err != nil {
			return nil, nil, migration.Clients{}, cli.Usagef("--create-records: %v", err)
		}
		meta = m
	}
	ns, clients, err := o.k8s.setup(e)
	if err != nil {
		return nil, nil, migration.Clients{}, err
	}
	cfg := &migration.Config{Namespace: ns, Identity: o.identity, Records: o.records, Store: o.store, Job: o.job, Keep: o.keep,
		WaitForConfigMap: o.waitCM, Create: meta, Database: spec}
	return cfg, &migration.Env{Streams: e.Streams, Getenv: e.getenv, Now: e.now, Log: e.logger()}, clients.migration(ns), nil
}

// runOptions are the flags and the command of `gate run`.
type runOptions struct {
	recordOptions
	run       migration.RunConfig
	workloads []string // --guard-workload, KIND/NAME
}

func (o *runOptions) register(fs *flag.FlagSet) {
	o.recordOptions.register(fs)
	fs.StringVar(&o.run.WaitForPostgres, "wait-for-postgres", "",
		"HOST:PORT of a PostgreSQL server: before running the command, wait until it accepts connections")
	fs.DurationVar(&o.run.WaitForPostgresTimeout, "wait-for-postgres-timeout", 10*time.Minute, "give up waiting for PostgreSQL after this long (exit 1)")
	fs.StringVar(&o.run.History, "history", "",
		"name of a ConfigMap that keeps the history of the runs (created when missing, owned by the --records ConfigMap): each run that "+
			"started the command adds when it started, its identity, Job and pod, its outcome and duration, and the last "+
			fmt.Sprint(record.TailLines)+" lines of its output, readable after the Job is gone (empty: no history)")
	fs.IntVar(&o.run.HistoryKeep, "history-keep", 10, "keep only the newest N runs in the --history ConfigMap (at least 1)")
	fs.Var(exitCodes{&o.run.FailFast}, "fail-fast-exit-codes",
		"exit codes of the migration command, comma-separated, that fail its Job at once (migration.failFastExitCodes): "+
			"the gate exits with them as they are. The command's other codes pass through too, except "+strconv.Itoa(exitcode.Refused)+
			", the gate's own refusal, which becomes 1 so that the Job retries it")
	fs.Var(argvFlag{&o.run.Check}, "check",
		`a command, as a JSON array (e.g. ["python","manage.py","migrate","--check"]), that asks the database whether this migration is applied: `+
			"exit 0 yes, any other exit no. Run when the identity is recorded on this database: when it says no (a database restored from a dump "+
			"taken before the migration), the migration runs again and is recorded anew. A check that cannot be started or does not answer within "+
			migration.CheckTimeout.String()+" fails the run")
	fs.Func("guard-workload",
		"KIND/NAME of a workload the guard at the API server watches (deployment, statefulset or daemonset; repeatable): once the "+
			"identity is recorded, set its annotation "+migration.RecordedAnnotation+" to the identities the records hold, so that the guard lets "+
			"the workload's update to this identity through; needs patch on it. A workload that does not exist yet (a first install) is left",
		func(v string) error {
			if err := migration.ParseWorkload(v); err != nil {
				return err
			}
			o.workloads = append(o.workloads, v)
			return nil
		})
}

// runRun is `gate run [flags] -- COMMAND [ARGS...]` (migration.Run, then migration.Guard).
func runRun(ctx context.Context, o *runOptions, e *env) error {
	switch {
	case len(o.run.Argv) == 0:
		return cli.Usagef("the migration command is required after --")
	case o.run.WaitForPostgresTimeout <= 0:
		return cli.Usagef("--wait-for-postgres-timeout must be > 0")
	case o.run.HistoryKeep < 1:
		return cli.Usagef("--history-keep must be at least 1, not %d", o.run.HistoryKeep)
	}
	cfg, me, clients, err := o.prepare(e)
	if err != nil {
		return err
	}
	if err := migration.Run(ctx, cfg, &o.run, me, clients); err != nil {
		return err
	}
	return migration.Guard(ctx, cfg, o.workloads, me, clients)
}

// contractOptions are the flags and the command of `gate contract`.
type contractOptions struct {
	recordOptions
	contract migration.ContractConfig
}

func (o *contractOptions) register(fs *flag.FlagSet) {
	o.recordOptions.register(fs)
	fs.StringVar(&o.contract.Deployment, "deployment", "", "name of the Deployment whose rollout to --identity must end before the contract runs (required)")
	fs.DurationVar(&o.contract.Soak, "soak", 0, "how long the rollout facts must hold without a break before the contract runs")
	fs.DurationVar(&o.contract.RolloutTimeout, "rollout-timeout", time.Hour, "give up waiting for the rollout after this long (exit 4; the contract did not run); 0 waits forever")
	fs.DurationVar(&o.contract.Interval, "interval", 2*time.Second, "time between two observations of the rollout")
}

// runContract is `gate contract [flags] -- COMMAND [ARGS...]` (migration.Contract).
func runContract(ctx context.Context, o *contractOptions, e *env) error {
	c := &o.contract
	switch {
	case len(c.Argv) == 0:
		return cli.Usagef("the contract command is required after --")
	case c.Deployment == "":
		return cli.Usagef("--deployment is required")
	case c.Soak < 0 || c.RolloutTimeout < 0 || c.Interval <= 0:
		return cli.Usagef("--soak and --rollout-timeout must be >= 0, --interval > 0")
	}
	cfg, me, clients, err := o.prepare(e)
	if err != nil {
		return err
	}
	return migration.Contract(ctx, cfg, c, me, clients)
}

// requireOptions are the flags of `gate require-contract`: --identity is the identity about to migrate and
// --job the check's own Job (for messages).
type requireOptions struct {
	recordOptions
}

// runRequireContract is `gate require-contract` (migration.RequireContract).
func runRequireContract(ctx context.Context, o *requireOptions, e *env) error {
	cfg, me, clients, err := o.prepare(e)
	if err != nil {
		return err
	}
	return migration.RequireContract(ctx, cfg, me, clients)
}

// argvFlag is a command given as one JSON array of strings (--check '["bin/rails","db:abort_if_pending_migrations"]'),
// so a chart renders it from a list without quoting rules of its own.
type argvFlag struct{ argv *[]string }

func (f argvFlag) String() string {
	if f.argv == nil || len(*f.argv) == 0 {
		return ""
	}
	b, _ := json.Marshal(*f.argv)
	return string(b)
}

func (f argvFlag) Set(s string) error {
	var argv []string
	if err := json.Unmarshal([]byte(s), &argv); err != nil {
		return fmt.Errorf("want a JSON array of strings, e.g. [\"migrate\",\"status\"]: %w", err)
	}
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("want a command: a JSON array whose first string names the executable")
	}
	*f.argv = argv
	return nil
}
