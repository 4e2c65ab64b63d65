package migrate_test

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/premigrate/premigrate/internal/demo/migrate"
)

func TestEmbeddedMigrationsRunFromOneToEightAndOnlyVersionSixIsDestructive(t *testing.T) {
	ms, err := migrate.Embedded()
	if err != nil {
		t.Fatalf("load embedded migrations: %v", err)
	}
	if got := migrate.Latest(ms); got != 8 {
		t.Fatalf("newest embedded migration is %d, want 8", got)
	}
	for _, m := range ms {
		wantDrops := []string(nil)
		if m.Version == 6 {
			wantDrops = []string{"drops column records.source"}
		}
		if !slices.Equal(m.Drops, wantDrops) {
			t.Errorf("version %d (%s) drops %q, want %q", m.Version, m.Name, m.Drops, wantDrops)
		}
		if strings.TrimSpace(m.SQL) == "" {
			t.Errorf("version %d has no SQL", m.Version)
		}
	}
}

func TestLoadReadsVersionNameAndDestructiveHeaders(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_second.sql": {Data: []byte("-- destructive: drops table a\n-- DESTRUCTIVE: drops column b.c\nDROP TABLE a;")},
		"m/0001_first.sql":  {Data: []byte("CREATE TABLE a (id int);")},
		"m/README.md":       {Data: []byte("not a migration")},
	}
	ms, err := migrate.Load(fsys, "m")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(ms) != 2 || ms[0].Version != 1 || ms[0].Name != "first" || ms[1].Version != 2 || ms[1].Name != "second" {
		t.Fatalf("got %+v, want versions 1 (first) and 2 (second) in order", ms)
	}
	if ms[0].Destructive() {
		t.Errorf("version 1 is marked destructive")
	}
	if want := []string{"drops table a", "drops column b.c"}; !slices.Equal(ms[1].Drops, want) {
		t.Errorf("version 2 drops %q, want %q", ms[1].Drops, want)
	}
}

func TestLoadRejectsAmbiguousMigrationSets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"a gap in the versions", map[string]string{"0001_a.sql": "", "0003_c.sql": ""}, "version 2 is missing"},
		{"two files for one version", map[string]string{"0001_a.sql": "", "001_b.sql": ""}, "both claim version 1"},
		{"a name that is not VERSION_NAME.sql", map[string]string{"first.sql": ""}, "must look like"},
		{"version zero", map[string]string{"0000_zero.sql": ""}, "positive"},
		{"a destructive header that names nothing", map[string]string{"0001_a.sql": "-- destructive:\nDROP TABLE x;"}, "must say what is dropped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, body := range tc.files {
				fsys["m/"+name] = &fstest.MapFile{Data: []byte(body)}
			}
			_, err := migrate.Load(fsys, "m")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
