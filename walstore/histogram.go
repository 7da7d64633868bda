package walstore

import (
	"math"
	"sync"
	"time"
)

// HistogramBucketsPerDoubling is how finely a Histogram divides each
// doubling of duration. Its buckets cover 1µs to about 1.2 hours, and a
// quantile it reports is within one bucket, 2^(1/16)-1 ≈ 4.4%, above the
// true value: fine enough that a p99 compared with a bound of a few
// hundred milliseconds is judged by the data, not by where a bucket edge
// happens to fall.
const HistogramBucketsPerDoubling = 16

const histBuckets = 32 * HistogramBucketsPerDoubling

// Histogram is a snapshot of a latency distribution.
type Histogram struct {
	// Counts[i] is the number of samples in bucket i; bucket i holds
	// durations in [BucketLow(i), BucketLow(i+1)).
	Counts [histBuckets]uint64
	Count  uint64
	Sum    time.Duration
	Max    time.Duration
}

// BucketLow returns the smallest duration that falls in bucket i.
func BucketLow(i int) time.Duration {
	if i <= 0 {
		return 0
	}
	return time.Duration(math.Exp2(float64(i)/HistogramBucketsPerDoubling) * float64(time.Microsecond))
}

func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	i := int(math.Log2(us) * HistogramBucketsPerDoubling)
	if i >= histBuckets {
		return histBuckets - 1
	}
	return i
}

// Quantile returns an estimate of the q-quantile (0 ≤ q ≤ 1): the upper edge
// of the bucket holding it, capped at Max. It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.Count)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= rank {
			return min(BucketLow(i+1), h.Max)
		}
	}
	return h.Max
}

// Mean returns the average sample, or 0 for an empty histogram.
func (h *Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	for i := range h.Counts {
		h.Counts[i] += o.Counts[i]
	}
	h.Count += o.Count
	h.Sum += o.Sum
	h.Max = max(h.Max, o.Max)
}

// Since returns the samples h holds that prev, an earlier snapshot of the
// same recorder, did not: what was observed in between. Its Max is h's, an
// upper bound that Quantile uses only as a cap.
func (h *Histogram) Since(prev *Histogram) Histogram {
	d := *h
	for i := range d.Counts {
		d.Counts[i] -= prev.Counts[i]
	}
	d.Count -= prev.Count
	d.Sum -= prev.Sum
	return d
}

// histogram is the concurrent recorder behind a Histogram snapshot.
type histogram struct {
	mu sync.Mutex
	h  Histogram
}

func (r *histogram) observe(d time.Duration) {
	r.mu.Lock()
	r.h.Observe(d)
	r.mu.Unlock()
}

// Observe adds one sample to h; a negative one counts as zero. It lets a
// caller that measures its own latencies (a direct reader's lag, say)
// summarise them as the engines do. h is not safe for concurrent use.
func (h *Histogram) Observe(d time.Duration) {
	d = max(d, 0)
	h.Counts[bucketOf(d)]++
	h.Count++
	h.Sum += d
	h.Max = max(h.Max, d)
}

func (r *histogram) snapshot() Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.h
}
