package costmodel

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWaitCutInterval(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		interval, delay, rate float64
		want                  float64
	}{
		{"no waits", 0.1, 0.002, 0, 0.1},
		{"no bound", 0.1, 0, 50, 0.1},
		{"bound not below the interval", 0.1, 0.1, 50, 0.1},
		{"a waiter at every moment", 0.1, 0.002, math.Inf(1), 0.002},
		// 0.002 + (1 - e^(-10·0.098)) / 10
		{"ten waits a second", 0.1, 0.002, 10, 0.002 + (1-math.Exp(-0.98))/10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InEpsilon(t, tc.want, WaitCutInterval(tc.interval, tc.delay, tc.rate), exact)
		})
	}
}

// Waited appends raise the PUT rate from the interval's towards one per
// WaitCutDelay per leader, monotonically in the fraction that waits, and
// PutsPerSecondWithoutWaits is the rate of the same workload without them.
func TestWorkloadCostWithWaits(t *testing.T) {
	base := Workload{BytesPerSecond: 30e6, Partitions: 300, BatchBytes: 16 << 10, Brokers: 3, RF: 3,
		FlushInterval: 100 * time.Millisecond, WaitCutDelay: 2 * time.Millisecond}
	none, err := WorkloadCost(S3Express2025(), base)
	require.NoError(t, err)
	ceiling := float64(none.Workload.Leaders) / base.WaitCutDelay.Seconds()
	prev := none.PutsPerSecond
	assert.InEpsilon(t, none.PutsPerSecond, none.PutsPerSecondWithoutWaits, exact)
	for _, f := range []float64{0.01, 0.1, 0.5, 1} {
		w := base
		w.WaitFraction = f
		e, err := WorkloadCost(S3Express2025(), w)
		require.NoError(t, err)
		assert.Greater(t, e.PutsPerSecond, prev, "fraction %v", f)
		assert.LessOrEqual(t, e.PutsPerSecond, ceiling, "fraction %v", f)
		assert.InEpsilon(t, none.PutsPerSecond, e.PutsPerSecondWithoutWaits, exact, "fraction %v", f)
		assert.Greater(t, e.PerSecond.ActiveTier.PutUSD, none.PerSecond.ActiveTier.PutUSD, "fraction %v", f)
		prev = e.PutsPerSecond
	}

	// Without BatchBytes the appends' rate is unknown: a waiter in every
	// bound, the ceiling.
	w := base
	w.BatchBytes, w.WaitFraction = 0, 0.01
	e, err := WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)
	assert.InEpsilon(t, ceiling, e.PutsPerSecond, exact)
	assert.Equal(t, base.WaitCutDelay, e.CutInterval)
}

func TestWorkloadWaitsValidated(t *testing.T) {
	base := Workload{BytesPerSecond: 1e6, Partitions: 10, Brokers: 3, RF: 3, FlushInterval: 100 * time.Millisecond}
	for _, tc := range []struct {
		name string
		mod  func(*Workload)
	}{
		{"fraction above 1", func(w *Workload) { w.WaitFraction = 1.5 }},
		{"negative fraction", func(w *Workload) { w.WaitFraction = -0.1 }},
		{"NaN fraction", func(w *Workload) { w.WaitFraction = math.NaN() }},
		{"negative delay", func(w *Workload) { w.WaitCutDelay = -time.Millisecond }},
		{"delay above the interval", func(w *Workload) { w.WaitCutDelay = time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := base
			tc.mod(&w)
			var fe *FieldError
			require.ErrorAs(t, w.Validate(), &fe)
			assert.Contains(t, fe.Field, "Wait")
		})
	}
}
