package hedge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var policy = Policy{Quantile: 0.95, Min: 5 * time.Millisecond, Max: 500 * time.Millisecond, Budget: 0.05, Burst: 2}

func TestValidate(t *testing.T) {
	require.NoError(t, Policy{}.Validate(), "the zero policy disables hedging")
	require.False(t, Policy{}.Enabled())
	require.NoError(t, policy.Validate())
	for name, mut := range map[string]func(*Policy){
		"quantile 0":     func(p *Policy) { p.Quantile = 0 },
		"quantile 1":     func(p *Policy) { p.Quantile = 1 },
		"quantile NaN":   func(p *Policy) { p.Quantile = nan() },
		"min 0":          func(p *Policy) { p.Min = 0 },
		"max below min":  func(p *Policy) { p.Max = p.Min - 1 },
		"budget 0":       func(p *Policy) { p.Budget = 0 },
		"budget above 1": func(p *Policy) { p.Budget = 1.5 },
		"burst 0":        func(p *Policy) { p.Burst = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			p := policy
			mut(&p)
			require.Error(t, p.Validate())
		})
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestThreshold(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		want    time.Duration
	}{
		{"nothing known: the cap", nil, policy.Max},
		{"too few known: the cap", repeat(10*time.Millisecond, minSamples-1), policy.Max},
		{"learned", ramp(100), 95 * time.Millisecond},
		{"floored", repeat(time.Millisecond, 50), policy.Min},
		{"capped", repeat(time.Hour, 50), policy.Max},
		{"negative latencies count as zero", repeat(-time.Second, 50), policy.Min},
		// The window keeps the latest: 300 slow then 256 fast.
		{"forgets the oldest", append(repeat(400*time.Millisecond, 300), repeat(20*time.Millisecond, window)...), 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e Estimator
			for _, d := range tc.samples {
				e.Observe(d)
			}
			require.Equal(t, tc.want, e.Threshold(policy))
			require.Equal(t, min(len(tc.samples), window), e.Samples())
		})
	}
}

// ramp returns 1ms, 2ms, ... n ms, in an order that is not sorted.
func ramp(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range n {
		out[i] = time.Duration((i*37)%n+1) * time.Millisecond
	}
	return out
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestBudget(t *testing.T) {
	var b Budget
	require.True(t, b.Take(policy), "starts with Burst tokens")
	require.True(t, b.Take(policy))
	require.False(t, b.Take(policy), "exhausted")
	for range 19 {
		b.Earn(policy)
	}
	require.False(t, b.Take(policy), "19 requests earn 0.95 of a token")
	b.Earn(policy)
	require.True(t, b.Take(policy), "20 requests earn one")
	for range 1000 {
		b.Earn(policy)
	}
	require.True(t, b.Take(policy))
	require.True(t, b.Take(policy))
	require.False(t, b.Take(policy), "no more than Burst are kept")
}

// TestBudgetBound checks the promise: over any run, hedges are at most
// Burst plus Budget times the requests made.
func TestBudgetBound(t *testing.T) {
	var b Budget
	hedges := 0
	const requests = 10_000
	for range requests {
		b.Earn(policy)
		for b.Take(policy) {
			hedges++
		}
	}
	require.LessOrEqual(t, hedges, policy.Burst+int(policy.Budget*requests))
	require.GreaterOrEqual(t, hedges, int(policy.Budget*requests), "the budget is usable")
}
