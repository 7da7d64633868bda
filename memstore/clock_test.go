package memstore_test

import (
	"sync"
	"time"
)

// fakeClock is a simulated clock. It records every wait asked of it. In
// auto mode a wait completes at once and moves the clock forward; otherwise
// waits complete when Advance passes their deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	auto    bool
	waits   []time.Duration
	pending []fakeTimer
	// asked receives a value each time After is called, for tests that
	// must act while a request is waiting.
	asked chan time.Duration
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(auto bool) *fakeClock {
	return &fakeClock{
		now:   time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		auto:  auto,
		asked: make(chan time.Duration, 1024),
	}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.waits = append(c.waits, d)
	if c.auto {
		c.now = c.now.Add(d)
		ch <- c.now
	} else {
		c.pending = append(c.pending, fakeTimer{at: c.now.Add(d), ch: ch})
	}
	c.mu.Unlock()
	select {
	case c.asked <- d:
	default:
	}
	return ch
}

// Advance moves the clock forward by d and fires the timers now due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.pending[:0]
	for _, t := range c.pending {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	c.pending = kept
}

// Waits returns the waits asked so far and forgets them.
func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.waits
	c.waits = nil
	return w
}
