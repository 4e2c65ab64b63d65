package migration

import (
	"context"
	"fmt"
	"time"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/policy"
)

// RequireContract is `gate require-contract`: the check that runs before the migration (its expand) of an
// identity that declares it must not run before the contract of the version it follows
// (migration.requirePreviousContract). It reads the records of this database: when the identity deployed last
// before --identity has not run its contract step, it refuses (exit 3) and says what to deploy first; it exits
// 0 when that contract ran, when no other identity is recorded on this database (a first install, a new
// database) and when --identity is recorded already (its migration will not run again).
func RequireContract(ctx context.Context, o *Config, e *Env, clients Clients) error {
	r := newRecorder(o, clients)
	log := e.Log
	if err := r.resolve(ctx, o.WaitForConfigMap, log); err != nil {
		return err
	}
	rs, err := r.where().Read(ctx, r.clients.ConfigMaps)
	data, from := rs.Data, rs.From
	if err != nil {
		err = fmt.Errorf("checking the contract before the migration of %s: reading the records: %w", o.Identity, err)
		log.Error(err.Error())
		return r.exitFor(ctx, err)
	}
	where := fmt.Sprintf("ConfigMap %s/%s", r.ns, from)
	d := policy.RequireContract(data, o.Identity, r.database)
	switch d.Reason {
	case policy.RecordedHere:
		log.Info(fmt.Sprintf("the migration of %s is recorded on this database already (%s): nothing to hold back", o.Identity, where))
		return nil
	case policy.NoPrevious:
		log.Info(fmt.Sprintf("no other migration is recorded on this database (%s): no contract to wait for; the migration of %s may run", where, o.Identity))
		return nil
	case policy.PreviousContracted:
		log.Info(fmt.Sprintf("the contract of %s, the identity deployed before %s, ran (Job %s at %s): the migration of %s may run",
			d.Other, o.Identity, d.Contract.Job, d.Contract.At.UTC().Format(time.RFC3339), o.Identity))
		return nil
	}
	prev, entry := d.Other, d.Entry
	err = fmt.Errorf("refusing the migration of %s: the identity deployed before it, %s (migrated by Job %s, completed %s), has not run its "+
		"contract step, and %s declares (migration.requirePreviousContract) that its migration must not run before that contract. "+
		"Deploy %s again until its contract ran (kubectl get jobs -l app.kubernetes.io/component=contract,premigrate.io/identity=%s; "+
		"its log says why it has not), then this version. If %s has no contract step, deploy this version with "+
		"migration.requirePreviousContract=false (%s)",
		o.Identity, prev, entry.Job, entry.CompletedAt.UTC().Format(time.RFC3339), o.Identity, prev, prev, prev, where)
	log.Error(err.Error())
	return cli.Exit(exitcode.Refused, err)
}
