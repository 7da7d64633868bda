package walstore

import (
	"sync/atomic"

	"github.com/activetier/activetier/internal/bufpool"
)

// sharedBuf is a pooled GET buffer that the sections of several entries
// alias: it goes back to the pool when the last of them is released.
// Entries the follower core forgets without appending never release
// theirs, which leaves the buffer to the garbage collector: a lost reuse,
// never a reuse too early.
type sharedBuf struct {
	pool *bufpool.Pool
	b    []byte
	refs atomic.Int32
}

// Release drops one entry's hold on the buffer.
func (s *sharedBuf) Release() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		s.pool.Put(s.b)
		s.b = nil
	case n < 0:
		// A release without a hold would hand the buffer out while an
		// entry still uses it; stop before bytes go wrong.
		panic("walstore: pooled buffer released more often than held")
	}
}
