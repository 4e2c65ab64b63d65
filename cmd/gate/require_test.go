package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/premigrate/premigrate/internal/exitcode"
	"github.com/premigrate/premigrate/internal/record"
)

// entryOf is a record of a migration deployed (its Job created) minutesAgo, contracted when contract is true.
func entryOf(t *testing.T, minutesAgo int, contract bool) string {
	t.Helper()
	created := time.Now().Add(-time.Duration(minutesAgo) * time.Minute)
	v, err := record.Entry{CompletedAt: created.Add(10 * time.Second), JobCreated: created, Job: "shop-app-migrate-x"}.Encode()
	require.NoError(t, err)
	if contract {
		v = v[:len(v)-1] + `,"contractedAt":"` + created.Add(time.Minute).UTC().Format(time.RFC3339) + `","contractJob":"shop-app-contract-x"}`
	}
	return v
}

func TestRequireContractRefusesTheMigrationOnlyWhileTheIdentityDeployedBeforeHasNotRunItsContract(t *testing.T) {
	cases := []struct {
		name     string
		data     func(t *testing.T) map[string]string
		noRecord bool // no records ConfigMap at all
		wantCode int
		wantLog  string
	}{
		{name: "the previous identity's contract ran",
			data: func(t *testing.T) map[string]string {
				return map[string]string{"0000000001": entryOf(t, 30, true), "0000000002": entryOf(t, 20, true)}
			},
			wantLog: "the contract of 0000000002, the identity deployed before " + identity + ", ran"},
		{name: "the previous identity's contract has not run",
			data: func(t *testing.T) map[string]string {
				return map[string]string{"0000000001": entryOf(t, 30, true), "0000000002": entryOf(t, 20, false)}
			},
			wantCode: exitcode.Refused, wantLog: "refusing the migration of " + identity + ": the identity deployed before it, 0000000002"},
		{name: "an older identity's pending contract does not count once a later one ran its own",
			data: func(t *testing.T) map[string]string {
				return map[string]string{"0000000001": entryOf(t, 30, false), "0000000002": entryOf(t, 20, true)}
			},
			wantLog: "ran (Job shop-app-contract-x"},
		{name: "the identity itself is recorded already",
			data: func(t *testing.T) map[string]string {
				return map[string]string{identity: entryOf(t, 5, false), "0000000002": entryOf(t, 20, false)}
			},
			wantLog: "recorded on this database already"},
		{name: "no other identity is recorded",
			data:    func(*testing.T) map[string]string { return map[string]string{} },
			wantLog: "no other migration is recorded on this database"},
		{name: "no records ConfigMap yet",
			noRecord: true,
			wantLog:  "no other migration is recorded on this database"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objects []runtime.Object
			if !tc.noRecord {
				cm := recordsConfigMap()
				cm.Data = tc.data(t)
				objects = append(objects, cm)
			}
			h := newHarness(objects...)
			got := h.run("require-contract", "--identity", identity, "--records", "shop-app-migrations", "--job", "shop-app-expand-check-"+identity,
				"--wait-for-configmap", "0")
			out := h.stdout.String() + h.stderr.String()
			require.Equal(t, tc.wantCode, got, out)
			assert.Contains(t, out, logged(tc.wantLog))
		})
	}
}
