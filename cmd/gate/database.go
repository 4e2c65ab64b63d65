package main

import (
	"flag"
	"fmt"

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
