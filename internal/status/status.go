// Package status answers, for one release, what premigrate knows and what each waiting pod waits for: the
// records and the database each is bound to, the migration lock, the last runs, the migration and contract
// Jobs, and every pod the gate holds, with the rule's decision (package policy, the rule `gate wait` applies)
// and the next step. It only reads: Build is a pure function of a Snapshot that the caller read.
package status

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/premigrate/premigrate/internal/dbid"
	"github.com/premigrate/premigrate/internal/policy"
	"github.com/premigrate/premigrate/internal/record"
)

// The exit codes of `gate status`, for scripts.
const (
	// OK: no pod of the release is held or waiting.
	OK = 0
	// Waiting: pods wait for a migration that is running, or about to; they start without anyone's help.
	Waiting = 2
	// NeedsYou: a pod is held for a reason no waiting fixes (a failed migration, no migration for its identity,
	// another database, a pruned record, a contracted schema): the next step says what to do.
	NeedsYou = 3
)

// How pods and Jobs of premigrate are found: the identity (a pod's annotation, a Job's label), the component
// of a Job (migration, contract, require-contract), the gate's container and scheduling gate.
const (
	componentLabel     = "app.kubernetes.io/component"
	IdentityAnnotation = "premigrate.io/identity"
	GateContainer      = "wait-for-migration"
	SchedulingGate     = "premigrate.io/migration"
)

// Set is the ConfigMaps of one premigrate configuration of the release (a chart, or a subchart with the
// library): nil when missing.
type Set struct {
	Fullname               string
	Anchor, Store, History *corev1.ConfigMap
}

// Snapshot is what was read of a release.
type Snapshot struct {
	Release, Namespace string
	Sets               []Set
	Jobs               []batchv1.Job
	Pods               []corev1.Pod
	// Logs is the last line of each waiting pod's gate container, by pod name.
	Logs map[string]string
	// Databases is the database each waiting pod will use, as its gate names it, by pod name; a pod without an
	// entry is judged without the binding, and Notes says why.
	Databases map[string]dbid.ID
	// Notes are what could not be read, said in the report.
	Notes []string
}

// PodState is one gated pod as the report shows it.
type PodState struct {
	Name, Identity string
	Started        bool
	// Decision is the rule's answer for a pod that has not started.
	Decision policy.Decision
	// LastLine is its gate's last log line; Next the step that ends the wait.
	LastLine, Next string
}

// Report is the answer for a release.
type Report struct {
	Snapshot
	Pods []PodState
	Code int
}

// Build judges every gated pod of s and sets the exit code.
func Build(s Snapshot) Report {
	r := Report{Snapshot: s, Code: OK}
	for _, p := range s.Pods {
		id := p.Annotations[IdentityAnnotation]
		if id == "" || p.DeletionTimestamp != nil {
			continue
		}
		st := PodState{Name: p.Name, Identity: id, Started: started(p), LastLine: s.Logs[p.Name]}
		if !st.Started {
			in := policy.Pod{Identity: id, Jobs: jobsOf(s.Jobs, id), JobsKnown: true, Database: s.Databases[p.Name]}
			if set, ok := setOf(s.Sets, p); ok {
				in.Records, in.RecordsKnown = recordsOf(set), true
			}
			st.Decision = policy.PodStart(in)
			code := 0
			st.Next, code = next(st.Decision, in, s.Namespace)
			r.Code = max(r.Code, code)
		}
		r.Pods = append(r.Pods, st)
	}
	sort.Slice(r.Pods, func(i, j int) bool { return r.Pods[i].Name < r.Pods[j].Name })
	return r
}

// started reports whether the gate let the pod's app start: its gate container ended with 0 (or it has none),
// and no scheduling gate of premigrate is left.
func started(p corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == SchedulingGate {
			return false
		}
	}
	for _, c := range p.Status.InitContainerStatuses {
		if c.Name == GateContainer {
			return c.State.Terminated != nil && c.State.Terminated.ExitCode == 0
		}
	}
	return p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded
}

// setOf is the Set whose records the pod's gate reads: the one its --records flag names, else the only one.
func setOf(sets []Set, p corev1.Pod) (Set, bool) {
	for _, c := range p.Spec.InitContainers {
		if c.Name != GateContainer {
			continue
		}
		args := append(slices.Clone(c.Command), c.Args...)
		for i, a := range args {
			name, ok := strings.CutPrefix(a, "--records=")
			if !ok && a == "--records" && i+1 < len(args) {
				name, ok = args[i+1], true
			}
			if ok {
				for _, s := range sets {
					if s.Fullname+"-migrations" == name {
						return s, true
					}
				}
			}
		}
	}
	if len(sets) == 1 {
		return sets[0], true
	}
	return Set{}, false
}

// recordsOf is the records that count for a Set (record.Where's rule): nil when no ConfigMap holds any.
func recordsOf(s Set) map[string]string {
	w := record.Where{Anchor: s.Fullname + "-migrations", Store: s.Fullname + "-migration-records"}
	r, _ := w.Choose(s.Anchor, s.Store, true, true)
	return r.Data
}

// jobsOf is what the pod side knows of the Jobs of identity id.
func jobsOf(jobs []batchv1.Job, id string) []policy.Job {
	var out []policy.Job
	for _, j := range jobs {
		if j.Labels[IdentityAnnotation] != id || j.Labels[componentLabel] != "migration" {
			continue
		}
		pj := policy.Job{Name: j.Name}
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				pj.Complete, pj.CompletedAt = true, c.LastTransitionTime.Time
			case batchv1.JobFailed:
				pj.Failed, pj.Reason, pj.Message = true, c.Reason, c.Message
			}
		}
		out = append(out, pj)
	}
	return out
}

// next is the step that ends a pod's wait, and the exit code it calls for.
func next(d policy.Decision, in policy.Pod, ns string) (string, int) {
	active := ""
	for _, j := range in.Jobs {
		if !j.Complete && !j.Failed {
			active = j.Name
		}
	}
	switch d.Reason {
	case policy.JobFailed:
		return fmt.Sprintf("read `kubectl logs -n %s job/%s -c migrate`, fix the cause, and deploy again (helm upgrade, or sync)", ns, d.Other), NeedsYou
	case policy.RecordedElsewhere:
		return "the database changed since its migration ran: `helm upgrade` (or a sync) with the same values runs it on this database", NeedsYou
	case policy.RecordPruned:
		return "roll forward to a recorded revision, or raise keepRecords (docs/troubleshooting.md, \"Record pruned\")", NeedsYou
	case policy.SchemaContracted:
		return fmt.Sprintf("identity %s contracted the schema this code uses: roll forward to it", d.Other), NeedsYou
	case policy.NotRecorded, policy.RecordsUnknown:
		if active != "" {
			return fmt.Sprintf("its migration is running: wait, or follow `kubectl logs -n %s job/%s -c migrate -f`", ns, active), Waiting
		}
		return "no migration of this identity is running: `helm upgrade` (or a sync) with the same values runs it; " +
			"in job mode apply the same rendering again", NeedsYou
	}
	if d.Verdict == policy.Go {
		return "its migration succeeded: the gate releases it at its next check", Waiting
	}
	return "", Waiting
}

// Write prints the report for people.
func (r Report) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(tw, format, a...) } // a failed write shows in Flush
	p("release %s in namespace %s\n", r.Release, r.Namespace)
	if len(r.Sets) == 0 {
		p("\nno premigrate ConfigMaps of this release (label app.kubernetes.io/instance=%s): not installed, or no migration ran yet\n", r.Release)
	}
	for _, s := range r.Sets {
		data := recordsOf(s)
		from := s.Fullname + "-migration-records"
		if s.Store == nil {
			from = s.Fullname + "-migrations"
		}
		p("\nrecords of %s (ConfigMap %s): %d kept, %d pruned\n", s.Fullname, from, len(identities(data)), len(record.Pruned(data)))
		if len(data) > 0 {
			p("  IDENTITY\tCOMPLETED\tJOB\tDATABASE\tCONTRACT\n")
		}
		for _, id := range identities(data) {
			e, err := record.Decode(data[id])
			if err != nil {
				p("  %s\t?\t?\t?\t(the record does not decode)\n", id)
				continue
			}
			contract := "-"
			if c, ok := record.ContractBegan(data[id]); ok && c.Done {
				contract = fmt.Sprintf("contracted %s by Job %s", stamp(c.At), c.Job)
			} else if ok {
				contract = fmt.Sprintf("started %s by Job %s, not completed (older identities are refused)", stamp(c.At), c.Job)
			} else if j, ok := contractJob(r.Jobs, id); ok {
				contract = fmt.Sprintf("pending: Job %s %s", j.Name, jobState(j))
			}
			p("  %s\t%s\t%s\t%s\t%s\n", id, stamp(e.CompletedAt), e.Job, orNone(e.Database), contract)
		}
		for _, cm := range []*corev1.ConfigMap{s.Store, s.Anchor} {
			if cm == nil {
				continue
			}
			if h, ok := record.HolderOf(cm); ok {
				p("lock: held on %s by identity %s, Job %s, pod %s (renewed %s)\n", cm.Name, h.Identity, h.Job, h.Pod, stamp(h.Renewed))
			}
		}
		if s.History != nil {
			runs := record.Runs(s.History.Data[record.HistoryKey])
			p("last runs (ConfigMap %s, %d kept, newest last):\n", s.History.Name, len(runs))
			for _, run := range runs[max(0, len(runs)-3):] {
				for _, l := range strings.Split(strings.TrimRight(run, "\n"), "\n") {
					p("  %s\n", l)
				}
			}
		}
	}
	if len(r.Jobs) > 0 {
		p("\njobs:\n  NAME\tCOMPONENT\tIDENTITY\tSTATE\n")
		for _, j := range r.Jobs {
			p("  %s\t%s\t%s\t%s\n", j.Name, orNone(j.Labels[componentLabel]), orNone(j.Labels[IdentityAnnotation]), jobState(j))
		}
	}
	p("\npods:\n")
	if len(r.Pods) == 0 {
		p("  none gated by premigrate\n")
	} else {
		p("  NAME\tIDENTITY\tSTATE\n")
	}
	for _, ps := range r.Pods {
		if ps.Started {
			p("  %s\t%s\tstarted\n", ps.Name, ps.Identity)
			continue
		}
		p("  %s\t%s\t%s (%s): %s\n", ps.Name, ps.Identity, ps.Decision.Verdict, ps.Decision.Reason, ps.Decision.Why)
		if ps.LastLine != "" {
			p("  \t\tits gate says: %s\n", ps.LastLine)
		}
		p("  \t\tnext: %s\n", ps.Next)
	}
	for _, n := range r.Notes {
		p("\nnote: %s\n", n)
	}
	p("\n%s\n", verdict(r.Code))
	return tw.Flush()
}

func verdict(code int) string {
	switch code {
	case OK:
		return "verdict: no pod waits (exit 0)"
	case Waiting:
		return "verdict: pods wait for a migration that is running; they start by themselves (exit 2)"
	}
	return "verdict: pods are held until you act: see next (exit 3)"
}

// identities are the record keys of data, oldest record first.
func identities(data map[string]string) []string {
	var ids []string
	at := map[string]time.Time{}
	for k, v := range data {
		if k != record.PrunedKey {
			ids = append(ids, k)
			e, _ := record.Decode(v)
			at[k] = e.CompletedAt
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		if !at[ids[i]].Equal(at[ids[j]]) {
			return at[ids[i]].Before(at[ids[j]])
		}
		return ids[i] < ids[j]
	})
	return ids
}

// contractJob is the contract Job of identity id, if one exists.
func contractJob(jobs []batchv1.Job, id string) (batchv1.Job, bool) {
	for _, j := range jobs {
		if j.Labels[IdentityAnnotation] == id && j.Labels[componentLabel] == "contract" {
			return j, true
		}
	}
	return batchv1.Job{}, false
}

func jobState(j batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return "Complete " + stamp(c.LastTransitionTime.Time)
		case batchv1.JobFailed:
			return fmt.Sprintf("Failed %s (%s: %s)", stamp(c.LastTransitionTime.Time), c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("running (%d active, %d failed pods)", j.Status.Active, j.Status.Failed)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format(time.RFC3339)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
