package schema_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/premigrate/premigrate/internal/demo/schema"
	"github.com/premigrate/premigrate/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestABinaryRunsOnItsOwnSchemaAndTheNextOne(t *testing.T) {
	for _, tc := range []struct {
		app, schema int
		compatible  bool
	}{
		{app: 3, schema: 1, compatible: false},
		{app: 3, schema: 2, compatible: false},
		{app: 3, schema: 3, compatible: true},
		{app: 3, schema: 4, compatible: true},
		{app: 3, schema: 5, compatible: false},
		{app: 1, schema: 0, compatible: false},
	} {
		if got := schema.Compatible(tc.app, tc.schema); got != tc.compatible {
			t.Errorf("Compatible(app %d, schema %d) = %v, want %v", tc.app, tc.schema, got, tc.compatible)
		}
	}
}

func TestVersionIsZeroWithoutBookkeepingTableAndTheHighestAppliedOtherwise(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()

	if v, err := schema.Version(ctx, conn); err != nil || v != 0 {
		t.Errorf("without schema_migrations: version %d, error %v; want 0, nil", v, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE schema_migrations (version int)"); err != nil {
		t.Fatal(err)
	}
	if v, err := schema.Version(ctx, conn); err != nil || v != 0 {
		t.Errorf("with an empty schema_migrations: version %d, error %v; want 0, nil", v, err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO schema_migrations VALUES (1), (3), (2)"); err != nil {
		t.Fatal(err)
	}
	if v, err := schema.Version(ctx, conn); err != nil || v != 3 {
		t.Errorf("with versions 1..3: version %d, error %v; want 3, nil", v, err)
	}
}
