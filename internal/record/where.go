package record

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Where names the ConfigMaps of one release's records. Anchor is the release's own ConfigMap (a Helm object:
// the gate gives it Helm's ownership, Helm may replace it); Store is the ConfigMap outside the release that
// keeps the records once it exists, so that no apply strategy wipes them ("": the records are kept in Anchor).
// Until the store exists, the records in Anchor count (a release from before the store, or one whose first
// migration has not run). Nothing outside this package decides which of the two holds the records.
type Where struct {
	Anchor, Store string
}

// Holder is the name of the ConfigMap the gate writes the records to, and takes the lock on: the store when
// there is one, else the anchor.
func (w Where) Holder() string {
	if w.Store != "" {
		return w.Store
	}
	return w.Anchor
}

// Records are the records that count, as read.
type Records struct {
	// Data is the records (nil: no ConfigMap holds any yet), From the name of the ConfigMap they were read from.
	Data map[string]string
	From string
}

// Choose is the rule on the two ConfigMaps as listed (nil: it does not exist): the store's records once it
// exists, else the anchor's. known reports whether the answer is final: a watcher that has listed only one of
// the two cannot tell yet (a record in the anchor may be one the store already superseded).
func (w Where) Choose(anchor, store *corev1.ConfigMap, anchorListed, storeListed bool) (r Records, known bool) {
	switch {
	case w.Store == "":
		return records(anchor, w.Anchor), anchorListed
	case store != nil:
		return records(store, w.Store), true
	}
	return records(anchor, w.Anchor), anchorListed && storeListed
}

func records(cm *corev1.ConfigMap, name string) Records {
	if cm == nil {
		return Records{From: name}
	}
	data := cm.Data
	if data == nil {
		data = map[string]string{}
	}
	return Records{Data: data, From: name}
}

// Read reads the records that count with client (Choose on what the API server has now).
func (w Where) Read(ctx context.Context, client ConfigMapClient) (Records, error) {
	return w.read(ctx, client, nil, false)
}

// ReadWith is Read with the anchor as the caller already read it (nil: it does not exist).
func (w Where) ReadWith(ctx context.Context, client ConfigMapClient, anchor *corev1.ConfigMap) (Records, error) {
	return w.read(ctx, client, anchor, true)
}

func (w Where) read(ctx context.Context, client ConfigMapClient, anchor *corev1.ConfigMap, anchorRead bool) (Records, error) {
	if w.Store != "" {
		store, err := getOrNil(ctx, client, w.Store)
		if err != nil {
			return Records{}, err
		}
		if store != nil {
			r, _ := w.Choose(nil, store, false, true)
			return r, nil
		}
	}
	if !anchorRead {
		var err error
		if anchor, err = getOrNil(ctx, client, w.Anchor); err != nil {
			return Records{}, err
		}
	}
	r, _ := w.Choose(anchor, nil, true, true)
	return r, nil
}

// getOrNil gets the ConfigMap called name; nil when it does not exist.
func getOrNil(ctx context.Context, client ConfigMapClient, name string) (*corev1.ConfigMap, error) {
	cm, err := client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get ConfigMap %s: %w", name, err)
	}
	return cm, nil
}
