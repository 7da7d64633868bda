package memstore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
)

// TestLatencyDistribution checks the sampled latencies against the model's
// median and 99th percentile, e^(2.326σ) times the median. The comments
// give the published figures the model was fitted to (docs/design.md,
// "Reference prices and latencies"). The
// whole request path's waits are checked exactly in TestLatencyWaits; this
// test samples the distribution directly, so that it can draw many large
// requests cheaply.
func TestLatencyDistribution(t *testing.T) {
	const n = 20_000
	const seed = 42
	const z99 = 2.3263
	const ms = time.Millisecond
	cases := []struct {
		profile string
		op      faults.Op
		size    int64
		median  time.Duration // the model's median at this size
		sigma   float64
	}{
		// 4 KiB GET: p50 2.5 ms, p99 9.3 ms.
		{"s3express", faults.OpGetRange, 4096, 2500*time.Microsecond + 10*ms*4096/(1<<20), 0.57},
		// 1 MB PUT ≈ 15 ms; 5 MB ≈ 55 ms.
		{"s3express", faults.OpPut, 1_000_000, 6500*time.Microsecond + 10*ms*1_000_000/(1<<20), 0.24},
		{"s3express", faults.OpPut, 5_000_000, 6500*time.Microsecond + 10*ms*5_000_000/(1<<20), 0.24},
		// GET p99 ≈ 113 ms.
		{"s3standard", faults.OpGetRange, 4096, 27*ms + time.Second*4096/90_000_000, 0.62},
		// 500 KiB PUT p99 ≈ 137 ms.
		{"s3standard", faults.OpPut, 500 << 10, 60*ms + 10*ms, 0.29},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s/%d", c.profile, c.op, c.size), func(t *testing.T) {
			p, err := ParseProfile(c.profile)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(seed, 0))
			samples := make([]time.Duration, n)
			for i := range samples {
				samples[i] = p.latency(c.op).sample(c.size, rng.NormFloat64())
			}
			slices.Sort(samples)
			median, p99 := samples[n/2], samples[n*99/100]
			wantP99 := time.Duration(float64(c.median) * math.Exp(c.sigma*z99))
			t.Logf("median %v (model %v), p99 %v (model %v)", median, c.median, p99, wantP99)
			assert.InEpsilon(t, float64(c.median), float64(median), 0.03, "median (seed %d)", seed)
			assert.InEpsilon(t, float64(wantP99), float64(p99), 0.05, "p99 (seed %d)", seed)
		})
	}
}
