package framework

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTheBusyCPUOfASpanIsSplitAmongTheScenariosRunningInIt(t *testing.T) {
	busy := []float64{0, 10, 30, 34, 40}
	i := 0
	c := NewCPUShares(func() (CPUTimes, error) { v := busy[i]; i++; return CPUTimes{Busy: v}, nil })
	c.Start("a")                             // 0
	c.Start("b")                             // 10: a alone spent 10
	assert.InDelta(t, 20, c.Stop("a"), 1e-9) // 30: a and b spent 20, 10 each
	c.Start("c")                             // 34: b alone spent 4
	assert.InDelta(t, 17, c.Stop("b"), 1e-9) // 40: b and c spent 6, 3 each
}

func TestAnUnreadableCPUClockAttributesNothingAndIsCounted(t *testing.T) {
	fail := true
	c := NewCPUShares(func() (CPUTimes, error) {
		if fail {
			return CPUTimes{}, errors.New("no /proc/stat")
		}
		return CPUTimes{Busy: 100}, nil
	})
	c.Start("a")
	fail = false
	assert.Zero(t, c.Stop("a"))
	assert.Equal(t, 1, c.Unreadable())
}
