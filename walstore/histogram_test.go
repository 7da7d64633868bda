package walstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/walstore"
)

// Observe summarises samples as the engines' histograms do: quantiles
// within a bucket (4.4%) of the true value and never above the maximum; a
// negative sample counts as zero.
func TestHistogramObserve(t *testing.T) {
	var h walstore.Histogram
	for i := 1; i <= 100; i++ {
		h.Observe(time.Duration(i) * time.Millisecond)
	}
	h.Observe(-time.Second)
	require.Equal(t, uint64(101), h.Count)
	require.Equal(t, 100*time.Millisecond, h.Max)
	require.Equal(t, 5050*time.Millisecond, h.Sum)
	require.InEpsilon(t, float64(50*time.Millisecond), float64(h.Quantile(0.5)), 0.045)
	require.InEpsilon(t, float64(99*time.Millisecond), float64(h.Quantile(0.99)), 0.045)
	require.LessOrEqual(t, h.Quantile(1), h.Max)
}

// Since is what was observed between two snapshots of one recorder.
func TestHistogramSince(t *testing.T) {
	var h walstore.Histogram
	for i := 1; i <= 100; i++ {
		h.Observe(time.Duration(i) * time.Millisecond)
	}
	prev := h
	for i := 1; i <= 100; i++ {
		h.Observe(time.Second + time.Duration(i)*time.Millisecond)
	}
	d := h.Since(&prev)
	require.Equal(t, uint64(100), d.Count)
	require.Equal(t, 100*time.Second+5050*time.Millisecond, d.Sum)
	require.InEpsilon(t, float64(1050*time.Millisecond), float64(d.Quantile(0.5)), 0.045)
	require.GreaterOrEqual(t, d.Quantile(0.5), 1050*time.Millisecond, "quantiles are bucket upper edges")
	require.Equal(t, h.Max, d.Quantile(1))
}
