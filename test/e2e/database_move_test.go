//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/test/framework"
)

// The scenario this file proves (the report lists it; a full run must run it once).
var databaseMovedOutScenario = scenarios.Declare(framework.ThisDatabase, framework.CI, "database-moved-to-external")

// A release starts on the embedded PostgreSQL, whose claim owns the records' store (the records go when the
// data goes), then moves to an external database: the upgrade migrates the external one and records it there.
// The old claim is left behind (a StatefulSet's claims outlive it) and an operator deletes it. The records of the
// external database must not go with it: the store's owner follows the database its records describe (none for
// a URL). Bound to the claim still (the mutant store-owner-stays), the garbage collector deletes the store with
// the claim, and the next upgrade with the same values runs the migration on the external database a second
// time. The evidence is the external database's own: demo_migrate_runs, and the app's starts (the witness).
func TestMovingToAnExternalDatabaseKeepsItsRecordsWhenTheOldClaimIsDeleted(t *testing.T) {
	share(t, weightOne, 120*time.Second)
	res := scenario(t, databaseMovedOutScenario, env.Helm3)
	ctx := context.Background()
	l := newLedger(t, env.Helm3) // its namespace, and a PostgreSQL with the Secret ledger-db
	r := env.NewRelease(t, l.ns, "app", env.Helm3)
	embedded := framework.Merge(framework.BaseValues(), map[string]any{"image": map[string]any{"tag": "v2"}})
	r.MustDeploy(embedded)
	claim := "data-" + r.Fullname() + "-postgresql-0"

	external := framework.Merge(embedded, map[string]any{
		"postgresql": map[string]any{"enabled": false},
		"database":   map[string]any{"existingSecret": "ledger-db", "existingSecretKey": "url"},
	})
	_, d := r.MustDeploy(external)
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	r.PsqlArgs = []string{"ledger-db", "psql", "-U", "ledger", "-d", "ledger"}
	id := r.AppIdentity(ctx)
	runs := fmt.Sprintf("select count(*) from demo_migrate_runs where identity = '%s'", id)
	if n := r.PsqlInt(runs); n != 1 {
		t.Fatalf("identity %s ran %d times on the external database after the move, want once", id, n)
	}

	// the operator deletes the embedded database's claim, and the garbage collector its dependents
	claims := env.Client.CoreV1().PersistentVolumeClaims(l.ns)
	if err := claims.Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the old claim %s: %v", claim, err)
	}
	framework.WaitUntil(t, "the old claim to be gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := claims.Get(ctx, claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// the collector acts within seconds of the owner's deletion: give it ample time to take the store
	gone := false
	for deadline := time.Now().Add(20 * time.Second); !gone && time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		_, err := env.Client.CoreV1().ConfigMaps(l.ns).Get(ctx, r.StoreName(), metav1.GetOptions{})
		gone = apierrors.IsNotFound(err)
	}
	if gone {
		t.Errorf("the records' store %s went with the old database's claim %s: the external database's records are lost", r.StoreName(), claim)
	}

	_, d = r.MustDeploy(external) // the same values
	res.DurationsSec = append(res.DurationsSec, d.Seconds())
	res.Upgrades = 3
	if n := r.PsqlInt(runs); n != 1 {
		t.Errorf("identity %s ran %d times on the external database, want once: its record went with the old claim", id, n)
	}
	onlyCurrentPods(ctx, r, id, 2)
	r.AssertWitness(ctx, id)
}
