package walstore

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/activetier/activetier/internal/backoff"
)

// Clock is the engines' source of time. The default is the wall clock; a
// simulation passes a simulated one with the same two methods so a run is
// fast and replays exactly.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// sleep waits for d on clock c, or until ctx is done.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.After(d):
		return nil
	}
}

// Backoff is an exponential retry schedule with full jitter.
type Backoff struct {
	// Initial is the first delay's upper bound. Default 10ms.
	Initial time.Duration
	// Max caps the delay. Default 2s.
	Max time.Duration
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = 10 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 2 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	return b
}

// jitter is a seeded random source shared by an engine's goroutines. Engines
// take a seed so that, on a simulated clock, retries replay exactly.
type jitter struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newJitter(seed uint64) *jitter {
	return &jitter{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// delay returns the wait before retry number attempt (see backoff.Delay).
func (j *jitter) delay(b Backoff, attempt int) time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	return backoff.Delay(j.rng, b.Initial, b.Max, attempt)
}

func (j *jitter) uint64() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rng.Uint64()
}
