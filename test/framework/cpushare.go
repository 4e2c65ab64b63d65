package framework

import (
	"sync"
)

// CPUShares attributes the machine's busy CPU time to the scenarios running while it was spent, in equal parts:
// between two starts or ends of scenarios the set that runs does not change, so the busy seconds of that span
// are split among its members. Set-up work, the control plane, kubelet and containerd are shared out with the
// pods' own work: a scenario's share is what the machine spent while it ran, which is what a choice of
// scenarios costs the suite. The machine's own readings come from read (CPUClock.Read); a failed reading
// attributes nothing and is counted (Unreadable).
type CPUShares struct {
	read func() (CPUTimes, error)

	mu         sync.Mutex
	last       CPUTimes
	haveLast   bool
	running    map[string]bool
	share      map[string]float64
	unreadable int
}

// NewCPUShares attributes the CPU times that read returns.
func NewCPUShares(read func() (CPUTimes, error)) *CPUShares {
	return &CPUShares{read: read, running: map[string]bool{}, share: map[string]float64{}}
}

// Start counts id as running from now on.
func (c *CPUShares) Start(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attributeLocked()
	c.running[id] = true
}

// Stop ends id's span and returns the busy CPU seconds attributed to it.
func (c *CPUShares) Stop(id string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attributeLocked()
	delete(c.running, id)
	return c.share[id]
}

// Unreadable is how many readings failed (their spans are attributed to nobody).
func (c *CPUShares) Unreadable() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unreadable
}

func (c *CPUShares) attributeLocked() {
	now, err := c.read()
	if err != nil {
		c.unreadable++
		c.haveLast = false
		return
	}
	if c.haveLast && len(c.running) > 0 {
		each := (now.Busy - c.last.Busy) / float64(len(c.running))
		for id := range c.running {
			c.share[id] += each
		}
	}
	c.last, c.haveLast = now, true
}
