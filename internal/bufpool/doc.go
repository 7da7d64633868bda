// Package bufpool keeps a few large byte buffers for reuse: the leader's
// encoded objects, the follower's GET buffers, memstore's objects. Reusing
// them spares an allocation per replicated byte per copy, and with it the
// garbage collector's work and the page faults of fresh memory, which cost
// more than the copies themselves.
//
// A pool does not track who holds a buffer: the one owner that knows
// nothing else refers to a buffer puts it back, and a buffer not put back
// is simply left to the garbage collector.
package bufpool
