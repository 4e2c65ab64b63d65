package main

import (
	"context"
	"fmt"
	"time"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/policy"
)

// requireOptions are the flags of `gate require-contract`: those of `gate record`, whose --identity is the
// identity about to migrate and whose --job is the check's own Job (for messages).
type requireOptions struct {
	recordOptions
}

// runRequireContract is `gate require-contract`: the check that runs before the migration (its expand) of an
// identity that declares it must not run before the contract of the version it follows
// (migration.requirePreviousContract). It reads the records of this database: when the identity deployed last
// before --identity has not run its contract step, it refuses (exit 3) and says what to deploy first; it exits
// 0 when that contract ran, when no other identity is recorded on this database (a first install, a new
// database) and when --identity is recorded already (its migration will not run again).
func runRequireContract(ctx context.Context, o *requireOptions, e *env) error {
	r, err := o.prepare(e)
	if err != nil {
		return err
	}
	log := e.logger()
	if err := r.resolve(ctx, o.waitCM, log); err != nil {
		return err
	}
	rs, err := r.where().Read(ctx, r.clients.configMaps(r.ns))
	data, from := rs.Data, rs.From
	if err != nil {
		err = fmt.Errorf("checking the contract before the migration of %s: reading the records: %w", o.identity, err)
		log.Error(err.Error())
		return r.exitFor(ctx, err)
	}
	where := fmt.Sprintf("ConfigMap %s/%s", r.ns, from)
	d := policy.RequireContract(data, o.identity, r.database)
	switch d.Reason {
	case policy.RecordedHere:
		log.Info(fmt.Sprintf("the migration of %s is recorded on this database already (%s): nothing to hold back", o.identity, where))
		return nil
	case policy.NoPrevious:
		log.Info(fmt.Sprintf("no other migration is recorded on this database (%s): no contract to wait for; the migration of %s may run", where, o.identity))
		return nil
	case policy.PreviousContracted:
		log.Info(fmt.Sprintf("the contract of %s, the identity deployed before %s, ran (Job %s at %s): the migration of %s may run",
			d.Other, o.identity, d.Contract.Job, d.Contract.At.UTC().Format(time.RFC3339), o.identity))
		return nil
	}
	prev, entry := d.Other, d.Entry
	err = fmt.Errorf("refusing the migration of %s: the identity deployed before it, %s (migrated by Job %s, completed %s), has not run its "+
		"contract step, and %s declares (migration.requirePreviousContract) that its migration must not run before that contract. "+
		"Deploy %s again until its contract ran (kubectl get jobs -l app.kubernetes.io/component=contract,premigrate.io/identity=%s; "+
		"its log says why it has not), then this version. If %s has no contract step, deploy this version with "+
		"migration.requirePreviousContract=false (%s)",
		o.identity, prev, entry.Job, entry.CompletedAt.UTC().Format(time.RFC3339), o.identity, prev, prev, prev, where)
	log.Error(err.Error())
	return cli.Exit(exitRefused, err)
}
