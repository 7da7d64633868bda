package promexport

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/walstore"
)

// latencyHistogram exports a Meter's latency histogram as it is: its
// buckets are already Prometheus's shape.
func latencyHistogram(d *prometheus.Desc, h metering.Histogram, labels ...string) (prometheus.Metric, error) {
	buckets := make(map[float64]uint64, len(h.Counts))
	for i, b := range metering.LatencyBounds() {
		buckets[b] = h.Counts[i]
	}
	return prometheus.NewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets, labels...)
}

// Engine histograms have walstore.HistogramBucketsPerDoubling buckets per
// doubling from 1µs; the export keeps one per doubling from about 1ms to
// about 67s, where replication lag lies, each bound exactly on one of the
// engine's bucket edges so that the counts are exact.
const (
	engineStep        = walstore.HistogramBucketsPerDoubling
	engineFirstBucket = 10 * engineStep // 2^10 µs = 1.024ms
	engineLastBucket  = 26 * engineStep // 2^26 µs ≈ 67s
)

// engineHistogram exports a walstore.Histogram on the coarser buckets
// above.
func engineHistogram(d *prometheus.Desc, h walstore.Histogram, labels ...string) (prometheus.Metric, error) {
	buckets := make(map[float64]uint64, (engineLastBucket-engineFirstBucket)/engineStep+1)
	var cum uint64
	next := 0
	for i := engineFirstBucket; i <= engineLastBucket; i += engineStep {
		for ; next < i; next++ {
			cum += h.Counts[next]
		}
		buckets[walstore.BucketLow(i).Seconds()] = cum
	}
	return prometheus.NewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets, labels...)
}
