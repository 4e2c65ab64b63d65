// Package record keeps the durable success record of migrations: one ConfigMap
// whose keys are migration identities and whose values say when and by which
// Job each migration completed.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// PrunedKey is the key that lists the identities pruned from the records (--keep), oldest first, separated by
// spaces: a migration that once ran on this database but whose record is gone. It is no identity (those are 10
// hex characters). At most MaxPruned are kept.
const PrunedKey = "pruned"

// MaxPruned bounds the pruned list (11 bytes an identity).
const MaxPruned = 500

// Pruned lists the pruned identities of data, oldest first.
func Pruned(data map[string]string) []string {
	return strings.Fields(data[PrunedKey])
}

// WasPruned reports whether identity was recorded and later pruned.
func WasPruned(data map[string]string, identity string) bool {
	return slices.Contains(Pruned(data), identity)
}

// notePruned moves identity out of the pruned list (it is recorded again) and adds dropped to its end.
func notePruned(data map[string]string, identity string, dropped []string) {
	list := slices.DeleteFunc(Pruned(data), func(id string) bool { return id == identity || slices.Contains(dropped, id) })
	list = append(list, dropped...)
	if len(list) > MaxPruned {
		list = list[len(list)-MaxPruned:]
	}
	if len(list) == 0 {
		delete(data, PrunedKey)
		return
	}
	data[PrunedKey] = strings.Join(list, " ")
}

// Entry is the value stored under an identity.
type Entry struct {
	CompletedAt time.Time
	Job         string
	// Database names the database the migration ran on (dbid.ID's Value); empty in records made before
	// records were bound to their database, or by a gate given no database.
	Database string
	// JobCreated is the creation time of the Job that ran the migration: the order in which migrations were
	// deployed. Zero in records made before it was stored.
	JobCreated time.Time
}

type wireEntry struct {
	CompletedAt string `json:"completedAt"`
	Job         string `json:"job"`
	Database    string `json:"database,omitempty"`
	JobCreated  string `json:"jobCreated,omitempty"`
}

// Encode renders e as the JSON value stored in the ConfigMap.
func (e Entry) Encode() (string, error) {
	w := wireEntry{CompletedAt: e.CompletedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Job: e.Job, Database: e.Database}
	if !e.JobCreated.IsZero() {
		w.JobCreated = e.JobCreated.UTC().Format(time.RFC3339)
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("encode record: %w", err)
	}
	return string(b), nil
}

// Decode parses a stored value.
func Decode(value string) (Entry, error) {
	var w wireEntry
	if err := json.Unmarshal([]byte(value), &w); err != nil {
		return Entry{}, fmt.Errorf("decode record %q: %w", value, err)
	}
	t, err := time.Parse(time.RFC3339, w.CompletedAt)
	if err != nil {
		return Entry{}, fmt.Errorf("decode record %q: completedAt: %w", value, err)
	}
	e := Entry{CompletedAt: t, Job: w.Job, Database: w.Database}
	if w.JobCreated != "" {
		if e.JobCreated, err = time.Parse(time.RFC3339, w.JobCreated); err != nil {
			return Entry{}, fmt.Errorf("decode record %q: jobCreated: %w", value, err)
		}
	}
	return e, nil
}

// Lookup reports whether data records identity. The key's presence is what
// counts; the entry is decoded as far as possible (err says why not).
func Lookup(data map[string]string, identity string) (e Entry, found bool, err error) {
	value, ok := data[identity]
	if !ok {
		return Entry{}, false, nil
	}
	e, err = Decode(value)
	return e, true, err
}

// Prune returns the keys to drop so that at most keep entries remain, newest
// completedAt first; identity is always kept. Values that do not decode count
// as the oldest. keep <= 0 keeps everything.
func Prune(data map[string]string, identity string, keep int) []string {
	n := len(data)
	if _, ok := data[PrunedKey]; ok {
		n--
	}
	if keep <= 0 || n <= keep {
		return nil
	}
	type dated struct {
		key string
		at  time.Time
	}
	others := make([]dated, 0, len(data))
	for k, v := range data {
		if k == identity || k == PrunedKey {
			continue
		}
		e, err := Decode(v)
		if err != nil {
			e = Entry{}
		}
		others = append(others, dated{key: k, at: e.CompletedAt})
	}
	sort.Slice(others, func(i, j int) bool {
		if !others[i].at.Equal(others[j].at) {
			return others[i].at.After(others[j].at)
		}
		return others[i].key < others[j].key
	})
	room := keep
	if _, ok := data[identity]; ok {
		room--
	}
	if room >= len(others) {
		return nil
	}
	drop := make([]string, 0, len(others)-room)
	for _, d := range others[room:] {
		drop = append(drop, d.key)
	}
	sort.Strings(drop)
	return drop
}

// CheckIdentity rejects identities that cannot be keys of the records (ConfigMap keys).
func CheckIdentity(identity string) error {
	if identity == "" {
		return errors.New("identity is required")
	}
	if errs := validation.IsConfigMapKey(identity); len(errs) > 0 {
		return fmt.Errorf("identity %q is not a valid ConfigMap key: %s", identity, strings.Join(errs, "; "))
	}
	return nil
}
