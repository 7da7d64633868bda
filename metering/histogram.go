package metering

import (
	"slices"
	"sync/atomic"
	"time"
)

// latencyBounds are the upper bounds, in seconds, of the latency
// histograms' buckets: from half a millisecond (S3 Express One Zone answers
// small requests in single-digit milliseconds) to ten seconds (a request
// that slow is an outage, and the engines' timeouts take over).
var latencyBounds = [...]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// LatencyBounds returns the upper bounds, in seconds, of the latency
// histograms' buckets, from half a millisecond to ten seconds.
func LatencyBounds() []float64 { return slices.Clone(latencyBounds[:]) }

// Histogram is a snapshot of a latency distribution in the shape Prometheus
// histograms have: Counts[i] is the number of samples of at most
// latencyBounds[i] seconds (cumulative), Count all samples, Sum their total.
type Histogram struct {
	Counts [len(latencyBounds)]uint64
	Count  uint64
	Sum    time.Duration
}

// latency records samples with atomic adds only: it is on every request's
// path, and a lock there would serialise concurrent uploads and fetches.
type latency struct {
	counts [len(latencyBounds) + 1]atomic.Uint64 // the last bucket is +Inf
	sum    atomic.Int64
}

func (l *latency) observe(d time.Duration) {
	if d < 0 {
		d = 0
	}
	s := d.Seconds()
	i := 0
	for i < len(latencyBounds) && s > latencyBounds[i] {
		i++
	}
	l.counts[i].Add(1)
	l.sum.Add(int64(d))
}

func (l *latency) snapshot() Histogram {
	var h Histogram
	var cum uint64
	for i := range l.counts {
		cum += l.counts[i].Load()
		if i < len(h.Counts) {
			h.Counts[i] = cum
		}
	}
	h.Count = cum
	h.Sum = time.Duration(l.sum.Load())
	return h
}
