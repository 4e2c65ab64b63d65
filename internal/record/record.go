// Package record keeps the durable success record of migrations: one ConfigMap
// whose keys are migration identities and whose values say when and by which
// Job each migration completed.
package record

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Entry is the value stored under an identity.
type Entry struct {
	CompletedAt time.Time
	Job         string
}

type wireEntry struct {
	CompletedAt string `json:"completedAt"`
	Job         string `json:"job"`
}

// Encode renders e as the JSON value stored in the ConfigMap.
func (e Entry) Encode() (string, error) {
	b, err := json.Marshal(wireEntry{CompletedAt: e.CompletedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Job: e.Job})
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
	return Entry{CompletedAt: t, Job: w.Job}, nil
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
	if keep <= 0 || len(data) <= keep {
		return nil
	}
	type dated struct {
		key string
		at  time.Time
	}
	others := make([]dated, 0, len(data))
	for k, v := range data {
		if k == identity {
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
