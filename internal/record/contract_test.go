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

func TestWriteContractedKeepsTheRecordAndAddsWhenAndByWhichJob(t *testing.T) {
	cs := fake.NewClientset(configMap(map[string]string{
		"aaaaaaaaaa": entry(t, record.Entry{CompletedAt: now, Job: "shop-app-migrate", Database: "db1", JobCreated: now.Add(-time.Minute)}),
	}))
	require.NoError(t, record.WriteContracted(context.Background(), cs.CoreV1().ConfigMaps(ns), contractOptions("aaaaaaaaaa")))
	e, found, err := record.Lookup(data(t, cs), "aaaaaaaaaa")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, record.Entry{CompletedAt: now, Job: "shop-app-migrate", Database: "db1", JobCreated: now.Add(-time.Minute),
		ContractedAt: now.Add(time.Minute), ContractJob: "shop-app-contract-aaaaaaaaaa"}, e)
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

func TestAMigrationRecordedAgainKeepsItsContractStep(t *testing.T) {
	cs := fake.NewClientset(configMap(map[string]string{
		"abc123def0": entry(t, record.Entry{CompletedAt: now.Add(-time.Hour), Job: "j", ContractedAt: now.Add(-time.Minute), ContractJob: "c"}),
	}))
	require.NoError(t, record.Write(context.Background(), cs.CoreV1().ConfigMaps(ns), options("abc123def0")))
	e, _, err := record.Lookup(data(t, cs), "abc123def0")
	require.NoError(t, err)
	assert.Equal(t, now, e.CompletedAt, "the new completion")
	assert.Equal(t, now.Add(-time.Minute), e.ContractedAt, "the contract step kept")
	assert.Equal(t, "c", e.ContractJob)
}

func TestContractedAfterListsTheLaterIdentitiesWhoseContractRan(t *testing.T) {
	at := func(minutes int) time.Time { return now.Add(time.Duration(minutes) * time.Minute) }
	d := map[string]string{
		"1111111111":     entry(t, record.Entry{CompletedAt: at(1), JobCreated: at(0), ContractedAt: at(2)}),
		"2222222222":     entry(t, record.Entry{CompletedAt: at(11), JobCreated: at(10)}),
		"3333333333":     entry(t, record.Entry{CompletedAt: at(21), JobCreated: at(20), ContractedAt: at(25)}),
		"4444444444":     entry(t, record.Entry{CompletedAt: at(31), ContractedAt: at(35)}), // no JobCreated: by completion
		"5555555555":     entry(t, record.Entry{CompletedAt: at(41), JobCreated: at(40)}),
		record.PrunedKey: "0000000000",
	}
	assert.Equal(t, []string{"3333333333", "4444444444"}, record.ContractedAfter(d, "2222222222"))
	assert.Empty(t, record.ContractedAfter(d, "5555555555"), "nothing later")
	assert.Equal(t, []string{"3333333333", "4444444444"}, record.ContractedAfter(d, "1111111111"), "its own contract does not count")
	assert.Empty(t, record.ContractedAfter(d, "9999999999"), "an identity not recorded")
}
