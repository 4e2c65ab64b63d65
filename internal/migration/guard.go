package migration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/record"
)

// RecordedAnnotation is the workload annotation that `gate run --guard-workload` writes once its identity is
// recorded: the identities the records hold, sorted, separated by spaces. The guard at the API server (the
// chart's ValidatingAdmissionPolicy) lets an update of the workload to a new identity through only when the
// workload carried that identity here before the update: it reads no ConfigMap, so it never depends on the API
// server's cache of policy parameters.
const RecordedAnnotation = "premigrate.io/recorded-identities"

// workloadResources are the kinds Guard takes, and their resources.
var workloadResources = map[string]string{"deployment": "deployments", "statefulset": "statefulsets", "daemonset": "daemonsets"}

// ParseWorkload checks a workload the guard watches, KIND/NAME with KIND one of deployment, statefulset,
// daemonset.
func ParseWorkload(v string) error {
	kind, name, ok := strings.Cut(v, "/")
	if _, known := workloadResources[kind]; !ok || !known || name == "" {
		return fmt.Errorf("%q is not KIND/NAME with KIND one of deployment, statefulset, daemonset", v)
	}
	return nil
}

// WorkloadAnnotator sets one annotation on an apps/v1 workload.
type WorkloadAnnotator interface {
	Annotate(ctx context.Context, resource, name, key, value, fieldManager string) error
}

// Guard annotates the workloads (--guard-workload, KIND/NAME) with the identities the records hold, after `gate run`
// exited 0 (its identity is recorded on this database). An API error, a refusal included (a Role created with
// the Job may not be in force yet), is retried for --wait-for-configmap; one that lasts fails the run: the
// workload's update would be refused by the guard, after the release's other objects changed.
func Guard(ctx context.Context, cfg *Config, workloads []string, e *Env, clients Clients) error {
	if len(workloads) == 0 {
		return nil
	}
	r := newRecorder(cfg, clients)
	var err error
	log := e.Log
	logf := cli.Logf(log)
	deadline := time.Now().Add(r.o.WaitForConfigMap)
	for _, w := range workloads {
		kind, name, _ := strings.Cut(w, "/")
		for delay := 500 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
			var ids []string
			ids, err = r.recordedIdentities(ctx)
			if err == nil {
				err = r.clients.Workloads.Annotate(ctx, workloadResources[kind], name, RecordedAnnotation, strings.Join(ids, " "), record.FieldManager)
			}
			if err == nil {
				logf("%s %s/%s: annotation %s lists the %d recorded identities, so the guard lets its update to %s through",
					kind, r.ns, name, RecordedAnnotation, len(ids), r.o.Identity)
				break
			}
			if apierrors.IsNotFound(err) {
				logf("%s %s/%s does not exist yet (a first install): nothing for the guard to annotate", kind, r.ns, name)
				err = nil
				break
			}
			if ctx.Err() == nil && time.Now().Before(deadline) {
				logf("annotating %s %s/%s for the guard (retrying in %s): %v", kind, r.ns, name, delay, err)
				select {
				case <-ctx.Done():
				case <-time.After(delay):
				}
				continue
			}
			err = fmt.Errorf("migration %s is recorded, but %s %s/%s could not be annotated for the guard at the API server, which will refuse "+
				"its update to this identity (the chart's guard Role grants patch on the workloads of guard.workloads: is it one of them?): %w",
				r.o.Identity, kind, r.ns, name, err)
			log.Error(err.Error())
			if ctx.Err() != nil {
				return cli.Exit(exitcode.Interrupted, err)
			}
			return cli.Exit(exitcode.Failed, err)
		}
	}
	return nil
}

// recordedIdentities lists the identities the records hold (the store when set, else the release's records),
// sorted; the current one is always among them.
func (r *recorder) recordedIdentities(ctx context.Context) ([]string, error) {
	rs, err := r.where().Read(ctx, r.clients.ConfigMaps)
	if err != nil {
		return nil, err
	}
	data := rs.Data
	ids := []string{r.o.Identity}
	for k := range data {
		if k != record.PrunedKey && k != r.o.Identity {
			ids = append(ids, k)
		}
	}
	slices.Sort(ids)
	return ids, nil
}
