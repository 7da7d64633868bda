package hedge

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Policy configures when to hedge. The zero Policy disables hedging.
type Policy struct {
	// Quantile is the latency quantile a request may reach before it is
	// hedged, in (0, 1); Amazon's guidance suggests 0.95 to 0.99.
	Quantile float64
	// Min and Max bound the threshold: Min keeps a fast store from being
	// sent every request twice, Max is the threshold while too few
	// latencies have been seen, and caps one learned from a slow spell.
	Min, Max time.Duration
	// Budget is the most extra requests as a fraction of requests made,
	// e.g. 0.05 for 5%; Burst is how many may be sent in a row before
	// the fraction applies.
	Budget float64
	Burst  int
}

// Enabled reports whether p hedges at all.
func (p Policy) Enabled() bool { return p != Policy{} }

// Validate reports a Policy that cannot be used. The zero Policy is valid.
func (p Policy) Validate() error {
	if !p.Enabled() {
		return nil
	}
	switch {
	case !(p.Quantile > 0 && p.Quantile < 1):
		return fmt.Errorf("hedge: Quantile %v is not in (0, 1)", p.Quantile)
	case p.Min <= 0 || p.Max < p.Min:
		return fmt.Errorf("hedge: Min %v must be positive and Max %v at least Min", p.Min, p.Max)
	case !(p.Budget > 0 && p.Budget <= 1) || p.Burst <= 0:
		return fmt.Errorf("hedge: Budget %v must be in (0, 1] and Burst %d positive", p.Budget, p.Burst)
	}
	return nil
}

// window is how many of the latest latencies an Estimator keeps: enough
// for a p99 to rest on a few samples, few enough to follow a change of
// the store's behaviour within seconds.
const window = 256

// minSamples is how many latencies an Estimator wants before it trusts
// its quantile; until then the threshold is Policy.Max.
const minSamples = 20

// Estimator learns one store's latency quantile from its latest
// observations. The zero Estimator is ready to use.
type Estimator struct {
	ring   []time.Duration
	next   int
	cached time.Duration
	stale  bool
}

// Observe records one request's latency. A request that was hedged and
// lost is observed at the time it was given up on: a lower bound of its
// latency, which keeps the estimate from learning only the winners.
func (e *Estimator) Observe(d time.Duration) {
	d = max(d, 0)
	if len(e.ring) < window {
		e.ring = append(e.ring, d)
	} else {
		e.ring[e.next] = d
		e.next = (e.next + 1) % window
	}
	e.stale = true
}

// Samples returns how many latencies the estimate rests on.
func (e *Estimator) Samples() int { return len(e.ring) }

// Threshold returns how long a request may go unanswered before it is
// hedged under p: the learned quantile within [p.Min, p.Max], or p.Max
// while fewer than minSamples latencies are known.
func (e *Estimator) Threshold(p Policy) time.Duration {
	if len(e.ring) < minSamples {
		return p.Max
	}
	if e.stale {
		sorted := slices.Clone(e.ring)
		slices.Sort(sorted)
		// The nearest-rank quantile: the smallest sample with at least a
		// fraction q of the samples at or below it.
		i := int(math.Ceil(p.Quantile*float64(len(sorted)))) - 1
		e.cached, e.stale = sorted[max(i, 0)], false
	}
	return min(max(e.cached, p.Min), p.Max)
}

// Budget bounds hedges to a fraction of the requests made: every request
// earns Policy.Budget of a token, a hedge spends one, and at most
// Policy.Burst tokens are kept. It starts full. Tokens are counted in
// thousandths, so that the same calls give the same answers everywhere.
type Budget struct {
	milli   int64
	started bool
}

// Earn records one request made under p.
func (b *Budget) Earn(p Policy) {
	b.fill(p)
	b.milli = min(b.milli+int64(math.Round(p.Budget*1000)), int64(p.Burst)*1000)
}

// Take spends a token for one hedge under p, and reports false, spending
// nothing, if the budget is exhausted.
func (b *Budget) Take(p Policy) bool {
	b.fill(p)
	if b.milli < 1000 {
		return false
	}
	b.milli -= 1000
	return true
}

func (b *Budget) fill(p Policy) {
	if !b.started {
		b.started, b.milli = true, int64(p.Burst)*1000
	}
}
