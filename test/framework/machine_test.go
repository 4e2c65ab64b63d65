package framework

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheCPUClockCountsIdleAndIOWaitAsIdleAndTheRestAsBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")
	// user nice system idle iowait irq softirq steal guest guest_nice, in 1/100 s
	require.NoError(t, os.WriteFile(path, []byte("cpu  1000 50 700 9000 250 10 40 0 0 0\ncpu0 500 25 350 4500 125 5 20 0 0 0\n"), 0o644))
	got, err := CPUClock{Path: path}.Read()
	require.NoError(t, err)
	assert.InDelta(t, 18.0, got.Busy, 1e-9) // 1000+50+700+10+40+0
	assert.InDelta(t, 92.5, got.Idle, 1e-9) // 9000+250
}

func TestTheCPUClockRefusesAFileWhoseFirstLineIsNotTheTotal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")
	require.NoError(t, os.WriteFile(path, []byte("cpu0 1 2 3 4 5 6 7 8\n"), 0o644))
	_, err := CPUClock{Path: path}.Read()
	assert.ErrorContains(t, err, "not the cpu total")
}

func TestTheCoreSpeedIsAPositiveRate(t *testing.T) {
	assert.Greater(t, MeasureCoreSpeed(20*time.Millisecond), 0.0)
}
