package followcore

import (
	"container/heap"
	"time"
)

// timer is a visit of a partition due at a time; seq orders timers due at
// the same time by when they were set.
type timer struct {
	at  time.Time
	seq uint64
	p   *part
}

// timerHeap is a min-heap of timers by (at, seq).
type timerHeap []timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = timer{}
	*h = old[:len(old)-1]
	return t
}

func (h *timerHeap) push(t timer) { heap.Push(h, t) }

// due pops the timers due at now and calls fn with each.
func (h *timerHeap) due(now time.Time, fn func(timer)) {
	for len(*h) > 0 && !(*h)[0].at.After(now) {
		fn(heap.Pop(h).(timer))
	}
}

// next returns when the earliest timer is due, or zero.
func (h timerHeap) next() time.Time {
	if len(h) == 0 {
		return time.Time{}
	}
	return h[0].at
}
