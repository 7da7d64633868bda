package followcore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/hedge"
	"github.com/activetier/activetier/metadata"
)

// hedgeConfig hedges at the p90 of the latencies seen, within 10–200 ms,
// with a budget of one hedge in a row and a tenth of a hedge per fetch.
func hedgeConfig(c *Config) {
	c.Hedge = hedge.Policy{Quantile: 0.9, Min: 10 * time.Millisecond, Max: 200 * time.Millisecond, Budget: 0.1, Burst: 1}
}

// TestHedgeThresholdLearning checks that the hedge threshold follows the
// latencies the bucket showed: at the cap before enough are known, then
// at their quantile, within the floor and the cap.
func TestHedgeThresholdLearning(t *testing.T) {
	for _, tc := range []struct {
		name    string
		latency time.Duration // of every GET answered
		want    time.Duration // the threshold learned
	}{
		{"learned", 40 * time.Millisecond, 40 * time.Millisecond},
		{"floored", time.Millisecond, 10 * time.Millisecond},
		{"capped", 500 * time.Millisecond, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			hedgeConfig(&cfg)
			cfg.Hedge.Budget = 1 // not what this test is about
			c, err := New(cfg)
			require.NoError(t, err)
			now := t0
			require.NoError(t, c.Follow(now, tp(0), 1, 2))
			take(t, c)
			c.Loaded(now, 1, LocalState{}, nil)
			take(t, c)
			c.Records(now, []metadata.Record{rec(t, nil, mark(0, 1, 0))})
			take(t, c)
			for i := range 25 {
				e := ent(0, int64(i*10), int64(i*10+9), 1, "a", fmt.Sprintf("k%d", i), 0)
				c.Records(now, []metadata.Record{rec(t, entries(e))})
				rd := take(t, c)
				require.Len(t, rd.Fetches, 1)
				threshold := cfg.Hedge.Max
				if i >= 20 {
					threshold = tc.want
				}
				require.Equal(t, now.Add(min(threshold, cfg.HedgeAfter)), rd.WakeAt, "fetch %d", i)
				now = now.Add(tc.latency)
				c.Fetched(now, rd.Fetches[0].ID, []Result{ok(e)})
				rd = take(t, c)
				require.Len(t, rd.Appends, 1)
				c.Appended(now, rd.Appends[0].ID, e.LastOffset+1, nil)
				take(t, c)
			}
			if tc.latency < cfg.Hedge.Max {
				require.Zero(t, c.Hedges, "every GET answered before its threshold")
			}
		})
	}
}
