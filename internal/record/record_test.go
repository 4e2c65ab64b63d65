package record_test

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/premigrate/premigrate/internal/record"
)

func TestEntryEncodesAsTheDesignedJSON(t *testing.T) {
	e := record.Entry{CompletedAt: time.Date(2026, 1, 2, 3, 4, 5, 600_123_456, time.FixedZone("CET", 3600)), Job: "shop-app-migrate"}
	got, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"completedAt":"2026-01-02T02:04:05.600Z","job":"shop-app-migrate"}`; got != want {
		t.Errorf("Encode = %s, want %s", got, want)
	}
	back, err := record.Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !back.CompletedAt.Equal(e.CompletedAt.Truncate(time.Millisecond)) || back.Job != e.Job {
		t.Errorf("Decode(Encode(e)) = %+v, want %+v", back, e)
	}
}

func TestEntryStoresTheDatabaseItRanOnOnlyWhenItHasOne(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct{ database, want string }{
		{database: "", want: `{"completedAt":"2026-01-02T03:04:05.000Z","job":"j"}`},
		{database: "pod/db-0@u1", want: `{"completedAt":"2026-01-02T03:04:05.000Z","job":"j","database":"pod/db-0@u1"}`},
	} {
		got, err := record.Entry{CompletedAt: at, Job: "j", Database: c.database}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("Encode = %s, want %s", got, c.want)
		}
		back, err := record.Decode(got)
		if err != nil {
			t.Fatal(err)
		}
		if back.Database != c.database {
			t.Errorf("Decode(%s).Database = %q, want %q", got, back.Database, c.database)
		}
	}
}

func TestLookupCountsThePresenceOfTheKey(t *testing.T) {
	data := map[string]string{
		"good":   `{"completedAt":"2026-01-02T03:04:05Z","job":"j"}`,
		"broken": `not json`,
	}
	tests := []struct {
		identity  string
		found     bool
		decodeErr bool
	}{
		{identity: "good", found: true},
		{identity: "broken", found: true, decodeErr: true},
		{identity: "missing", found: false},
	}
	for _, tt := range tests {
		t.Run(tt.identity, func(t *testing.T) {
			e, found, err := record.Lookup(data, tt.identity)
			if found != tt.found || (err != nil) != tt.decodeErr {
				t.Fatalf("Lookup = %+v, %v, %v; want found=%v decodeErr=%v", e, found, err, tt.found, tt.decodeErr)
			}
		})
	}
}

func TestPruneKeepsTheNewestEntries(t *testing.T) {
	at := func(day int) string {
		return `{"completedAt":"2026-01-0` + string(rune('0'+day)) + `T00:00:00Z","job":"j"}`
	}
	data := map[string]string{
		"new":   at(9), // the identity being written
		"d1":    at(1),
		"d2":    at(2),
		"d3":    at(3),
		"d4a":   at(4),
		"d4b":   at(4),
		"junk":  `{`,
		"empty": ``,
	}
	tests := []struct {
		name string
		keep int
		drop []string
	}{
		{name: "keeps everything when keep is 0", keep: 0, drop: nil},
		{name: "keeps everything when there is room", keep: 8, drop: nil},
		{name: "drops undecodable values first", keep: 6, drop: []string{"empty", "junk"}},
		{name: "drops the oldest, ties by key", keep: 2, drop: []string{"d1", "d2", "d3", "d4b", "empty", "junk"}},
		{name: "always keeps the identity being written", keep: 1, drop: []string{"d1", "d2", "d3", "d4a", "d4b", "empty", "junk"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := record.Prune(data, "new", tt.keep); !reflect.DeepEqual(got, tt.drop) {
				t.Errorf("Prune(keep=%d) = %v, want %v", tt.keep, got, tt.drop)
			}
		})
	}
}

// logLines collects a logger's lines as "LEVEL message"; safe for concurrent use.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }

func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Level.String()+" "+r.Message)
	return nil
}

func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) logger() *slog.Logger { return slog.New(l) }

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
