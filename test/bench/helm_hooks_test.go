//go:build e2e

package bench

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/premigrate/premigrate/test/framework"
)

// Where Helm 4's time goes in one hook-mode upgrade with the chart's defaults: its --debug log, each line
// stamped on the harness's clock as it arrives, cut at the lines that mark Helm's steps. This is Helm's own
// sequence (rendering, one hook at a time, the release's apply and wait), the part of "above the floor" that
// the gate does not decide.

// timedLine is one line of a command's output and when the harness read it, from the command's start.
type timedLine struct {
	at   time.Duration
	text string
}

// hookSequence is one upgrade cut into Helm's steps, in seconds.
type hookSequence struct {
	RenderSec       float64 `json:"renderSec"`       // start -> the new release record (load, render, lookups, checks)
	HooksBeforeSec  float64 `json:"hooksBeforeSec"`  // -> the hook Job created (the RBAC hooks, each deleted first, created, waited for)
	JobSec          float64 `json:"jobSec"`          // -> Helm sees the hook Job Complete
	HooksAfterSec   float64 `json:"hooksAfterSec"`   // -> the RBAC hooks deleted (hook-succeeded) and the apply starts
	ApplyAndWaitSec float64 `json:"applyAndWaitSec"` // -> helm returns (the release's objects patched, --wait on the rollout)
	TotalSec        float64 `json:"totalSec"`
	DeleteWaits     int     `json:"deleteWaits"`    // waits for a hook object to be gone (before-hook-creation, hook-succeeded)
	DeleteWaitSec   float64 `json:"deleteWaitSec"`  // their sum
	ReleaseUpdates  int     `json:"releaseUpdates"` // writes of the release record during the hooks (one per hook)
}

func TestBenchmarkHelmHookSequence(t *testing.T) {
	rel := env.NewRelease(t, env.NewNamespace(t, "bench-hooks", framework.Restricted()), "app", env.Helm4)
	rel.MustDeploy(map[string]any{"env": []any{framework.EnvVar("ROUND", "install")}})
	rounds := envInt("BENCH_UPGRADES", 9)
	var seqs []hookSequence
	cols := map[string][]float64{}
	for i := 0; i < rounds; i++ {
		args := []string{"upgrade", rel.Name, env.Chart, "-n", rel.Namespace, "--wait", "--timeout", "4m", "--debug",
			"--values", rel.ValuesFile(map[string]any{"env": []any{framework.EnvVar("ROUND", fmt.Sprint(i))}})}
		lines, err := timedRun(t, env.Helm4, args...)
		if err != nil {
			t.Fatalf("round %d: helm upgrade: %v\n%s", i+1, err, joinLines(lines))
		}
		s, err := cutHookSequence(lines)
		if err != nil {
			t.Fatalf("round %d: %v\n%s", i+1, err, joinLines(lines))
		}
		t.Logf("round %d/%d: render %.2f s, hooks before the Job %.2f s, Job %.2f s, hooks after %.2f s, apply and wait %.2f s = %.2f s; %d waits for deletion %.2f s, %d release writes",
			i+1, rounds, s.RenderSec, s.HooksBeforeSec, s.JobSec, s.HooksAfterSec, s.ApplyAndWaitSec, s.TotalSec, s.DeleteWaits, s.DeleteWaitSec, s.ReleaseUpdates)
		seqs = append(seqs, s)
		for k, v := range map[string]float64{"render": s.RenderSec, "hooksBefore": s.HooksBeforeSec, "job": s.JobSec,
			"hooksAfter": s.HooksAfterSec, "applyAndWait": s.ApplyAndWaitSec, "total": s.TotalSec, "deleteWait": s.DeleteWaitSec} {
			cols[k] = append(cols[k], v)
		}
	}
	medians := map[string]float64{}
	for k, v := range cols {
		medians[k] = percentile(v, 0.5)
	}
	t.Logf("medians of %d: %v", rounds, medians)
	benchRecord("helmHookSequence", map[string]any{"helm": "helm4", "rounds": seqs, "mediansSec": medians})
}

// timedRun runs a command and stamps each line of its output (stdout and stderr together) as it arrives.
func timedRun(t *testing.T, bin string, args ...string) ([]timedLine, error) {
	var mu sync.Mutex
	var lines []timedLine
	start := time.Now()
	stamp := func(text string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, timedLine{at: time.Since(start), text: text})
	}
	_, err := env.Run.RunCmd(t, framework.Cmd{Bin: bin, Args: args, OnLine: stamp})
	stamp("(exit)")
	return lines, err
}

func joinLines(lines []timedLine) string {
	var b strings.Builder
	for _, l := range lines {
		if len(l.text) > 240 {
			l.text = l.text[:240] + "..."
		}
		fmt.Fprintf(&b, "%7.3f %s\n", l.at.Seconds(), l.text)
	}
	return b.String()
}

// cutHookSequence finds Helm 4.3's step lines in an upgrade's --debug log.
func cutHookSequence(lines []timedLine) (hookSequence, error) {
	var s hookSequence
	find := func(from int, what ...string) (int, error) {
		for i := from; i < len(lines); i++ {
			match := true
			for _, w := range what {
				if !strings.Contains(lines[i].text, w) {
					match = false
					break
				}
			}
			if match {
				return i, nil
			}
		}
		return 0, fmt.Errorf("no line with %q in Helm's log after line %d", what, from)
	}
	created, err := find(0, `msg="creating upgraded release"`)
	if err != nil {
		return s, err
	}
	job, err := find(created, `msg="Created resource via patch"`, "Kind=Job")
	if err != nil {
		return s, err
	}
	jobDone, err := find(job, `msg="all resources achieved desired status"`, "desiredStatus=Current")
	if err != nil {
		return s, err
	}
	apply, err := find(jobDone, `msg="checking resources for changes"`)
	if err != nil {
		return s, err
	}
	end := len(lines) - 1
	sec := func(i int) float64 { return lines[i].at.Seconds() }
	s.RenderSec = sec(created)
	s.HooksBeforeSec = sec(job) - sec(created)
	s.JobSec = sec(jobDone) - sec(job)
	s.HooksAfterSec = sec(apply) - sec(jobDone)
	s.ApplyAndWaitSec = sec(end) - sec(apply)
	s.TotalSec = sec(end)
	for i := created; i < apply; i++ {
		switch {
		case strings.Contains(lines[i].text, `msg="updating release"`):
			s.ReleaseUpdates++
		case strings.Contains(lines[i].text, `msg="waiting for resources to be deleted"`):
			done, err := find(i, `msg="all resources achieved desired status"`, "desiredStatus=NotFound")
			if err != nil {
				return s, err
			}
			s.DeleteWaits++
			s.DeleteWaitSec += sec(done) - sec(i)
		}
	}
	return s, nil
}
