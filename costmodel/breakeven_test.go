package costmodel

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBreakEvenThroughput(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Workload
	}{
		{"RF=3, 6 brokers, 100 ms", Workload{Partitions: 1000, Brokers: 6, RF: 3, FlushInterval: 100 * time.Millisecond}},
		{"RF=2, 6 brokers, 100 ms", Workload{Partitions: 1000, Brokers: 6, RF: 2, FlushInterval: 100 * time.Millisecond}},
		{"RF=3, 30 brokers, 20 ms", Workload{Partitions: 1000, Brokers: 30, RF: 3, FlushInterval: 20 * time.Millisecond}},
		{"sparse partitions", Workload{Partitions: 1000, Brokers: 30, RF: 3, FlushInterval: 20 * time.Millisecond, BatchBytes: 16 << 10}},
		{"shared metadata partitions", Workload{Partitions: 1000, Brokers: 100, RF: 3, FlushInterval: 100 * time.Millisecond, MetadataPartitions: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := BreakEvenThroughput(S3Express2025(), tc.w)
			require.NoError(t, err)
			t.Logf("break-even at %.4g MB/s", x/1e6)
			savings := func(bps float64) Comparison {
				w := tc.w
				w.BytesPerSecond = bps
				e, err := WorkloadCost(S3Express2025(), w)
				require.NoError(t, err)
				return e.PerSecond
			}
			assert.Negative(t, savings(x*(1-1e-6)).SavingsUSD)
			assert.Positive(t, savings(x*(1+1e-6)).SavingsUSD)
			assert.InDelta(t, 0, savings(x).SavingsRatio, 1e-6)
		})
	}
}

func TestBreakEvenThroughputHundredMBpsSetting(t *testing.T) {
	// The headline setting: RF=3, 1000 partitions, 6 brokers, 100 ms
	// flush. activetier pays above ~2.9 MB/s, i.e. ~3 KB/s per partition.
	x, err := BreakEvenThroughput(S3Express2025(),
		Workload{Partitions: 1000, Brokers: 6, RF: 3, FlushInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	assert.InDelta(t, 2.92e6, x, 0.01e6)
}

func TestBreakEvenThroughputNone(t *testing.T) {
	discounted := S3Express2025()
	discounted.CrossAZOutPerGB, discounted.CrossAZInPerGB = 0.001, 0.001
	for _, tc := range []struct {
		name string
		p    Prices
		w    Workload
		msg  string
	}{
		{"per-byte fees above cross-AZ", discounted,
			Workload{Partitions: 100, Brokers: 3, RF: 3, FlushInterval: time.Second}, "never pays"},
		{"a tiny size cap keeps requests per byte high", S3Express2025(),
			Workload{Partitions: 100, Brokers: 3, RF: 3, FlushInterval: time.Second, MaxObjectBytes: 1000}, "MaxObjectBytes"},
		{"100 MB producer batches pay even one at a time", S3Express2025(),
			Workload{Partitions: 100, Brokers: 3, RF: 3, FlushInterval: time.Second, BatchBytes: 100e6}, "every throughput"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BreakEvenThroughput(tc.p, tc.w)
			require.ErrorIs(t, err, ErrNoBreakEven)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestSavingsTurnNegativeAsTheClusterGrows(t *testing.T) {
	// 100 MB/s over 1000 partitions at a 100 ms flush: the same bytes,
	// spread over more leaders, make more and smaller objects, each read by
	// more followers.
	p := S3Express2025()
	w := Workload{BytesPerSecond: 100e6, Partitions: 1000, RF: 3, FlushInterval: 100 * time.Millisecond}
	n, err := BreakEvenBrokers(p, w)
	require.NoError(t, err)
	t.Logf("activetier stops paying at %d brokers", n)
	assert.Equal(t, 251, n)

	prev := 1.0
	for _, brokers := range []int{3, 6, 30, 100, n - 1, n, 1000} {
		v := w
		v.Brokers = brokers
		e, err := WorkloadCost(p, v)
		require.NoError(t, err)
		ratio := e.PerSecond.SavingsRatio
		assert.Less(t, ratio, prev, "%d brokers", brokers)
		assert.Equal(t, brokers >= n, ratio < 0, "%d brokers: savings %.3f", brokers, ratio)
		prev = ratio
	}
}

func TestBreakEvenBrokersNone(t *testing.T) {
	_, err := BreakEvenBrokers(S3Express2025(),
		Workload{BytesPerSecond: 1e3, Partitions: 1000, RF: 3, FlushInterval: 100 * time.Millisecond})
	require.ErrorIs(t, err, ErrNoBreakEven)
	assert.ErrorContains(t, err, "already at 3 brokers")

	_, err = BreakEvenBrokers(S3Express2025(),
		Workload{BytesPerSecond: 1e9, Partitions: 100, RF: 3, FlushInterval: 100 * time.Millisecond})
	require.ErrorIs(t, err, ErrNoBreakEven)
	assert.ErrorContains(t, err, "still pays at 101 brokers")
}

func TestBreakEvenBrokersNeedsDerivedPlacement(t *testing.T) {
	base := Workload{BytesPerSecond: 1e8, Partitions: 1000, RF: 3, FlushInterval: 100 * time.Millisecond}
	for _, tc := range []struct {
		field string
		mod   func(*Workload)
	}{
		{"Workload.Leaders", func(w *Workload) { w.Leaders = 3 }},
		{"Workload.FollowersPerObject", func(w *Workload) { w.FollowersPerObject = 2 }},
		{"Workload.MaxObjectBytes", func(w *Workload) { w.MaxObjectBytes = 1 << 20 }},
		{"Workload.RF", func(w *Workload) { w.RF = 1 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			w := base
			tc.mod(&w)
			_, err := BreakEvenBrokers(S3Express2025(), w)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
		})
	}
}
