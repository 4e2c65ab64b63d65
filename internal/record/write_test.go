package record_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/premigrate/premigrate/internal/record"
)

const (
	ns   = "shop"
	name = "shop-app-migrations"
)

var now = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func configMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
}

func options(identity string) record.Options {
	return record.Options{
		Namespace:        ns,
		ConfigMap:        name,
		Identity:         identity,
		Job:              "shop-app-migrate-" + identity,
		Keep:             20,
		WaitForConfigMap: 5 * time.Second,
		MinBackoff:       5 * time.Millisecond,
		MaxBackoff:       20 * time.Millisecond,
		Now:              func() time.Time { return now },
	}
}

func data(t *testing.T, cs *fake.Clientset) map[string]string {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data
}

func TestWriteRecordsTheIdentityWithItsCompletionTimeAndJob(t *testing.T) {
	cs := fake.NewClientset(configMap(nil))
	if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), options("abc123def0")); err != nil {
		t.Fatal(err)
	}
	want := `{"completedAt":"2026-03-04T05:06:07.000Z","job":"shop-app-migrate-abc123def0"}`
	if got := data(t, cs)["abc123def0"]; got != want {
		t.Errorf("record = %s, want %s", got, want)
	}
	for _, a := range cs.Actions() {
		if v := a.GetVerb(); v != "get" && v != "update" {
			t.Errorf("used verb %q; RBAC grants only get, update and patch", v)
		}
	}
}

func TestWriteStoresTheDatabaseTheMigrationRanOn(t *testing.T) {
	cs := fake.NewClientset(configMap(map[string]string{
		"abc123def0": `{"completedAt":"2026-01-01T00:00:00.000Z","job":"old","database":"pod/db-0@u1"}`,
	}))
	o := options("abc123def0")
	o.Database = "pod/db-0@u2"
	if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), o); err != nil {
		t.Fatal(err)
	}
	want := `{"completedAt":"2026-03-04T05:06:07.000Z","job":"shop-app-migrate-abc123def0","database":"pod/db-0@u2"}`
	if got := data(t, cs)["abc123def0"]; got != want {
		t.Errorf("record = %s, want %s", got, want)
	}
}

func TestWriteReplacesAnEarlierRecordOfTheSameIdentity(t *testing.T) {
	cs := fake.NewClientset(configMap(map[string]string{
		"abc123def0": `{"completedAt":"2025-01-01T00:00:00Z","job":"old"}`,
		"other":      `{"completedAt":"2025-01-01T00:00:00Z","job":"other"}`,
	}))
	if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), options("abc123def0")); err != nil {
		t.Fatal(err)
	}
	d := data(t, cs)
	if len(d) != 2 || !strings.Contains(d["abc123def0"], "2026-03-04") {
		t.Errorf("data = %v, want the record replaced and the other kept", d)
	}
}

func TestWriteKeepsOnlyTheNewestEntries(t *testing.T) {
	old := map[string]string{}
	for i, day := range []string{"01", "05", "03", "04", "02"} {
		old["id"+string(rune('a'+i))] = `{"completedAt":"2026-01-` + day + `T00:00:00Z","job":"j"}`
	}
	cs := fake.NewClientset(configMap(old))
	o := options("new")
	o.Keep = 3
	if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), o); err != nil {
		t.Fatal(err)
	}
	d := data(t, cs)
	if len(d) != 4 {
		t.Fatalf("kept %d keys, want 3 entries and the pruned list: %v", len(d), d)
	}
	for _, k := range []string{"new", "idb", "idd"} { // now, Jan 5, Jan 4
		if _, ok := d[k]; !ok {
			t.Errorf("entry %s was dropped; kept %v", k, d)
		}
	}
	if got := record.Pruned(d); strings.Join(got, " ") != "ida idc ide" {
		t.Errorf("pruned list %q, want the dropped identities ida idc ide", got)
	}
}

func TestWriteListsWhatItPrunedAndTakesAnIdentityRecordedAgainOffTheList(t *testing.T) {
	cs := fake.NewClientset(configMap(map[string]string{
		"ida":            `{"completedAt":"2026-01-01T00:00:00Z","job":"j"}`,
		record.PrunedKey: "old1 new",
	}))
	o := options("new")
	o.Keep = 1
	if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), o); err != nil {
		t.Fatal(err)
	}
	d := data(t, cs)
	if _, ok := d["new"]; !ok {
		t.Fatalf("new was not recorded: %v", d)
	}
	if got := strings.Join(record.Pruned(d), " "); got != "old1 ida" {
		t.Errorf("pruned list %q, want %q (new recorded again, ida pruned now)", got, "old1 ida")
	}
	if !record.WasPruned(d, "ida") || record.WasPruned(d, "new") {
		t.Errorf("WasPruned is wrong on %v", d)
	}
}

func TestWriteRetriesWhenTheConfigMapChangedConcurrently(t *testing.T) {
	cs := fake.NewClientset(configMap(map[string]string{}))
	var conflicts atomic.Int32
	cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		n := conflicts.Add(1)
		if n > 2 {
			return false, nil, nil
		}
		// Another migration's record lands between our get and update.
		other := configMap(map[string]string{})
		for i := int32(1); i <= n; i++ {
			other.Data["concurrent"+string('0'+i)] = `{"completedAt":"2026-03-04T05:06:00Z","job":"j"}`
		}
		if err := cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, other, ns); err != nil {
			t.Error(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, name, errors.New("the object has been modified"))
	})
	if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), options("abc123def0")); err != nil {
		t.Fatal(err)
	}
	if n := conflicts.Load(); n != 3 {
		t.Errorf("%d updates, want 3 (two conflicts, then success)", n)
	}
	d := data(t, cs)
	for _, k := range []string{"abc123def0", "concurrent1", "concurrent2"} {
		if _, ok := d[k]; !ok {
			t.Errorf("entry %s missing: each retry must read the ConfigMap again; data %v", k, d)
		}
	}
}

func TestWriteWaitsForTheConfigMapToBeCreated(t *testing.T) {
	cs := fake.NewClientset()
	var gets atomic.Int32
	cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if gets.Add(1) == 3 {
			if err := cs.Tracker().Add(configMap(nil)); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	var logged logLines
	o := options("abc123def0")
	o.Log = logged.logger()
	if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), o); err != nil {
		t.Fatal(err)
	}
	if n := gets.Load(); n != 3 {
		t.Errorf("%d gets, want 3", n)
	}
	if _, ok := data(t, cs)["abc123def0"]; !ok {
		t.Error("identity not recorded")
	}
	if !strings.Contains(logged.String(), "INFO ConfigMap "+ns+"/"+name+" does not exist yet") {
		t.Errorf("logs do not say the ConfigMap is missing:\n%s", logged.String())
	}
}

func TestWriteGivesUpClearlyWhenTheConfigMapNeverAppears(t *testing.T) {
	cs := fake.NewClientset()
	o := options("abc123def0")
	o.WaitForConfigMap = 100 * time.Millisecond
	start := time.Now()
	err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), o)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("err = %v, want a NotFound error", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("gave up after %s, want about 100ms", took)
	}
	for _, want := range []string{"ConfigMap shop/shop-app-migrations does not exist", "waited 100ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestWriteRetriesTransientErrors(t *testing.T) {
	tests := map[string]error{
		"service unavailable": apierrors.NewServiceUnavailable("apiserver is shutting down"),
		"connection refused":  errors.New("dial tcp 10.96.0.1:443: connect: connection refused"),
		"forbidden while the RoleBinding is not applied yet": apierrors.NewForbidden(
			schema.GroupResource{Resource: "configmaps"}, name, errors.New("cannot get")),
	}
	for errName, getErr := range tests {
		for _, verb := range []string{"get", "update"} {
			t.Run(verb+" fails twice with "+errName, func(t *testing.T) {
				cs := fake.NewClientset(configMap(nil))
				var calls atomic.Int32
				cs.PrependReactor(verb, "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
					return calls.Add(1) <= 2, nil, getErr
				})
				if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), options("abc123def0")); err != nil {
					t.Fatal(err)
				}
				if n := calls.Load(); n != 3 {
					t.Errorf("%d calls to %s, want 3", n, verb)
				}
			})
		}
	}
}

func TestWriteStopsWhenTheContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	err := record.Write(ctx, fake.NewClientset().CoreV1().ConfigMaps(ns), options("abc123def0"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// apiServerUpdates makes the fake clientset's updates of ConfigMaps behave as the API server's: an update that
// carries a resourceVersion other than the stored one is refused with a conflict, an update without one is
// applied unconditionally, and every applied update gets a new resourceVersion. The fake tracker itself ignores
// resourceVersions. before runs ahead of each update, as another writer would.
func apiServerUpdates(cs *fake.Clientset, before func(n int)) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	var n atomic.Int32
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		before(int(n.Add(1)))
		cm := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		stored, err := cs.Tracker().Get(gvr, ns, cm.Name)
		if err != nil {
			return true, nil, err
		}
		rv := stored.(*corev1.ConfigMap).ResourceVersion
		if cm.ResourceVersion != "" && cm.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, cm.Name,
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		cm.ResourceVersion = bump(rv)
		if err := cs.Tracker().Update(gvr, cm, ns); err != nil {
			return true, nil, err
		}
		return true, cm, nil
	})
}

func bump(rv string) string {
	n := 0
	for _, c := range rv {
		n = 10*n + int(c-'0')
	}
	return fmt.Sprint(n + 1)
}

func TestWriteKeepsARecordThatAnotherWriterAddedBetweenItsReadAndItsUpdate(t *testing.T) {
	cm := configMap(map[string]string{})
	cm.ResourceVersion = "1"
	cs := fake.NewClientset(cm)
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	apiServerUpdates(cs, func(n int) {
		if n != 1 {
			return
		}
		// Another migration records itself after our get, before our update.
		other := configMap(map[string]string{"0123456789": `{"completedAt":"2026-03-04T05:06:00Z","job":"j"}`})
		other.ResourceVersion = "2"
		if err := cs.Tracker().Update(gvr, other, ns); err != nil {
			t.Error(err)
		}
	})
	if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), options("abc123def0")); err != nil {
		t.Fatal(err)
	}
	d := data(t, cs)
	for _, k := range []string{"abc123def0", "0123456789"} {
		if _, ok := d[k]; !ok {
			t.Errorf("record %s lost: an update must carry the resourceVersion it read, so a concurrent write is a conflict to retry, never overwritten; data %v", k, d)
		}
	}
}

func TestWriteCreatesAMissingConfigMapOwnedByTheDatabaseAndCarryingTheEarlierRecords(t *testing.T) {
	cs := fake.NewClientset()
	o := options("new0000001")
	o.Create = &record.Metadata{Labels: map[string]string{"app.kubernetes.io/name": "shop"}}
	o.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: "data-db-0", UID: "pvc-uid"}
	o.Keep = 2
	older, err := record.Entry{CompletedAt: now.Add(-2 * time.Hour), Job: "j1"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	old, err := record.Entry{CompletedAt: now.Add(-time.Hour), Job: "j2"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	o.Seed = map[string]string{"older00001": older, "old0000001": old}
	if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), o); err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0] != *o.Owner {
		t.Errorf("owners = %+v, want the database's claim", cm.OwnerReferences)
	}
	if cm.Labels["app.kubernetes.io/name"] != "shop" {
		t.Errorf("labels = %v, want the given ones", cm.Labels)
	}
	for _, k := range []string{"new0000001", "old0000001"} {
		if _, ok := cm.Data[k]; !ok {
			t.Errorf("record %s missing from %v", k, cm.Data)
		}
	}
	if _, ok := cm.Data["older00001"]; ok || !strings.Contains(cm.Data[record.PrunedKey], "older00001") {
		t.Errorf("data = %v, want the oldest seeded record pruned and listed (keep 2)", cm.Data)
	}
	if len(o.Seed) != 2 {
		t.Errorf("the seed was changed: %v", o.Seed)
	}
}

func TestTheStoresOwnerFollowsTheDatabaseItDescribesNow(t *testing.T) {
	claim := metav1.OwnerReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: "data-db-0", UID: "u1"}
	pod := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "db-0", UID: "u2"}
	for _, c := range []struct {
		name    string
		had     []metav1.OwnerReference
		owner   *metav1.OwnerReference
		follows bool
		want    []metav1.OwnerReference
	}{
		{name: "moved from the embedded database to an external one: no owner", had: []metav1.OwnerReference{claim}, follows: true},
		{name: "moved to another holder", had: []metav1.OwnerReference{claim}, owner: &pod, follows: true, want: []metav1.OwnerReference{pod}},
		{name: "the same holder stays", had: []metav1.OwnerReference{claim}, owner: &claim, follows: true, want: []metav1.OwnerReference{claim}},
		{name: "without OwnerFollows an existing owner stays", had: []metav1.OwnerReference{claim}, owner: &pod, want: []metav1.OwnerReference{claim}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cm := configMap(map[string]string{})
			cm.OwnerReferences = c.had
			cs := fake.NewClientset(cm)
			o := options("abc123def0")
			o.Owner, o.OwnerFollows = c.owner, c.follows
			if err := record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), o); err != nil {
				t.Fatal(err)
			}
			got, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.OwnerReferences) != fmt.Sprint(c.want) {
				t.Errorf("owners = %v, want %v", got.OwnerReferences, c.want)
			}
		})
	}
}
