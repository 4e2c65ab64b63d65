package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/premigrate/premigrate/internal/cli"
	"github.com/premigrate/premigrate/internal/exitcode"
)

func TestRunRecordsTheIdentityOnlyWhenTheMigrationCommandSucceeds(t *testing.T) {
	cases := []struct {
		name       string
		failFast   string
		script     string
		wantCode   int
		wantRecord bool
		wantOutput string
	}{
		{name: "success", script: "echo applied version 2", wantCode: 0, wantRecord: true, wantOutput: "applied version 2"},
		{name: "failure", script: "echo injected failure >&2; exit 1", wantCode: 1, wantOutput: "injected failure"},
		{name: "a failure keeps its exit code", script: "echo no space left >&2; exit 28", wantCode: 28, wantOutput: "no space left"},
		{name: "a fail-fast refusal of the app keeps its exit code", failFast: "7,3", script: "echo refusing destructive migration >&2; exit 3",
			wantCode: 3, wantOutput: "refusing destructive"},
		{name: "the gate's refusal code from a command that did not list it becomes 1, retried", script: "echo deadlock detected >&2; exit 3",
			wantCode: 1, wantOutput: "the gate keeps 3 for its own refusals"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(recordsConfigMap())
			got := h.run("run", "--identity", identity, "--records", "shop-app-migrations", "--job", "shop-app-migrate",
				"--fail-fast-exit-codes", tc.failFast, "--", "/bin/sh", "-c", tc.script)
			if got != tc.wantCode {
				t.Fatalf("exit code = %d, want %d; stderr:\n%s", got, tc.wantCode, &h.stderr)
			}
			if out := h.stdout.String() + h.stderr.String(); !strings.Contains(out, tc.wantOutput) {
				t.Errorf("the command's output %q was not passed through:\n%s", tc.wantOutput, out)
			}
			cm, err := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migrations", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := cm.Data[identity]; ok != tc.wantRecord {
				t.Errorf("record present = %v, want %v (data %v)", ok, tc.wantRecord, cm.Data)
			}
		})
	}
}

func TestRunNeedsACommandAndACommandThatStarts(t *testing.T) {
	h := newHarness(recordsConfigMap())
	if got := h.run("run", "--identity", identity, "--records", "shop-app-migrations", "--job", "j"); got != exitcode.Usage {
		t.Errorf("without a command: exit code %d, want %d", got, exitcode.Usage)
	}
	if got := h.run("run", "--identity", identity, "--records", "shop-app-migrations", "--job", "j", "--", "/does/not/exist"); got != 127 {
		t.Errorf("with a missing command: exit code %d, want 127", got)
	}
}

func TestCopyWritesAnExecutableCopyOfItself(t *testing.T) {
	h := newHarness()
	to := filepath.Join(t.TempDir(), "gate")
	if got := h.run("copy", "--to", to); got != 0 {
		t.Fatalf("exit code = %d; stderr:\n%s", got, &h.stderr)
	}
	fi, err := os.Stat(to)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o111 == 0 || fi.Size() == 0 {
		t.Errorf("copy is %v, %d bytes: want a non-empty executable", fi.Mode(), fi.Size())
	}
}

func runArgs(extra ...string) []string {
	args := []string{"run", "--identity", identity, "--records", "shop-app-migrations", "--job", "shop-app-migrate"}
	return append(args, extra...)
}

func TestRunNeverRunsAnIdentityThatIsAlreadyRecorded(t *testing.T) {
	cm := recordsConfigMap()
	cm.Data = map[string]string{identity: `{"completedAt":"2026-01-02T03:04:05.000Z","job":"shop-app-migrate-old"}`}
	h := newHarness(cm)
	marker := filepath.Join(t.TempDir(), "ran")
	if got := h.run(runArgs("--", "/bin/sh", "-c", "touch "+marker)...); got != exitcode.OK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", got, &h.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the migration command ran although identity %s is recorded", identity)
	}
	for _, want := range []string{"already recorded", "not running it again", "shop-app-migrate-old"} {
		if !strings.Contains(h.stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, &h.stderr)
		}
	}
}

func TestRunCreatesAMissingRecordsConfigMapWithTheChartsMetadata(t *testing.T) {
	h := newHarness()
	meta := `{"labels":{"app.kubernetes.io/managed-by":"Helm"},"annotations":{"meta.helm.sh/release-name":"shop"}}`
	if got := h.run(runArgs("--create-records", meta, "--", "/bin/sh", "-c", "true")...); got != exitcode.OK {
		t.Fatalf("exit code = %d; stderr:\n%s", got, &h.stderr)
	}
	cm, err := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migrations", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the records ConfigMap was not created: %v", err)
	}
	if _, ok := cm.Data[identity]; !ok || cm.Annotations["meta.helm.sh/release-name"] != "shop" || cm.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("created ConfigMap labels %v annotations %v data %v", cm.Labels, cm.Annotations, cm.Data)
	}
}

func TestRunWithoutCreateRecordsWaitsForTheConfigMapAndSaysSo(t *testing.T) {
	h := newHarness()
	if got := h.run(runArgs("--wait-for-configmap", "200ms", "--", "/bin/sh", "-c", "true")...); got != exitcode.Failed {
		t.Fatalf("exit code = %d, want %d; stderr:\n%s", got, exitcode.Failed, &h.stderr)
	}
	if !strings.Contains(h.stderr.String(), "does not exist") {
		t.Errorf("stderr does not explain the missing ConfigMap:\n%s", &h.stderr)
	}
}

func TestRunNeverRecordsAMigrationThatExitsZeroAfterTheGateWasAskedToStop(t *testing.T) {
	h := newHarness(recordsConfigMap())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := filepath.Join(t.TempDir(), "started")
	go func() {
		for {
			if _, err := os.Stat(started); err == nil {
				cancel() // what SIGTERM does to the gate
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	// a tool that traps SIGTERM and exits 0 halfway through its work
	script := "trap 'exit 0' TERM; touch " + started + "; while :; do sleep 0.05; done"
	if got := cli.ExitCode(run(ctx, runArgs("--", "/bin/sh", "-c", script), h.env)); got != exitcode.Interrupted {
		t.Fatalf("exit code = %d, want %d; stderr:\n%s", got, exitcode.Interrupted, &h.stderr)
	}
	cm, err := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migrations", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Data[identity]; ok {
		t.Errorf("the migration exited 0 after SIGTERM and was recorded: a half-run migration would release the pods")
	}
	if !strings.Contains(h.stderr.String(), "not recording identity "+identity) {
		t.Errorf("stderr does not say the identity was not recorded:\n%s", &h.stderr)
	}
}

func TestRunDoesNotStartTheMigrationOnceTheGateWasAskedToStop(t *testing.T) {
	h := newHarness(recordsConfigMap())
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // SIGTERM between reading the records and starting the command
	marker := filepath.Join(t.TempDir(), "ran")
	if got := cli.ExitCode(run(ctx, runArgs("--", "/bin/sh", "-c", "touch "+marker), h.env)); got != exitcode.Interrupted {
		t.Fatalf("exit code = %d, want %d; stderr:\n%s", got, exitcode.Interrupted, &h.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the migration command started after the gate was asked to stop")
	}
}

func TestRunDoesNotRunTheMigrationWhenTheRecordsCannotBeRead(t *testing.T) {
	cm := recordsConfigMap()
	cm.Data = map[string]string{identity: `{"completedAt":"2026-01-02T03:04:05.000Z","job":"shop-app-migrate-old"}`}
	h := newHarness(cm)
	h.cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "shop-app-migrations", errors.New("RBAC: access denied"))
	})
	marker := filepath.Join(t.TempDir(), "ran")
	if got := h.run(runArgs("--wait-for-configmap", "100ms", "--", "/bin/sh", "-c", "touch "+marker)...); got != exitcode.Failed {
		t.Fatalf("exit code = %d, want %d; stderr:\n%s", got, exitcode.Failed, &h.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the migration ran although the gate could not tell whether identity %s is recorded (it is): a rollback would run an older migration on a newer schema", identity)
	}
	if !strings.Contains(h.stderr.String(), "cannot tell whether identity "+identity+" is already recorded") {
		t.Errorf("stderr does not say why nothing ran:\n%s", &h.stderr)
	}
}

func TestRunRefusesAnIdentityWhoseRecordWasPrunedNamingKeepRecords(t *testing.T) {
	cm := recordsConfigMap()
	cm.Data = map[string]string{"pruned": "0123456789 " + identity}
	h := newHarness(cm)
	marker := filepath.Join(t.TempDir(), "ran")
	if got := h.run(runArgs("--", "/bin/sh", "-c", "touch "+marker)...); got != exitcode.Refused {
		t.Fatalf("exit code = %d, want %d (refused, not retried); stderr:\n%s", got, exitcode.Refused, &h.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the migration of a pruned identity ran: a rollback past the kept records runs an older migration on a newer schema")
	}
	if !strings.Contains(h.stderr.String(), "migration.keepRecords") {
		t.Errorf("stderr does not name the value to raise:\n%s", &h.stderr)
	}
}

// databasePod is the embedded database's pod as made at created, with uid.
func databasePod(uid string, created time.Time) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "shop-db-0", Namespace: "shop", UID: types.UID(uid), CreationTimestamp: metav1.Time{Time: created},
	}}
}

func TestRunRunsARecordedIdentityAgainOnlyWhenTheDatabaseChangedSince(t *testing.T) {
	created := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		record string
		runs   bool
		says   string
	}{
		{name: "recorded on this database: nothing to do",
			record: `{"completedAt":"2026-01-02T05:00:00.000Z","job":"j","database":"pod/shop-db-0@now"}`, says: "already recorded"},
		{name: "recorded on the database's pod before it was made again: runs and records it on this one",
			record: `{"completedAt":"2026-01-02T03:00:00.000Z","job":"j","database":"pod/shop-db-0@before"}`, runs: true,
			says: "the database changed since (it was recorded on database pod/shop-db-0@before, and the database is now pod/shop-db-0@now)"},
		{name: "recorded on no database before this one was created: runs",
			record: `{"completedAt":"2026-01-02T03:00:00.000Z","job":"j"}`, runs: true, says: "before the database's pod/shop-db-0 was created"},
		{name: "recorded on no database after this one was created: nothing to do",
			record: `{"completedAt":"2026-01-02T05:00:00.000Z","job":"j"}`, says: "already recorded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := recordsConfigMap()
			cm.Data = map[string]string{identity: tt.record}
			h := newHarness(cm, databasePod("now", created))
			marker := filepath.Join(t.TempDir(), "ran")
			if got := h.run(runArgs("--database-object", "pod/shop-db-0", "--", "/bin/sh", "-c", "touch "+marker)...); got != exitcode.OK {
				t.Fatalf("exit code = %d, want 0; stderr:\n%s", got, &h.stderr)
			}
			_, err := os.Stat(marker)
			if ran := err == nil; ran != tt.runs {
				t.Errorf("the migration ran = %v, want %v; stderr:\n%s", ran, tt.runs, &h.stderr)
			}
			if !strings.Contains(h.stderr.String(), tt.says) {
				t.Errorf("stderr does not say %q:\n%s", tt.says, &h.stderr)
			}
			got, err := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migrations", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.runs && !strings.Contains(got.Data[identity], `"database":"pod/shop-db-0@now"`) {
				t.Errorf("the new record does not name the database it ran on: %s", got.Data[identity])
			}
		})
	}
}

func TestRunWaitsForTheDatabasesObjectAndFailsClearlyWhenItNeverComes(t *testing.T) {
	h := newHarness(recordsConfigMap())
	marker := filepath.Join(t.TempDir(), "ran")
	got := h.run(runArgs("--database-object", "pod/shop-db-0", "--wait-for-postgres-timeout", "1s", "--", "/bin/sh", "-c", "touch "+marker)...)
	if got != exitcode.Failed {
		t.Fatalf("exit code = %d, want %d; stderr:\n%s", got, exitcode.Failed, &h.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the migration ran without knowing its database")
	}
	if !strings.Contains(h.stderr.String(), "reading the database's pod shop-db-0") {
		t.Errorf("stderr does not name the missing object:\n%s", &h.stderr)
	}
}

func TestRunKeepsTheRecordsInAStoreOwnedByTheDatabaseThatAWipedReleaseConfigMapDoesNotTouch(t *testing.T) {
	created := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	const store = "shop-app-migration-records"
	recorded := `{"completedAt":"2026-01-02T05:00:00.000Z","job":"j","database":"pod/shop-db-0@now"}`
	storeWith := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: store, Namespace: "shop"}, Data: data}
	}
	anchorWith := func(data map[string]string) *corev1.ConfigMap {
		cm := recordsConfigMap()
		cm.UID = "anchor-uid"
		cm.Data = data
		return cm
	}
	tests := []struct {
		name    string
		objects []runtime.Object
		runs    bool
		args    []string
		owner   string // the kind of the store's owner after the run; "" none
	}{
		{name: "a record in the store beside a wiped release ConfigMap (helm --force): nothing runs",
			objects: []runtime.Object{anchorWith(nil), storeWith(map[string]string{identity: recorded})}},
		{name: "a record left in the release ConfigMap while no store exists (an upgrade from 0.3.0): nothing runs",
			objects: []runtime.Object{anchorWith(map[string]string{identity: recorded})}},
		{name: "no record: runs, and creates the store owned by the database's pod, with the earlier records",
			objects: []runtime.Object{anchorWith(map[string]string{"0lder1dent1ty": recorded})}, runs: true, owner: "Pod"},
		{name: "no record, bound to a URL only: the store has no owner (it outlives the release, as the database does)",
			objects: []runtime.Object{anchorWith(map[string]string{"0lder1dent1ty": recorded})}, runs: true,
			args: []string{"--database-url-env", "DATABASE_URL"}},
		{name: "no record, bound to no database: the store is owned by the release's ConfigMap",
			objects: []runtime.Object{anchorWith(map[string]string{"0lder1dent1ty": recorded})}, runs: true, args: []string{}, owner: "ConfigMap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(append(tt.objects, databasePod("now", created))...)
			h.env.getenv = func(k string) string {
				return map[string]string{"POD_NAMESPACE": "shop", "DATABASE_URL": "postgres://db/shop"}[k]
			}
			marker := filepath.Join(t.TempDir(), "ran")
			db := []string{"--database-object", "pod/shop-db-0"}
			if tt.args != nil {
				db = tt.args
			}
			args := runArgs(append(append([]string{"--store", store}, db...), "--", "/bin/sh", "-c", "touch "+marker)...)
			if got := h.run(args...); got != exitcode.OK {
				t.Fatalf("exit code = %d, want 0; stderr:\n%s", got, &h.stderr)
			}
			_, err := os.Stat(marker)
			if ran := err == nil; ran != tt.runs {
				t.Fatalf("the migration ran = %v, want %v; stderr:\n%s", ran, tt.runs, &h.stderr)
			}
			if !tt.runs {
				return
			}
			got, err := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), store, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the store was not created: %v; stderr:\n%s", err, &h.stderr)
			}
			if _, ok := got.Data[identity]; !ok {
				t.Errorf("the store does not record %s: %v", identity, got.Data)
			}
			if _, ok := got.Data["0lder1dent1ty"]; !ok {
				t.Errorf("the store did not carry the earlier record: %v", got.Data)
			}
			kind := ""
			if len(got.OwnerReferences) == 1 {
				kind = got.OwnerReferences[0].Kind
			}
			if len(got.OwnerReferences) > 1 || kind != tt.owner {
				t.Errorf("the store's owners = %+v, want one of kind %q", got.OwnerReferences, tt.owner)
			}
			if got.Annotations["argocd.argoproj.io/sync-options"] != "Prune=false" {
				t.Errorf("the store's annotations %v do not keep Argo CD from pruning it", got.Annotations)
			}
			if got.Labels["app.kubernetes.io/managed-by"] == "Helm" || got.Annotations["meta.helm.sh/release-name"] != "" {
				t.Errorf("the store carries Helm's ownership (Helm would adopt it): %v %v", got.Labels, got.Annotations)
			}
			anchor, err := h.cs.CoreV1().ConfigMaps("shop").Get(context.Background(), "shop-app-migrations", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := anchor.Data[identity]; ok {
				t.Errorf("the record was written into the release's ConfigMap too: %v", anchor.Data)
			}
		})
	}
}

func TestFailFastExitCodesAreExitCodes(t *testing.T) {
	for _, bad := range []string{"0", "256", "three", "3,,x"} {
		h := newHarness(recordsConfigMap())
		if got := h.run("run", "--identity", identity, "--records", "shop-app-migrations", "--job", "j",
			"--fail-fast-exit-codes", bad, "--", "true"); got != exitcode.Usage {
			t.Errorf("--fail-fast-exit-codes %q: exit code = %d, want %d (usage)", bad, got, exitcode.Usage)
		}
	}
}
