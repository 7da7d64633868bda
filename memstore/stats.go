package memstore

import "sync/atomic"

// Counters are the requests and bytes of one bucket, or of a whole cluster,
// as a bill would count them. A request is counted once it is made: calls
// rejected before any request (a cancelled context, an unknown bucket, a
// byte range no object could satisfy) count nothing.
type Counters struct {
	PutRequests    int64
	GetRequests    int64
	DeleteRequests int64
	// DeleteKeys is the number of keys named in DELETE requests, whether
	// or not they existed.
	DeleteKeys   int64
	ListRequests int64
	// BytesUp is the body size of every PUT request made, accepted or
	// not: the bytes crossed the network either way.
	BytesUp int64
	// BytesDown is the bytes returned by successful GETs.
	BytesDown int64
	// FailedRequests counts requests answered with an error, including
	// missing keys (404), taken keys (412) and bad ranges (416).
	FailedRequests int64
	// CrossAZRequests and CrossAZBytes count the requests, and their bytes
	// up and down, between a store and a bucket in different AZs.
	CrossAZRequests int64
	CrossAZBytes    int64
}

// Requests is the total number of requests of every kind.
func (c Counters) Requests() int64 {
	return c.PutRequests + c.GetRequests + c.DeleteRequests + c.ListRequests
}

func (c Counters) plus(o Counters) Counters {
	return Counters{
		PutRequests:     c.PutRequests + o.PutRequests,
		GetRequests:     c.GetRequests + o.GetRequests,
		DeleteRequests:  c.DeleteRequests + o.DeleteRequests,
		DeleteKeys:      c.DeleteKeys + o.DeleteKeys,
		ListRequests:    c.ListRequests + o.ListRequests,
		BytesUp:         c.BytesUp + o.BytesUp,
		BytesDown:       c.BytesDown + o.BytesDown,
		FailedRequests:  c.FailedRequests + o.FailedRequests,
		CrossAZRequests: c.CrossAZRequests + o.CrossAZRequests,
		CrossAZBytes:    c.CrossAZBytes + o.CrossAZBytes,
	}
}

// Stats is a snapshot of a cluster's accounting.
type Stats struct {
	// Buckets holds each bucket's counters, by bucket name.
	Buckets map[string]Counters
	// Total is the sum over all buckets.
	Total Counters
}

// counters is the live, lock-free form of Counters.
type counters struct {
	puts, gets, deletes, deleteKeys, lists atomic.Int64
	bytesUp, bytesDown, failed             atomic.Int64
	crossRequests, crossBytes              atomic.Int64
}

func (c *counters) all() []*atomic.Int64 {
	return []*atomic.Int64{&c.puts, &c.gets, &c.deletes, &c.deleteKeys, &c.lists,
		&c.bytesUp, &c.bytesDown, &c.failed, &c.crossRequests, &c.crossBytes}
}

func (c *counters) snapshot() Counters {
	return Counters{
		PutRequests:     c.puts.Load(),
		GetRequests:     c.gets.Load(),
		DeleteRequests:  c.deletes.Load(),
		DeleteKeys:      c.deleteKeys.Load(),
		ListRequests:    c.lists.Load(),
		BytesUp:         c.bytesUp.Load(),
		BytesDown:       c.bytesDown.Load(),
		FailedRequests:  c.failed.Load(),
		CrossAZRequests: c.crossRequests.Load(),
		CrossAZBytes:    c.crossBytes.Load(),
	}
}

func (c *counters) reset() {
	for _, v := range c.all() {
		v.Store(0)
	}
}
