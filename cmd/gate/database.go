package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbid"
)

// databaseFlags name the database the records are bound to (package dbid): the flags of `gate wait`, `gate run`
// and `gate record`.
type databaseFlags struct {
	object string
	urlEnv string
}

func (d *databaseFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.object, "database-object", "",
		"KIND/NAME of the object that holds the database's data (pod, or persistentvolumeclaim), in the namespace: "+
			"its UID names the database, so a record made before it was made again is not about it; needs get on it")
	fs.StringVar(&d.urlEnv, "database-url-env", "",
		"name of an environment variable that holds the database URL: a hash of its engine, hosts, ports and database "+
			"name names the database (not its user, password or options; the URL is never logged)")
}

// spec reads the flags and the environment into a dbid.Spec.
func (d *databaseFlags) spec(getenv func(string) string) (dbid.Spec, error) {
	s := dbid.Spec{Object: d.object}
	if d.object != "" {
		if _, _, err := dbid.ParseObject(d.object); err != nil {
			return dbid.Spec{}, fmt.Errorf("--database-object: %w", err)
		}
	}
	if d.urlEnv != "" {
		s.URL = getenv(d.urlEnv)
		if s.URL == "" {
			return dbid.Spec{}, fmt.Errorf("--database-url-env: the environment variable %s is empty or not set", d.urlEnv)
		}
	}
	return s, nil
}

// objectGetter reads the database's pod or claim in namespace ns.
func (c *apiClients) objectGetter(ns string) dbid.Getter {
	return func(ctx context.Context, kind, name string) (dbid.Object, error) {
		var (
			m   metav1.Object
			err error
		)
		switch kind {
		case dbid.KindPod:
			m, err = c.pods(ns).Get(ctx, name, metav1.GetOptions{})
		default:
			m, err = c.claims(ns).Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return dbid.Object{}, err
		}
		return dbid.Object{UID: string(m.GetUID()), Created: m.GetCreationTimestamp().Time}, nil
	}
}

// resolveDatabase names the database, retrying up to timeout while its object does not exist yet (a first
// install creates the database beside the migration and the app) or the API server fails.
func resolveDatabase(ctx context.Context, spec dbid.Spec, get dbid.Getter, timeout time.Duration, log *slog.Logger) (dbid.ID, error) {
	if spec.Empty() {
		return dbid.ID{}, nil
	}
	logf := cli.Logf(log)
	deadline := time.Now().Add(timeout)
	for delay := 500 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		id, err := dbid.Resolve(ctx, spec, get)
		if err == nil {
			if id.Note != "" {
				logf("note: %s", id.Note)
			}
			return id, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return dbid.ID{}, fmt.Errorf("naming the database the records are bound to (waited %s): %w", timeout, err)
		}
		hint := ""
		if apierrors.IsForbidden(err) {
			hint = " (the ServiceAccount's Role must allow get on it)"
		}
		logf("naming the database (retrying in %s): %v%s", delay, err, hint)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
}
