package memstore

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Op is the kind of an object-store request.
type Op uint8

// The requests a Store makes. A Delete call makes one OpDelete request per
// bucket and per 1000 keys, a List call one OpList request per 1000 objects
// listed, as S3's DeleteObjects and ListObjectsV2 do.
const (
	OpPut Op = iota + 1
	OpGet
	OpDelete
	OpList
)

// String returns the S3 verb of the request.
func (o Op) String() string {
	switch o {
	case OpPut:
		return "PUT"
	case OpGet:
		return "GET"
	case OpDelete:
		return "DELETE"
	case OpList:
		return "LIST"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Request describes one request as faults see it.
type Request struct {
	Op Op
	// StoreAZ is the AZ of the store making the request.
	StoreAZ string
	// AZ and Bucket are the bucket the request addresses and its AZ.
	AZ, Bucket string
	// Key is the object's key; for OpList, the prefix listed; for
	// OpDelete, empty (see Keys).
	Key string
	// Keys are the keys of one OpDelete request, at most 1000.
	Keys []string
	// Offset and Length are a GET's byte range; Length is also a PUT's
	// body size.
	Offset, Length int64
}

// Fault changes what happens to the requests it matches: it delays them,
// fails them, or corrupts the bytes a GET returns. Faults are added to a
// Cluster with AddFault and apply to every store of it; several faults may
// match one request, and their delays add up while the first matching
// error wins.
type Fault struct {
	// Match selects the requests the fault applies to; nil selects all.
	Match func(Request) bool
	// Rate is the probability that a matching request is hit, drawn from
	// the cluster's seeded source. 0 means 1: every matching request.
	Rate float64
	// Delay is added to the request's latency (a slowdown).
	Delay time.Duration
	// Err fails the request: it is returned wrapped with the request, so
	// errors.Is(err, Err) holds. Use storage.ErrUnavailable for a 5xx.
	Err error
	// AfterApply makes Err come after the request took effect, as when a
	// response is lost on its way back: the object was stored or deleted,
	// yet the caller sees an error. It requires Err.
	AfterApply bool
	// Corrupt makes a GET return its bytes with one byte changed. It does
	// not affect other requests.
	Corrupt bool
}

func (f Fault) validate() error {
	switch {
	case f.Rate < 0 || f.Rate > 1 || math.IsNaN(f.Rate):
		return fmt.Errorf("memstore: Fault.Rate %v is not a probability in [0, 1]", f.Rate)
	case f.Delay < 0:
		return fmt.Errorf("memstore: Fault.Delay %v is negative", f.Delay)
	case f.AfterApply && f.Err == nil:
		return errors.New("memstore: Fault.AfterApply is set without Fault.Err")
	case f.Delay == 0 && f.Err == nil && !f.Corrupt:
		return errors.New("memstore: Fault has no effect: set Delay, Err or Corrupt")
	}
	return nil
}

// effect is what the faults matching one request do to it.
type effect struct {
	delay      time.Duration
	err        error
	afterApply bool
	corrupt    bool
}
