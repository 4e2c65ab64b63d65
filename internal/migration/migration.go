// Package migration is what the migration and contract Jobs do once the gate's flags are parsed: `gate run`
// runs a migration once, under the release's lock, and records it on the database it ran on (Run, Guard);
// `gate contract` runs the contract step once the rollout left nothing older (Contract); `gate
// require-contract` refuses a migration before the previous contract (RequireContract). What may run is
// decided by package policy, the records are read and written by package record; this package asks the one,
// acts, and tells the other, with the logs and exit codes (package exitcode) an operator reads.
package migration

import (
	"context"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/record"
	"github.com/premigrate/premigrate/internal/rollout"
	"github.com/premigrate/premigrate/internal/ungate"
)

// Config names the migration and its records: the flags the Jobs' commands share.
type Config struct {
	Namespace string
	// Identity is the migration's identity: its key in the records.
	Identity string
	// Records is the release's records ConfigMap (the anchor); Store the ConfigMap that keeps the records
	// outside the release ("": they are kept in Records).
	Records, Store string
	// Job is the migration's (or the contract's) Job, stored with the record.
	Job string
	// Keep is how many records are kept, newest first; 0 keeps all.
	Keep int
	// WaitForConfigMap is how long API errors (and a records ConfigMap that does not exist yet) are retried.
	WaitForConfigMap time.Duration
	// Create is the metadata of a records ConfigMap created when missing; nil: never create it.
	Create *record.Metadata
	// Database says how to name the database the records are bound to.
	Database dbid.Spec
}

// Env is what the commands take from their process.
type Env struct {
	cli.Streams
	Getenv func(string) string
	Now    func() time.Time
	Log    *slog.Logger
}

// JobGetter reads the migration's Job.
type JobGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*batchv1.Job, error)
}

// Clients are the API clients of the namespace, ready to use.
type Clients struct {
	Jobs       JobGetter
	ConfigMaps record.ConfigMapClient
	Pods       dbid.PodGetter
	Claims     dbid.ClaimGetter
	// Workloads annotates the workloads the guard watches (Guard).
	Workloads WorkloadAnnotator
	// Events posts the contract's Events on its Deployment; nil posts none.
	Events ungate.Events
	// Rollout observes the rollout of the Deployment called name (Contract).
	Rollout func(name string) rollout.Source
}

// recorder is what the commands that read or write the records share.
type recorder struct {
	o       *Config
	ns      string
	clients Clients
	meta    *record.Metadata // nil: never create the ConfigMap
	spec    dbid.Spec        // how to name the database
	// database is the database the migration runs on, once resolved (resolve); the record names it
	database dbid.ID
	// jobCreated is the creation time of the migration's Job, once read (lock); the record stores it
	jobCreated time.Time
	// started is when this gate started: an upper bound of its Job's creation time
	started time.Time
	// check is `gate run --check`: a command that asks the database whether a recorded migration is applied
	check []string
}

func newRecorder(cfg *Config, c Clients) *recorder {
	return &recorder{o: cfg, ns: cfg.Namespace, clients: c, meta: cfg.Create, spec: cfg.Database}
}

// objects reads the database's pod or claim.
func (r *recorder) objects() dbid.Getter { return dbid.FromAPI(r.clients.Pods, r.clients.Claims) }
