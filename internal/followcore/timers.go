package followcore

import (
	"time"
)

// timer is a visit of a partition due at a time; seq orders timers due at
// the same time by when they were set.
type timer struct {
	at  time.Time
	seq uint64
	p   *part
}

// timerHeap is a min-heap of timers by (at, seq). It sifts timers itself
// rather than through container/heap, whose Push and Pop box each timer:
// every followed partition sets one per ProgressInterval at least.
type timerHeap []timer

func (h timerHeap) less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}

func (h *timerHeap) push(t timer) {
	*h = append(*h, t)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

// pop removes and returns the earliest timer; the heap must not be empty.
func (h *timerHeap) pop() timer {
	s := *h
	n := len(s) - 1
	t := s[0]
	s[0] = s[n]
	s[n] = timer{}
	s = s[:n]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < n && s.less(l, least) {
			least = l
		}
		if r < n && s.less(r, least) {
			least = r
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	*h = s
	return t
}

// due pops the timers due at now and calls fn with each.
func (h *timerHeap) due(now time.Time, fn func(timer)) {
	for len(*h) > 0 && !(*h)[0].at.After(now) {
		fn(h.pop())
	}
}

// next returns when the earliest timer is due, or zero.
func (h timerHeap) next() time.Time {
	if len(h) == 0 {
		return time.Time{}
	}
	return h[0].at
}
