package gate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/policy"
	"github.com/premigrate/premigrate/internal/record"
)

// view is what the gate currently knows, rebuilt from list and watch events.
type view struct {
	jobs      map[string]*batchv1.Job
	jobsKnown bool // a list of Jobs succeeded at least once
	jobsErr   error
	recs      record.Records // the records that count (setConfigMap): Data nil when none exists
	cmKnown   bool           // the records that count are known: their ConfigMaps were listed
	cmErr     error
	identity  string
	// anchorName is the release's records ConfigMap, storeName the store outside the release ("": none);
	// the store's records count once it exists, the anchor's until then.
	anchorName, storeName string
	anchor, store         *corev1.ConfigMap
	known                 map[string]bool // the ConfigMaps listed at least once, by name
	job                   string
	namespace             string
	database              dbid.ID // the database the pod will use; the zero ID accepts every record
}

// setConfigMap stores what a list or watch of the ConfigMap called name found (nil: it does not exist) and
// works out which records count.
func (v *view) setConfigMap(name string, cm *corev1.ConfigMap) {
	v.known[name] = true
	v.cmErr = nil
	if name == v.storeName {
		v.store = cm
	} else {
		v.anchor = cm
	}
	w := record.Where{Anchor: v.anchorName, Store: v.storeName}
	v.recs, v.cmKnown = w.Choose(v.anchor, v.store, v.known[v.anchorName], v.known[v.storeName])
}

// verdict is what the current view decides.
type verdict struct {
	outcome Outcome // 0: keep waiting
	job     *batchv1.Job
	cond    *batchv1.JobCondition
	record  *record.Entry
	recErr  error
	pruned  bool // failed: the identity's record was pruned and its Job is gone
	// contracted are the identities deployed after this one whose contract ran on this database (failed)
	contracted []string
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func sortedJobs(jobs map[string]*batchv1.Job) []*batchv1.Job {
	out := make([]*batchv1.Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}

// decide asks the rule (policy.PodStart) on what the view holds now, and keeps what the result names: the
// record or the Job it rests on, or the identities whose contract holds the pod.
func (v *view) decide() verdict {
	p := policy.Pod{Identity: v.identity, RecordsKnown: v.cmKnown, JobsKnown: v.jobsKnown, Database: v.database}
	if v.recs.Data != nil {
		p.Records = v.recs.Data
	}
	jobs := sortedJobs(v.jobs)
	for _, j := range jobs {
		pj := policy.Job{Name: j.Name}
		if c := jobCondition(j, batchv1.JobComplete); c != nil {
			pj.Complete, pj.CompletedAt = true, completionTime(j, c)
		}
		if c := jobCondition(j, batchv1.JobFailed); c != nil {
			pj.Failed, pj.Reason, pj.Message = true, c.Reason, c.Message
		}
		p.Jobs = append(p.Jobs, pj)
	}
	d := policy.PodStart(p)
	switch {
	case d.Verdict == policy.Go && d.Reason == policy.RecordedHere:
		e, _, err := record.Lookup(p.Records, v.identity)
		return verdict{outcome: Succeeded, record: &e, recErr: err}
	case d.Verdict == policy.Go:
		j := v.jobs[d.Other]
		return verdict{outcome: Succeeded, job: j, cond: jobCondition(j, batchv1.JobComplete)}
	case d.Reason == policy.SchemaContracted:
		return verdict{outcome: Failed, contracted: policy.ContractedAfter(p.Records, v.identity, v.database)}
	case d.Reason == policy.RecordPruned:
		return verdict{outcome: Failed, pruned: true}
	case d.Reason == policy.JobFailed:
		j := v.jobs[d.Other]
		return verdict{outcome: Failed, job: j, cond: jobCondition(j, batchv1.JobFailed)}
	}
	return verdict{}
}

// completionTime is when a Complete Job completed (the API server's time).
func completionTime(j *batchv1.Job, complete *batchv1.JobCondition) time.Time {
	if j.Status.CompletionTime != nil {
		return j.Status.CompletionTime.Time
	}
	return complete.LastTransitionTime.Time
}

// completedHere reports whether a Complete Job can have migrated the database the pod will use: it completed
// after the object that holds the database's data was created (both times are the API server's).
func (v *view) completedHere(j *batchv1.Job, complete *batchv1.JobCondition) bool {
	ok, _ := v.database.Describes("", completionTime(j, complete))
	return ok
}

// staleRecord says why the identity's record is not about the database the pod will use; "" when there is
// no record or it is.
func (v *view) staleRecord() string {
	if v.recs.Data == nil {
		return ""
	}
	e, found, err := record.Lookup(v.recs.Data, v.identity)
	if !found || err != nil {
		return ""
	}
	_, why := v.database.Describes(e.Database, e.CompletedAt)
	return why
}

func jobState(j *batchv1.Job) string {
	switch {
	case jobCondition(j, batchv1.JobFailed) != nil:
		return "failed"
	case jobCondition(j, batchv1.JobFailureTarget) != nil:
		return "failing"
	case jobCondition(j, batchv1.JobSuccessCriteriaMet) != nil:
		return "completing"
	case j.Status.Active > 0 && j.Status.Failed > 0:
		return "retrying"
	case j.Status.Active > 0:
		return "running"
	default:
		return "pending"
	}
}

// describeJobs summarizes the matching Jobs for a progress line.
func (v *view) describeJobs() string {
	if !v.jobsKnown {
		return "Jobs not listed yet"
	}
	if len(v.jobs) == 0 {
		return fmt.Sprintf("no Job %s of identity %s yet", v.job, v.identity)
	}
	parts := make([]string, 0, len(v.jobs))
	for _, j := range sortedJobs(v.jobs) {
		parts = append(parts, fmt.Sprintf("Job %s %s (active=%d failed=%d)",
			j.Name, jobState(j), j.Status.Active, j.Status.Failed))
	}
	return strings.Join(parts, ", ")
}

func (v *view) describeRecords() string {
	switch {
	case !v.cmKnown:
		return fmt.Sprintf("ConfigMap %s not read yet", v.recs.From)
	case v.recs.Data == nil:
		return fmt.Sprintf("ConfigMap %s not found", v.recs.From)
	case v.staleRecord() != "":
		return fmt.Sprintf("the database changed since identity %s was recorded in ConfigMap %s (%s): "+
			"waiting for its migration to run again on this database (the next helm upgrade or sync with the same values runs it)",
			v.identity, v.recs.From, v.staleRecord())
	case v.staleJob() != "":
		return fmt.Sprintf("no record in ConfigMap %s, and the database changed since identity %s's migration ran (%s): "+
			"waiting for its migration to run again on this database (the next helm upgrade or sync with the same values runs it)",
			v.recs.From, v.identity, v.staleJob())
	default:
		return fmt.Sprintf("no record in ConfigMap %s", v.recs.From)
	}
}

// staleJob says why a Complete Job of the identity is not about the database the pod will use (it completed
// before the database's object was made: its records went with the old one); "" when there is none.
func (v *view) staleJob() string {
	for _, j := range sortedJobs(v.jobs) {
		c := jobCondition(j, batchv1.JobComplete)
		if c == nil || v.completedHere(j, c) {
			continue
		}
		_, why := v.database.Describes("", completionTime(j, c))
		return "Job " + j.Name + " completed" + strings.TrimPrefix(why, "it was recorded")
	}
	return ""
}

// progress is the periodic progress line.
func (v *view) progress(elapsed time.Duration) string {
	return fmt.Sprintf("waiting for migration %s (elapsed %s): %s", v.identity, elapsed.Round(time.Second), v.state())
}

// state describes what the gate knows: Jobs, record, errors.
func (v *view) state() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s; %s", v.describeJobs(), v.describeRecords())
	if v.jobsErr != nil {
		fmt.Fprintf(&b, "; Jobs: %s", v.describeErr(sourceJobs, v.jobsErr))
	}
	if v.cmErr != nil {
		fmt.Fprintf(&b, "; ConfigMap: %s", v.describeErr(sourceRecords, v.cmErr))
	}
	return b.String()
}

type sourceKind string

const (
	sourceJobs    sourceKind = "jobs"
	sourceRecords sourceKind = "records"
)

// describeErr explains an API error; RBAC problems get a hint, since the
// gate cannot fix them itself and keeps retrying.
func (v *view) describeErr(kind sourceKind, err error) string {
	what := fmt.Sprintf("list/watch Job %s in namespace %s", v.job, v.namespace)
	if kind == sourceRecords {
		what = fmt.Sprintf("list/watch ConfigMap %s in namespace %s", v.recs.From, v.namespace)
	}
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("forbidden, RBAC misconfiguration? the pod's ServiceAccount needs a Role allowing it to %s (retrying): %v", what, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("unauthorized, check the pod's ServiceAccount token (retrying): %v", err)
	default:
		return fmt.Sprintf("%v (retrying)", err)
	}
}
