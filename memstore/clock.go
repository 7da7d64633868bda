package memstore

import "time"

// Clock is memstore's source of time: every simulated latency and every
// long-poll wait goes through it. It has the same method set as the
// engines' clock, so one simulated clock drives a whole simulated cluster.
// The default is the wall clock.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
