package bufpool

import "sync"

// Grain is the unit new buffers are rounded up to, so that a buffer
// serves later requests of a little more than the one it was made for.
const Grain = 64 << 10

// Pool holds free buffers of at most a given total capacity and hands
// out the smallest that fits. It is safe for concurrent use.
type Pool struct {
	mu       sync.Mutex
	free     [][]byte
	bytes    int // total capacity of free
	maxBytes int
}

// New returns a pool that keeps free buffers of at most maxBytes in all.
func New(maxBytes int) *Pool { return &Pool{maxBytes: maxBytes} }

// Get returns a buffer of length 0 and capacity at least n: a free one
// if one fits, otherwise a new one.
func (p *Pool) Get(n int) []byte {
	p.mu.Lock()
	best := -1
	for i, b := range p.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(p.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := p.free[best]
		last := len(p.free) - 1
		p.free[best], p.free[last] = p.free[last], nil
		p.free = p.free[:last]
		p.bytes -= cap(b)
		p.mu.Unlock()
		return b[:0]
	}
	p.mu.Unlock()
	return make([]byte, 0, (n+Grain-1)/Grain*Grain)
}

// Put gives b back; the caller must not use it afterwards. When keeping
// it would take the pool past its bound, smaller free buffers make room
// for it, so that the pool keeps the sizes that serve most requests; if
// that is not enough, b goes to the garbage collector.
func (p *Pool) Put(b []byte) {
	c := cap(b)
	if c == 0 || c > p.maxBytes {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.bytes+c > p.maxBytes {
		small := 0
		for i := range p.free {
			if cap(p.free[i]) < cap(p.free[small]) {
				small = i
			}
		}
		if cap(p.free[small]) >= c {
			return
		}
		p.bytes -= cap(p.free[small])
		last := len(p.free) - 1
		p.free[small], p.free[last] = p.free[last], nil
		p.free = p.free[:last]
	}
	p.free = append(p.free, b[:0])
	p.bytes += c
}

// Free returns the number of free buffers held.
func (p *Pool) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}
