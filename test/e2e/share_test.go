//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/premigrate/premigrate/test/e2e/schedule"
)

// The cluster tests share one kind cluster on a machine of two cores. Every scenario runs in parallel and says
// what it takes of the cluster (its weight) and how long it typically runs (its place in the queue: the whole-
// cluster ones first, then the longest); at most E2E_CAPACITY weight runs at once (default defaultCapacity), so a
// run ends when its longest chain ends, not when the sum of its scenarios does. go test's own -parallel is set
// high in the Makefile: the scheduler is the limit.
//
// The machine is CPU-bound, not latency-bound: one scenario of the demo chart alone keeps the two cores 68%
// busy (TestADestructiveMigrationIsRefusedUntilTheOperatorAcceptsDataLoss, 2026-12-02: 74 CPU-s in 55 s), and
// four at once held them at 99% (CPU pressure 95%), made each two to three times slower, got the throughput up
// by a third at most and failed a rollback's load (24 of 4611 requests). Three at once passed every run since
// 2026-12-03 (20m20s and 20m4s for the suite, against 27m43s with two; no request of a load failed), so three
// (make test-e2e's E2E_CAPACITY), and a scenario that counts failed requests of a load takes the whole
// cluster: beside other scenarios the two cores starved the load (7430 of 28681 requests failed on
// 2026-12-01, 5391 of 22726 in CI), which says nothing about the schema.
const (
	weightOne       = 1
	defaultCapacity = 3
)

// weightAll is the whole cluster.
func weightAll() int { return sched.Capacity() }

var sched = schedule.New(capacityFromEnv(), time.Second)

// capacityFromEnv reads E2E_CAPACITY; a value that is not a positive integer stops the run naming it.
func capacityFromEnv() int {
	v := os.Getenv("E2E_CAPACITY")
	if v == "" {
		return defaultCapacity
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "e2e: E2E_CAPACITY=%q: want a positive integer (how many scenarios may run at once)\n", v)
		os.Exit(2)
	}
	return n
}

// share runs the test t beside the others (t.Parallel) once weight of the cluster is free; typical is how long
// the scenario runs on this machine type (its WALL in the report of a fresh-clone run, 2026-12-02). Call it first, before scenario(), so that the time in the queue is
// not counted as the scenario's. Only leaves take weight: a test whose subtests share must not.
func share(t *testing.T, weight int, typical time.Duration) {
	t.Helper()
	t.Parallel()
	take(t, weight, typical)
}

// take is share for a test that already runs beside the others through its parent (a sequential subtest of
// a parallel test).
func take(t *testing.T, weight int, typical time.Duration) {
	t.Helper()
	tk := &schedule.Ticket{Name: t.Name(), Weight: weight, Typical: typical}
	start := time.Now()
	sched.Acquire(tk)
	if waited := time.Since(start); waited > 5*time.Second {
		t.Logf("started after %s in the queue (weight %d of %d)", waited.Round(time.Second), weight, sched.Capacity())
	}
	t.Cleanup(func() { sched.Release(tk) })
}

// sharing is a subtest that runs f beside its siblings and the other scenarios (share).
func sharing(weight int, typical time.Duration, f func(*testing.T)) func(*testing.T) {
	return func(t *testing.T) {
		share(t, weight, typical)
		f(t)
	}
}
