package gate

import (
	"testing"
	"time"
)

func TestBackoffDoublesFromMinUpToMaxAndResets(t *testing.T) {
	b := backoff{min: 500 * time.Millisecond, max: 10 * time.Second}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		got := b.next()
		if got < w || got > w+w/5 {
			t.Errorf("step %d: %s, want %s plus at most 20%% jitter", i, got, w)
		}
	}
	b.reset()
	if got := b.next(); got > 600*time.Millisecond {
		t.Errorf("after reset: %s, want about 500ms", got)
	}
}
