package sim

import (
	"container/heap"
	"time"
)

// The simulation is a discrete-event loop: a simulated clock and a heap of
// events ordered by (time, sequence), run one at a time on one goroutine.
// Everything that happens is an event: the driver's steps, faults ending,
// brokers restarting, and the engines' I/O, whose results the simNodes
// feed back to the cores when the simulated latency has passed. Two
// events at the same instant run in the order they were scheduled, so a
// seed fixes the whole run.

// event is one scheduled happening.
type event struct {
	at  time.Time
	seq uint64
	fn  func()
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// at schedules fn at t, or now if t has passed.
func (w *world) at(t time.Time, fn func()) {
	if t.Before(w.clock) {
		t = w.clock
	}
	w.seq++
	heap.Push(&w.events, &event{at: t, seq: w.seq, fn: fn})
}

// after schedules fn d from now.
func (w *world) after(d time.Duration, fn func()) { w.at(w.clock.Add(d), fn) }

// step schedules one of the driver's own events d from now: fault ends,
// restarts, heals. They lapse once the quiet phase begins, which ends
// every fault itself.
func (w *world) step(d time.Duration, fn func()) {
	w.after(d, func() {
		if !w.quiet {
			fn()
		}
	})
}

// every runs fn every period until the run ends.
func (w *world) every(period time.Duration, fn func()) {
	var tick func()
	tick = func() {
		fn()
		w.after(period, tick)
	}
	w.after(period, tick)
}

// loop runs events in order until the run is over, an invariant broke, or
// nothing is left to happen.
func (w *world) loop() {
	for !w.done && !w.failed() && len(w.events) > 0 {
		e := heap.Pop(&w.events).(*event)
		w.clock = e.at
		e.fn()
	}
}
