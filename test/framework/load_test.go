package framework

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestALoadCountsFromTheFirstRequestTheServiceAnswered(t *testing.T) {
	base := LoadReport{Sent: 5, Failed: 4, Errors: []string{"refused 1", "refused 2", "refused 3", "refused 4"},
		ByVersion: map[string]VersionCounts{"1": {Sent: 1}, "unknown": {Sent: 4, Failed: 4}}}
	final := LoadReport{Sent: 105, Failed: 6, SchemaFailed: 1, LongestGapMs: 300,
		Errors:    []string{"refused 1", "refused 2", "refused 3", "refused 4", "timeout", "schema"},
		ByVersion: map[string]VersionCounts{"1": {Sent: 60, Failed: 1}, "2": {Sent: 40, Failed: 1}, "unknown": {Sent: 5, Failed: 4}}}
	got := final.since(base)
	assert.Equal(t, 100, got.Sent)
	assert.Equal(t, 2, got.Failed)
	assert.Equal(t, 1, got.SchemaFailed)
	assert.Equal(t, int64(300), got.LongestGapMs)
	assert.Equal(t, []string{"timeout", "schema"}, got.Errors)
	assert.Equal(t, map[string]VersionCounts{"1": {Sent: 59, Failed: 1}, "2": {Sent: 40, Failed: 1}, "unknown": {Sent: 1}}, got.ByVersion)
	assert.Equal(t, final, final.since(LoadReport{}), "from an empty base, the whole report")
}
