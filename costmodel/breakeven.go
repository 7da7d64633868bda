package costmodel

import (
	"fmt"
	"math"
)

// Throughput search range for BreakEvenThroughput, in bytes per second.
const (
	minSearchBytesPerSecond = 1e-3
	maxSearchBytesPerSecond = 1e15
)

// maxSearchBrokers bounds BreakEvenBrokers.
const maxSearchBrokers = 1 << 20

// BreakEvenThroughput returns the cluster throughput, in bytes per second, at
// which activetier costs exactly as much as broker-to-broker replication for
// w's placement and cut settings; above it activetier is cheaper. w's
// BytesPerSecond is the variable searched and its value is not used.
//
// The search relies on the savings per produced byte growing with
// throughput: at a fixed interval objects get bigger, so each request and
// metadata message is shared by more bytes, while per-byte fees stay
// constant. The error wraps ErrNoBreakEven when activetier pays at every
// throughput from 1e-3 B/s, or at none up to 1e15 B/s (when the per-byte fees
// are not below the cross-AZ price, or requests per byte stop shrinking
// because MaxObjectBytes caps object size).
func BreakEvenThroughput(p Prices, w Workload) (float64, error) {
	w.BytesPerSecond = 1
	if err := p.Validate(); err != nil {
		return 0, err
	}
	if err := w.Validate(); err != nil {
		return 0, err
	}
	w = w.withDefaults()
	perByte := func(x float64) (float64, error) {
		v := w
		v.BytesPerSecond = x
		e, err := estimate(p, v)
		return e.PerSecond.SavingsUSD / x, err
	}
	lo, hi := minSearchBytesPerSecond, maxSearchBytesPerSecond
	sLo, err := perByte(lo)
	if err != nil {
		return 0, err
	}
	if sLo >= 0 {
		return 0, fmt.Errorf("%w: activetier pays at every throughput down to %g B/s", ErrNoBreakEven, lo)
	}
	sHi, err := perByte(hi)
	if err != nil {
		return 0, err
	}
	if sHi < 0 {
		if perByteMargin(p, w) <= 0 {
			return 0, fmt.Errorf("%w: activetier never pays: per-byte fees are not below the cross-AZ price at RF=%d", ErrNoBreakEven, w.RF)
		}
		return 0, fmt.Errorf("%w: activetier does not pay at any throughput up to %g B/s: MaxObjectBytes keeps requests per byte too high", ErrNoBreakEven, hi)
	}
	// Bisect in log space: the crossing may be anywhere from bytes to
	// terabytes per second.
	for range 200 {
		mid := math.Sqrt(lo * hi)
		if hi/lo-1 < 1e-12 {
			break
		}
		s, err := perByte(mid)
		if err != nil {
			return 0, err
		}
		if s < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Sqrt(lo * hi), nil
}

// BreakEvenBrokers returns the smallest broker count at which activetier
// costs more than broker-to-broker replication, all else in w fixed: more
// brokers mean more leaders cutting smaller objects and more distinct
// followers reading each one, so requests and metadata grow while the
// cross-AZ bytes saved do not: the saving shrinks and can turn negative as
// a cluster grows (docs/design.md, "Worked cost examples from the KIP-1176
// discussion", scaling in brokers and partitions). w's Brokers is the
// variable searched; its placement must be derived (Leaders and FollowersPerObject zero) and objects
// cut by time only (MaxObjectBytes zero): while a size cap binds, objects/s is
// fixed at BytesPerSecond/cap, and more leaders make each object hold fewer
// partitions read by fewer followers, so cost falls with broker count before
// it rises, and there is no single crossing to find. The error
// wraps ErrNoBreakEven when activetier costs more already at Brokers = RF, or
// still pays when every partition has its own leader (beyond which adding
// brokers changes nothing unless MetadataPartitions is fixed).
func BreakEvenBrokers(p Prices, w Workload) (int, error) {
	var c checker
	if w.Leaders != 0 {
		c.fail("Workload.Leaders", w.Leaders, "must be 0 (derived from the broker count) to search over broker counts")
	}
	if w.FollowersPerObject != 0 {
		c.fail("Workload.FollowersPerObject", w.FollowersPerObject, "must be 0 (derived from placement) to search over broker counts")
	}
	if w.MaxObjectBytes != 0 {
		c.fail("Workload.MaxObjectBytes", w.MaxObjectBytes, "must be 0 to search over broker counts: a binding size cap makes cost fall, then rise, with broker count")
	}
	if err := c.err(); err != nil {
		return 0, err
	}
	w.Brokers = max(w.RF, 2)
	if err := p.Validate(); err != nil {
		return 0, err
	}
	if err := w.Validate(); err != nil {
		return 0, err
	}
	loses := func(brokers int) (bool, error) {
		v := w
		v.Brokers = brokers
		e, err := estimate(p, v.withDefaults())
		return e.PerSecond.SavingsUSD < 0, err
	}
	lo := w.RF
	if l, err := loses(lo); err != nil || l {
		if err == nil {
			err = fmt.Errorf("%w: activetier costs more already at %d brokers (RF=%d)", ErrNoBreakEven, lo, w.RF)
		}
		return 0, err
	}
	hi := maxSearchBrokers
	if w.MetadataPartitions == 0 {
		// With one partition per leader nothing changes as brokers are
		// added: objects hold one section read by RF-1 followers.
		hi = max(lo, w.Partitions+1)
	}
	if l, err := loses(hi); err != nil || !l {
		if err == nil && w.MetadataPartitions == 0 {
			err = fmt.Errorf("%w: activetier still pays at %d brokers, where each partition has its own leader", ErrNoBreakEven, hi)
		} else if err == nil {
			err = fmt.Errorf("%w: activetier still pays at %d brokers", ErrNoBreakEven, hi)
		}
		return 0, err
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		l, err := loses(mid)
		if err != nil {
			return 0, err
		}
		if l {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}
