package record_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/premigrate/premigrate/internal/record"
)

func contractOptions(identity string) record.ContractOptions {
	return record.ContractOptions{Namespace: ns, ConfigMap: name, Identity: identity, Job: "shop-app-contract-" + identity,
		Now: func() time.Time { return now.Add(time.Minute) }}
}

func entry(t *testing.T, e record.Entry) string {
	t.Helper()
	v, err := e.Encode()
	require.NoError(t, err)
	return v
}

// contracted is entry with a contract step recorded at.
func contracted(t *testing.T, e record.Entry, at time.Time, job string) string {
	t.Helper()
	v := entry(t, e)
	return v[:len(v)-1] + `,"contractedAt":"` + at.UTC().Format("2006-01-02T15:04:05.000Z") + `","contractJob":"` + job + `"}`
}

func TestWriteContractedKeepsTheRecordAndAddsWhenAndByWhichJob(t *testing.T) {
	want := record.Entry{CompletedAt: now, Job: "shop-app-migrate", Database: "db1", JobCreated: now.Add(-time.Minute)}
	cs := fake.NewClientset(configMap(map[string]string{"aaaaaaaaaa": entry(t, want)}))
	require.NoError(t, record.WriteContracted(context.Background(), cs.CoreV1().ConfigMaps(ns), contractOptions("aaaaaaaaaa")))
	value := data(t, cs)["aaaaaaaaaa"]
	e, err := record.Decode(value)
	require.NoError(t, err)
	assert.Equal(t, want, e, "the record's own keys")
	c, ok := record.ContractOf(value)
	require.True(t, ok, value)
	assert.Equal(t, record.Contract{At: now.Add(time.Minute), Job: "shop-app-contract-aaaaaaaaaa", Done: true}, c)
}

// A contract's start is recorded before its command runs: from then on it counts against older identities
// (ContractBegan) although it is not done (ContractOf) until it succeeds, which keeps the start beside it.
func TestAContractsStartCountsAsBegunButNotDoneUntilItSucceeds(t *testing.T) {
	want := record.Entry{CompletedAt: now, Job: "shop-app-migrate", Database: "db1", JobCreated: now.Add(-time.Minute)}
	cs := fake.NewClientset(configMap(map[string]string{"aaaaaaaaaa": entry(t, want)}))
	client := cs.CoreV1().ConfigMaps(ns)
	value := func() string { return data(t, cs)["aaaaaaaaaa"] }
	if _, ok := record.ContractBegan(value()); ok {
		t.Fatalf("a record without a contract has begun one: %s", value())
	}
	require.NoError(t, record.WriteContractStarted(context.Background(), client, contractOptions("aaaaaaaaaa")))
	began, ok := record.ContractBegan(value())
	require.True(t, ok, value())
	assert.Equal(t, record.Contract{At: now.Add(time.Minute), Job: "shop-app-contract-aaaaaaaaaa"}, began, "begun, not done")
	if _, done := record.ContractOf(value()); done {
		t.Errorf("a contract that only started is done: %s", value())
	}
	e, err := record.Decode(value())
	require.NoError(t, err)
	assert.Equal(t, want, e, "the record's own keys")
	require.NoError(t, record.WriteContracted(context.Background(), client, contractOptions("aaaaaaaaaa")))
	began, ok = record.ContractBegan(value())
	require.True(t, ok, value())
	assert.True(t, began.Done, "the contract succeeded: %s", value())
	assert.Contains(t, value(), `"contractStartedAt"`, "the start stays beside the success")
}

func TestWriteContractedRefusesAnIdentityWhoseMigrationIsNotRecorded(t *testing.T) {
	for name, cs := range map[string]*fake.Clientset{
		"no record":    fake.NewClientset(configMap(map[string]string{"bbbbbbbbbb": entry(t, record.Entry{CompletedAt: now})})),
		"no ConfigMap": fake.NewClientset(),
	} {
		t.Run(name, func(t *testing.T) {
			err := record.WriteContracted(context.Background(), cs.CoreV1().ConfigMaps(ns), contractOptions("aaaaaaaaaa"))
			assert.ErrorIs(t, err, record.ErrNotRecorded)
		})
	}
}

// A migration run again (the database changed, or lacked it) is recorded anew, without a contract: the contract
// did not run on that database either.
func TestAMigrationRecordedAgainStartsWithoutAContractStep(t *testing.T) {
	cs := fake.NewClientset(configMap(map[string]string{
		"abc123def0": contracted(t, record.Entry{CompletedAt: now.Add(-time.Hour), Job: "j"}, now.Add(-time.Minute), "c"),
	}))
	_, ok := record.ContractOf(data(t, cs)["abc123def0"])
	require.True(t, ok)
	require.NoError(t, record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), options("abc123def0")))
	_, ok = record.ContractOf(data(t, cs)["abc123def0"])
	assert.False(t, ok)
}

func TestContractedAfterListsTheLaterIdentitiesWhoseContractRan(t *testing.T) {
	at := func(minutes int) time.Time { return now.Add(time.Duration(minutes) * time.Minute) }
	d := map[string]string{
		"1111111111":     contracted(t, record.Entry{CompletedAt: at(1), JobCreated: at(0)}, at(2), "c1"),
		"2222222222":     entry(t, record.Entry{CompletedAt: at(11), JobCreated: at(10)}),
		"3333333333":     contracted(t, record.Entry{CompletedAt: at(21), JobCreated: at(20)}, at(25), "c3"),
		"4444444444":     contracted(t, record.Entry{CompletedAt: at(31)}, at(35), "c4"), // no JobCreated: by completion
		"5555555555":     entry(t, record.Entry{CompletedAt: at(41), JobCreated: at(40)}),
		record.PrunedKey: "0000000000",
	}
	assert.Equal(t, []string{"3333333333", "4444444444"}, record.ContractedAfter(d, "2222222222"))
	assert.Empty(t, record.ContractedAfter(d, "5555555555"), "nothing later")
	assert.Equal(t, []string{"3333333333", "4444444444"}, record.ContractedAfter(d, "1111111111"), "its own contract does not count")
	assert.Empty(t, record.ContractedAfter(d, "9999999999"), "an identity not recorded")
}
