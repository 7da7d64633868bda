package costmodel

import (
	"errors"
	"math"
	"testing"
	"time"
)

// FuzzWorkloadCost checks that any workload either is rejected with an error
// naming a field, or gets an estimate and a lag with no NaN, no Inf and no
// negative cost.
func FuzzWorkloadCost(f *testing.F) {
	f.Add(100e6, 1000, 6, 3, int64(100*time.Millisecond), int64(0), 0.0, 0.0, 0.0, 0)
	f.Add(3e6, 100, 101, 2, int64(100*time.Millisecond), int64(0), 0.0, 100.0, 1.0, 0)
	f.Add(1e3, 1000, 100, 3, int64(10*time.Second), int64(0), 16384.0, 0.0, 2.5, 50)
	f.Add(1e12, 1, 2, 2, int64(1), int64(1), 1e-300, 0.0, 0.0, 1)
	f.Add(1e-300, 1<<30, 1<<30, 4, int64(math.MaxInt64), int64(math.MaxInt64), 1e300, 0.0, 0.0, 0)
	f.Fuzz(func(t *testing.T, bps float64, partitions, brokers, rf int, flush, maxObject int64,
		batch, followers, ranges float64, metaPartitions int) {
		w := Workload{
			BytesPerSecond: bps, Partitions: partitions, Brokers: brokers, RF: rf,
			FlushInterval: time.Duration(flush), MaxObjectBytes: maxObject, BatchBytes: batch,
			FollowersPerObject: followers, RangesPerFollower: ranges, MetadataPartitions: metaPartitions,
		}
		e, err := WorkloadCost(S3Express2025(), w)
		if err != nil {
			var fe *FieldError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("error does not name a field: %v", err)
			}
			return
		}
		requireFinite(t, e)
		lag, err := WorkloadLag(w, S3ExpressLatency())
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("lag error is not ErrInvalid: %v", err)
			}
			return
		}
		if lag.P50 < 0 || lag.P99 < lag.P50 {
			t.Fatalf("lag quantiles out of order: %+v", lag)
		}
	})
}
