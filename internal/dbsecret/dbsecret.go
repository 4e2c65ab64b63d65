// Package dbsecret fills the embedded database's Secret in the cluster: a password made once, on the first
// start, never replaced, and the database URL made from it. It is how a chart rendered without a cluster (helm
// template, Argo CD, kubectl apply) gets a password that stays the same on every render: the render carries the
// Secret without data, and the password exists only in the cluster.
package dbsecret

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Placeholder is what the URL template holds where the password goes.
const Placeholder = "{password}"

// alphabet is the password's: letters and digits, so that it needs no escaping in a URL's user information.
const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// Client reads and updates the Secrets of one namespace.
type Client interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
	Update(ctx context.Context, secret *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error)
}

// Config says which Secret to fill and how.
type Config struct {
	// Name is the Secret's name. The chart renders it (without data), so the filler needs no right to create
	// Secrets: only get and update of this one name.
	Name string
	// PasswordKey and URLKey are the keys the password and the URL go to.
	PasswordKey, URLKey string
	// URL is the database URL with Placeholder where the password goes.
	URL string
	// Length is the password's length.
	Length int
	// Random is the source of the password's randomness (crypto/rand.Reader when nil).
	Random func([]byte) (int, error)
}

// Outcome is what Fill did.
type Outcome string

// The outcomes of Fill.
const (
	// Filled: the Secret had no password; it has one now, and the URL made from it.
	Filled Outcome = "filled"
	// Kept: the Secret had a password (an earlier run, or one of yours); nothing was changed. A password
	// is never replaced: the database keeps the one it was created with.
	Kept Outcome = "kept"
)

// Fill gives the Secret a password and the URL made from it, unless it has a password already. An update that
// conflicts (another run filled it first) is read again, and then kept.
func Fill(ctx context.Context, c Client, cfg Config) (Outcome, error) {
	if err := cfg.check(); err != nil {
		return "", err
	}
	for attempt := 0; ; attempt++ {
		s, err := c.Get(ctx, cfg.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("secret %s does not exist: the chart renders it (without data) beside this Job; apply it too", cfg.Name)
		}
		if err != nil {
			return "", fmt.Errorf("reading secret %s: %w", cfg.Name, err)
		}
		if len(s.Data[cfg.PasswordKey]) > 0 || s.StringData[cfg.PasswordKey] != "" {
			return Kept, nil
		}
		password, err := cfg.password()
		if err != nil {
			return "", err
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[cfg.PasswordKey] = []byte(password)
		s.Data[cfg.URLKey] = []byte(strings.ReplaceAll(cfg.URL, Placeholder, password))
		_, err = c.Update(ctx, s, metav1.UpdateOptions{FieldManager: "premigrate-gate"})
		switch {
		case err == nil:
			return Filled, nil
		case apierrors.IsConflict(err) && attempt < 5:
			continue // changed since it was read: read it again (filled by another run: kept)
		default:
			return "", fmt.Errorf("updating secret %s: %w", cfg.Name, err)
		}
	}
}

func (cfg Config) check() error {
	switch {
	case cfg.Name == "":
		return errors.New("the Secret's name is empty")
	case cfg.PasswordKey == "" || cfg.URLKey == "" || cfg.PasswordKey == cfg.URLKey:
		return fmt.Errorf("the password key %q and the URL key %q must be two keys", cfg.PasswordKey, cfg.URLKey)
	case strings.Count(cfg.URL, Placeholder) != 1:
		return fmt.Errorf("the URL %q must hold %s once, where the password goes", cfg.URL, Placeholder)
	case cfg.Length < 16 || cfg.Length > 128:
		return fmt.Errorf("the password length %d is not between 16 and 128", cfg.Length)
	}
	return nil
}

// password draws Length characters of alphabet, uniformly (bytes of 248 and above are drawn again).
func (cfg Config) password() (string, error) {
	read := cfg.Random
	if read == nil {
		read = rand.Read
	}
	out := make([]byte, 0, cfg.Length)
	buf := make([]byte, cfg.Length)
	for len(out) < cfg.Length {
		if _, err := read(buf); err != nil {
			return "", fmt.Errorf("drawing a password: %w", err)
		}
		for _, b := range buf {
			if int(b) < 256-256%len(alphabet) && len(out) < cfg.Length {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}
	return string(out), nil
}
