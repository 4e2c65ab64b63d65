package record_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/premigrate/premigrate/internal/record"
)

func TestPreviousIsTheOtherIdentityDeployedLast(t *testing.T) {
	at := func(minutes int) time.Time { return now.Add(time.Duration(minutes) * time.Minute) }
	d := map[string]string{
		"1111111111":     contracted(t, record.Entry{CompletedAt: at(1), JobCreated: at(0)}, at(2), "c1"),
		"2222222222":     entry(t, record.Entry{CompletedAt: at(11), JobCreated: at(10), Database: "db-a"}),
		"3333333333":     entry(t, record.Entry{CompletedAt: at(31)}), // no JobCreated: by completion
		"4444444444":     entry(t, record.Entry{CompletedAt: at(21), JobCreated: at(20)}),
		"5555555555":     "not a record",
		record.PrunedKey: "0000000000",
	}
	all := func(record.Entry) bool { return true }
	tests := []struct {
		name     string
		identity string
		keep     func(record.Entry) bool
		want     string
	}{
		{"the latest deploy of another identity", "9999999999", all, "3333333333"},
		{"never the identity itself", "3333333333", all, "4444444444"},
		{"only the entries kept", "9999999999", func(e record.Entry) bool { return e.Database == "db-a" }, "2222222222"},
		{"a nil keep keeps all", "9999999999", nil, "3333333333"},
		{"none kept", "9999999999", func(record.Entry) bool { return false }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, _, ok := record.Previous(d, tt.identity, tt.keep)
			assert.Equal(t, tt.want, id)
			assert.Equal(t, tt.want != "", ok)
		})
	}
}

func TestPreviousOfTwoDeployedInTheSameSecondIsTheGreaterIdentity(t *testing.T) {
	d := map[string]string{
		"aaaaaaaaaa": entry(t, record.Entry{CompletedAt: now, JobCreated: now}),
		"bbbbbbbbbb": entry(t, record.Entry{CompletedAt: now, JobCreated: now}),
	}
	for range 20 {
		id, _, _ := record.Previous(d, "cccccccccc", nil)
		assert.Equal(t, "bbbbbbbbbb", id)
	}
}
