package record

import (
	"maps"
	"time"
)

// MaxConfigMapBytes is what the API server lets a ConfigMap's data hold (keys and values together).
const MaxConfigMapBytes = 1 << 20

// roomMargin is kept free below MaxConfigMapBytes: the largest entry and pruned note this package writes, and
// space for a longer Job name or database than estimated.
const roomMargin = 4 << 10

// Size is the bytes a ConfigMap's data takes against MaxConfigMapBytes.
func Size(data map[string]string) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
}

// Room reports whether recording identity in data, keeping keep entries (<= 0: all), leaves the ConfigMap under
// what the API server accepts, and how large it would be. It is asked before a migration runs: a migration that
// runs and then cannot be recorded has run unrecorded, and its pods wait for a record that never comes.
func Room(data map[string]string, identity, job, database string, keep int) (size int, fits bool) {
	after := maps.Clone(data)
	if after == nil {
		after = map[string]string{}
	}
	// the entry as Write makes it, with the longest time stamps
	value, _ := Entry{CompletedAt: time.Date(2006, 1, 2, 15, 4, 5, 999e6, time.UTC), Job: job, Database: database,
		JobCreated: time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)}.Encode()
	after[identity] = value
	dropped := Prune(after, identity, keep)
	for _, k := range dropped {
		delete(after, k)
	}
	notePruned(after, identity, dropped)
	size = Size(after)
	return size, size+roomMargin <= MaxConfigMapBytes
}

// RoomHint says what frees room, for a refusal's message.
func RoomHint(keep int) string {
	if keep <= 0 {
		return "it keeps every record (keepRecords 0): set migration.keepRecords (library: keepRecords) to a bound such as 20, which prunes the oldest on the next run"
	}
	return "lower migration.keepRecords (library: keepRecords), or remove from that ConfigMap the records of identities no workload runs any more"
}
