package record

import "time"

// Previous returns the identity recorded in data whose migration was deployed last (its Job's creation, else
// its completion) among the identities other than identity for which keep returns true, with its entry: the
// version that a deploy of identity follows. ok is false when there is none. Entries that do not decode are
// left out; of two deployed in the same second, the greater identity is returned, so the answer never depends
// on the map's order.
func Previous(data map[string]string, identity string, keep func(Entry) bool) (id string, e Entry, ok bool) {
	var at time.Time
	for k, v := range data {
		if k == identity || k == PrunedKey {
			continue
		}
		entry, err := Decode(v)
		if err != nil || (keep != nil && !keep(entry)) {
			continue
		}
		d := deployedAt(entry)
		if !ok || d.After(at) || (d.Equal(at) && k > id) {
			id, e, at, ok = k, entry, d, true
		}
	}
	return id, e, ok
}
