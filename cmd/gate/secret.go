package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbsecret"
	"github.com/premigrate/premigrate/internal/exitcode"
)

// secretOptions are the flags of `gate secret`.
type secretOptions struct {
	k8s         k8sFlags
	name        string
	passwordKey string
	urlKey      string
	url         string
	length      int
}

func (o *secretOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.name, "name", "", "name of the Secret to fill (required; it must exist: the chart renders it without data)")
	fs.StringVar(&o.passwordKey, "password-key", "password", "the Secret's key of the password")
	fs.StringVar(&o.urlKey, "url-key", "url", "the Secret's key of the database URL")
	fs.StringVar(&o.url, "url", "", "the database URL, with "+dbsecret.Placeholder+" where the password goes (required)")
	fs.IntVar(&o.length, "length", 24, "the password's length, in letters and digits")
	o.k8s.register(fs)
}

// runSecret is `gate secret`: it fills the embedded database's Secret with a password and the URL made from it,
// unless it has a password already, which it never replaces.
func runSecret(ctx context.Context, o *secretOptions, e *env) error {
	if o.name == "" || o.url == "" {
		return cli.Usagef("--name and --url are required")
	}
	ns, clients, err := o.k8s.setup(e)
	if err != nil {
		return err
	}
	log := e.logger()
	out, err := dbsecret.Fill(ctx, clients.secrets(ns), dbsecret.Config{
		Name: o.name, PasswordKey: o.passwordKey, URLKey: o.urlKey, URL: o.url, Length: o.length,
	})
	if err != nil {
		log.Error(err.Error())
		return cli.Exit(exitcode.Failed, err)
	}
	switch out {
	case dbsecret.Filled:
		log.Info(fmt.Sprintf("secret %s/%s: a new password and the URL made from it, under the keys %s and %s", ns, o.name, o.passwordKey, o.urlKey))
	default:
		log.Info(fmt.Sprintf("secret %s/%s has a password already: kept, nothing changed", ns, o.name))
	}
	return nil
}
