package schedule

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// run asks for every ticket at once and returns the order of the grants; each holder keeps its weight for hold.
func run(s *Scheduler, tickets []*Ticket, hold time.Duration) []string {
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	for _, t := range tickets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Acquire(t)
			mu.Lock()
			order = append(order, t.Name)
			mu.Unlock()
			time.Sleep(hold)
			s.Release(t)
		}()
	}
	wg.Wait()
	return order
}

func TestTheHeaviestThenTheLongestWaitingScenarioGoesFirstWhateverTheOrderOfAsking(t *testing.T) {
	s := New(2, 50*time.Millisecond)
	order := run(s, []*Ticket{
		{Name: "light short", Weight: 1, Typical: time.Minute},
		{Name: "light long", Weight: 1, Typical: 10 * time.Minute},
		{Name: "heavy short", Weight: 2, Typical: 2 * time.Minute},
		{Name: "light middle", Weight: 1, Typical: 5 * time.Minute},
		{Name: "heavy long", Weight: 2, Typical: 3 * time.Minute},
	}, 5*time.Millisecond)
	// two light ones run at once, so only the heavy ones' order and the light ones' set are fixed
	assert.Equal(t, []string{"heavy long", "heavy short"}, order[:2])
	assert.ElementsMatch(t, []string{"light long", "light middle", "light short"}, order[2:])
	s = New(1, 50*time.Millisecond)
	order = run(s, []*Ticket{
		{Name: "short", Weight: 1, Typical: time.Minute},
		{Name: "long", Weight: 1, Typical: 10 * time.Minute},
		{Name: "middle", Weight: 1, Typical: 5 * time.Minute},
	}, 5*time.Millisecond)
	assert.Equal(t, []string{"long", "middle", "short"}, order)
}

func TestALightScenarioNeverSlipsPastAHeavyOneAtTheHead(t *testing.T) {
	s := New(4, 20*time.Millisecond)
	first := &Ticket{Name: "light-running", Weight: 1, Typical: time.Hour}
	s.Acquire(first)
	heavy := &Ticket{Name: "heavy", Weight: 4, Typical: 10 * time.Minute}
	light := &Ticket{Name: "light", Weight: 1, Typical: time.Minute}
	granted := make(chan string, 2)
	go func() { s.Acquire(heavy); granted <- heavy.Name; s.Release(heavy) }()
	time.Sleep(10 * time.Millisecond)
	go func() { s.Acquire(light); granted <- light.Name; s.Release(light) }()
	select {
	case name := <-granted:
		t.Fatalf("%s was granted while light-running held 1 of 4 and heavy (weight 4) was at the head", name)
	case <-time.After(100 * time.Millisecond):
	}
	s.Release(first)
	assert.Equal(t, "heavy", <-granted)
	assert.Equal(t, "light", <-granted)
}

func TestNoMoreThanTheCapacityIsEverHeldAndARequestAboveItTakesAll(t *testing.T) {
	s := New(4, 0)
	var (
		mu        sync.Mutex
		held, top int
		wg        sync.WaitGroup
	)
	weights := []int{1, 2, 1, 1, 9, 2, 1, 1, 2, 1}
	for i, w := range weights {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := &Ticket{Name: string(rune('a' + i)), Weight: w, Typical: time.Duration(i) * time.Second}
			s.Acquire(tk)
			mu.Lock()
			held += s.weight(tk)
			top = max(top, held)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			mu.Lock()
			held -= s.weight(tk)
			mu.Unlock()
			s.Release(tk)
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, top, 4)
	assert.Equal(t, 4, s.weight(&Ticket{Weight: 9}))
}

func TestNothingIsGrantedBeforeTheGatheringTimeHasPassed(t *testing.T) {
	s := New(2, 80*time.Millisecond)
	start := time.Now()
	tk := &Ticket{Name: "first", Weight: 1}
	s.Acquire(tk)
	assert.GreaterOrEqual(t, time.Since(start), 80*time.Millisecond)
	s.Release(tk)
}
