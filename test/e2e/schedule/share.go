// Package schedule is the cluster tests' scheduler: a weighted semaphore over one kind cluster that lets the
// heaviest, then longest, waiting scenario go first and never lets another slip past it.
package schedule

import (
	"slices"
	"sync"
	"time"
)

// Scheduler grants weight out of a capacity in a fixed order: the heaviest request first, among equals the
// longest (its typical duration), then the order of asking. Only the head of that order is ever granted, so a
// heavy request is not starved by light ones slipping past it. Nothing is granted before the gathering time has
// passed since the first request, so that requests made at once have all queued before the first is picked.
type Scheduler struct {
	mu       sync.Mutex
	cond     *sync.Cond
	capacity int
	gather   time.Duration
	used     int
	asked    int
	opened   bool
	gathered bool
	waiting  []*Ticket
}

// Ticket is one request: who asks, how much, and how long it typically holds it.
type Ticket struct {
	Name    string
	Weight  int
	Typical time.Duration
	seq     int
}

// New returns a scheduler of capacity that gathers requests for gather before its first grant.
func New(capacity int, gather time.Duration) *Scheduler {
	s := &Scheduler{capacity: capacity, gather: gather}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Capacity is the weight that may be held at once.
func (s *Scheduler) Capacity() int { return s.capacity }

// weight is what t holds: a request above the capacity holds all of it.
func (s *Scheduler) weight(t *Ticket) int { return min(max(t.Weight, 1), s.capacity) }

// Acquire blocks until t is at the head of the queue and its weight fits, then holds it.
func (s *Scheduler) Acquire(t *Ticket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.opened {
		s.opened = true
		go func() {
			time.Sleep(s.gather)
			s.mu.Lock()
			s.gathered = true
			s.cond.Broadcast()
			s.mu.Unlock()
		}()
	}
	t.seq = s.asked
	s.asked++
	s.waiting = append(s.waiting, t)
	slices.SortStableFunc(s.waiting, func(a, b *Ticket) int {
		if wa, wb := s.weight(a), s.weight(b); wa != wb {
			return wb - wa
		}
		if a.Typical != b.Typical {
			if a.Typical > b.Typical {
				return -1
			}
			return 1
		}
		return a.seq - b.seq
	})
	for !s.gathered || s.waiting[0] != t || s.used+s.weight(t) > s.capacity {
		s.cond.Wait()
	}
	s.waiting = s.waiting[1:]
	s.used += s.weight(t)
	s.cond.Broadcast() // the next in line may fit too
}

// Release gives t's weight back.
func (s *Scheduler) Release(t *Ticket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used -= s.weight(t)
	s.cond.Broadcast()
}
