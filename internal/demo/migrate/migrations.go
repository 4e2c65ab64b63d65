package migrate

import (
	"bufio"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed sql/*.sql
var embedded embed.FS

// Migration is one schema version: the SQL that moves the schema from Version-1 to Version.
type Migration struct {
	Version int
	// Name is the descriptive part of the file name, e.g. "add_records_author".
	Name string
	SQL  string
	// Drops lists what the migration destroys, one entry per "-- destructive:" header line
	// (e.g. "drops column records.source"). Empty for a migration that loses no data.
	Drops []string
}

// Destructive reports whether applying the migration loses data.
func (m Migration) Destructive() bool { return len(m.Drops) > 0 }

// fileName matches "0001_create_records.sql": the version, then a lower-case name.
var fileName = regexp.MustCompile(`^([0-9]+)_([a-z0-9_]+)\.sql$`)

// destructiveHeader is the comment that marks a migration as destructive.
const destructiveHeader = "-- destructive:"

// Embedded returns the migrations compiled into the binary, ordered by version.
func Embedded() ([]Migration, error) {
	return Load(embedded, "sql")
}

// Latest returns the highest version among migrations (which Load returns ordered).
func Latest(migrations []Migration) int {
	if len(migrations) == 0 {
		return 0
	}
	return migrations[len(migrations)-1].Version
}

// Load reads every *.sql file of dir in fsys. File names are VERSION_NAME.sql; versions must
// run 1, 2, 3... without gaps or duplicates, so the order of application is unambiguous.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("list migrations in %s: %w", dir, err)
	}
	var migrations []Migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		match := fileName.FindStringSubmatch(e.Name())
		if match == nil {
			return nil, fmt.Errorf("migration file %q: name must look like 0001_some_name.sql", e.Name())
		}
		version, err := strconv.Atoi(match[1])
		if err != nil || version < 1 {
			return nil, fmt.Errorf("migration file %q: version must be a positive number", e.Name())
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("migration files %q and %q both claim version %d", other, e.Name(), version)
		}
		seen[version] = e.Name()
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", e.Name(), err)
		}
		drops, err := parseDrops(string(body))
		if err != nil {
			return nil, fmt.Errorf("migration file %q: %w", e.Name(), err)
		}
		migrations = append(migrations, Migration{Version: version, Name: match[2], SQL: string(body), Drops: drops})
	}
	sort.Slice(migrations, func(i, j int) bool { return migrations[i].Version < migrations[j].Version })
	for i, m := range migrations {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration versions must run 1, 2, 3... without gaps: version %d is missing", i+1)
		}
	}
	return migrations, nil
}

// parseDrops collects the "-- destructive: ..." header lines.
func parseDrops(sql string) ([]string, error) {
	var drops []string
	sc := bufio.NewScanner(strings.NewReader(sql))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(strings.ToLower(line), destructiveHeader) {
			continue
		}
		what := strings.TrimSpace(line[len(destructiveHeader):])
		if what == "" {
			return nil, fmt.Errorf("%q header must say what is dropped, e.g. %q", destructiveHeader, destructiveHeader+" drops column t.c")
		}
		drops = append(drops, what)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scan SQL: %w", err)
	}
	return drops, nil
}
