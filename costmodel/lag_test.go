package costmodel

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLagWithoutSpreadIsWaitPlusFixedTimes(t *testing.T) {
	// σ = 0: PUT and GET take exactly their medians, so the lag is
	// U(0, 100 ms) shifted by 20 + 5 + 5 ms.
	l := Latency{PutBase: 10 * time.Millisecond, PutPerMiB: 10 * time.Millisecond,
		GetBase: 5 * time.Millisecond, MetadataDelay: 5 * time.Millisecond}
	w := Workload{BytesPerSecond: 3 * mib * 10, Partitions: 30, Brokers: 3, RF: 3, FlushInterval: 100 * time.Millisecond}
	lag, err := WorkloadLag(w, l)
	require.NoError(t, err)
	assert.Equal(t, 100*time.Millisecond, lag.CutInterval)
	assert.Equal(t, 20*time.Millisecond, lag.PutMedian) // 1 MiB objects
	assert.Equal(t, 5*time.Millisecond, lag.GetMedian)
	assert.InDelta(t, float64(30*time.Millisecond+50*time.Millisecond), float64(lag.P50), float64(time.Microsecond))
	assert.InDelta(t, float64(30*time.Millisecond+99*time.Millisecond), float64(lag.P99), float64(time.Microsecond))
}

func TestLagQuantilesMatchMonteCarlo(t *testing.T) {
	rng, seed := testRand(t)
	// The tolerance covers the simulation's own error: the sampled p99 of
	// 400k draws has a relative standard error of about 0.6% per unit of σ
	// where the lognormal tail dominates, so the heavy-tailed case gets 4%.
	for _, tc := range []struct {
		name string
		l    Latency
		w    Workload
		tol  float64
	}{
		{"S3 Express, 1.7 MB objects", S3ExpressLatency(),
			Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3, FlushInterval: 100 * time.Millisecond}, 0.01},
		{"S3 Express, tiny objects, wait shorter than PUT", S3ExpressLatency(),
			Workload{BytesPerSecond: 1e6, Partitions: 10, Brokers: 6, RF: 3, FlushInterval: 2 * time.Millisecond}, 0.01},
		{"S3 Standard, 9 MB objects", S3StandardLatency(),
			Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3, FlushInterval: 539 * time.Millisecond}, 0.01},
		{"heavy tails", Latency{PutBase: time.Millisecond, PutSigma: 1.5, GetBase: time.Millisecond, GetSigma: 2},
			Workload{BytesPerSecond: 1e6, Partitions: 10, Brokers: 3, RF: 2, FlushInterval: 10 * time.Millisecond}, 0.04},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lag, err := WorkloadLag(tc.w, tc.l)
			require.NoError(t, err)
			const n = 400_000
			samples := make([]float64, n)
			put, get := lag.PutMedian.Seconds(), lag.GetMedian.Seconds()
			for i := range samples {
				samples[i] = rng.Float64()*lag.CutInterval.Seconds() +
					put*math.Exp(tc.l.PutSigma*rng.NormFloat64()) +
					get*math.Exp(tc.l.GetSigma*rng.NormFloat64()) + tc.l.MetadataDelay.Seconds()
			}
			slices.Sort(samples)
			assert.InEpsilon(t, samples[n/2], lag.P50.Seconds(), tc.tol, "p50 (seed %d)", seed)
			assert.InEpsilon(t, samples[n*99/100], lag.P99.Seconds(), tc.tol, "p99 (seed %d)", seed)
		})
	}
}

func TestLagGrowsWithFlushInterval(t *testing.T) {
	w := Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3}
	var prev Lag
	for _, iv := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, time.Second} {
		w.FlushInterval = iv
		lag, err := WorkloadLag(w, S3ExpressLatency())
		require.NoError(t, err)
		assert.Greater(t, lag.P50, prev.P50)
		assert.Greater(t, lag.P99, prev.P99)
		assert.Greater(t, lag.P99, lag.P50)
		assert.Greater(t, lag.PutMedian, prev.PutMedian, "bigger objects take longer to PUT")
		prev = lag
	}
}

func TestLatencyPresetsMatchReferenceFits(t *testing.T) {
	lognormalP99 := func(median time.Duration, sigma float64) time.Duration {
		return time.Duration(float64(median) * math.Exp(sigma*normalQuantile(0.99)))
	}
	x := S3ExpressLatency()
	require.NoError(t, x.Validate())
	putMedian := func(l Latency, bytes float64) time.Duration {
		return l.PutBase + time.Duration(float64(l.PutPerMiB)*bytes/mib)
	}
	// docs/design.md, "Reference prices and latencies": a PUT of 1 MB takes
	// about 15 ms, of 5 MB about 55 ms; a 4 KiB GET p50 2.5 ms, p99 9.3 ms.
	assert.InEpsilon(t, 15*time.Millisecond, putMedian(x, 1e6), 0.1)
	assert.InEpsilon(t, 55*time.Millisecond, putMedian(x, 5e6), 0.1)
	assert.InEpsilon(t, 9.3e6, float64(lognormalP99(x.GetBase, x.GetSigma)), 0.02)

	s := S3StandardLatency()
	require.NoError(t, s.Validate())
	// The same section: GET p99 ≈ 113 ms; PUT of 500 KiB p99 ≈ 137 ms.
	assert.InEpsilon(t, 113e6, float64(lognormalP99(s.GetBase, s.GetSigma)), 0.02)
	assert.InEpsilon(t, 137e6, float64(lognormalP99(putMedian(s, 500*1024), s.PutSigma)), 0.05)
}

func TestLatencyRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		field string
		mod   func(*Latency)
	}{
		{"Latency.PutBase", func(l *Latency) { l.PutBase = 0 }},
		{"Latency.GetBase", func(l *Latency) { l.GetBase = -time.Millisecond }},
		{"Latency.PutPerMiB", func(l *Latency) { l.PutPerMiB = -1 }},
		{"Latency.GetPerMiB", func(l *Latency) { l.GetPerMiB = -1 }},
		{"Latency.MetadataDelay", func(l *Latency) { l.MetadataDelay = -1 }},
		{"Latency.PutSigma", func(l *Latency) { l.PutSigma = -0.1 }},
		{"Latency.GetSigma", func(l *Latency) { l.GetSigma = math.NaN() }},
		{"Latency.GetSigma", func(l *Latency) { l.GetSigma = 5 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			l := S3ExpressLatency()
			tc.mod(&l)
			w := Workload{BytesPerSecond: 1e6, Partitions: 1, Brokers: 2, RF: 2, FlushInterval: time.Second}
			_, err := WorkloadLag(w, l)
			require.ErrorIs(t, err, ErrInvalid)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
		})
	}
}

func TestLagOfHugeObjectsIsAnError(t *testing.T) {
	w := Workload{BytesPerSecond: 1e300, Partitions: 1, Brokers: 2, RF: 2, FlushInterval: time.Second}
	_, err := WorkloadLag(w, S3ExpressLatency())
	assert.ErrorIs(t, err, ErrInvalid)
}
