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

// TestHedging plays tables of hedged GETs: the hedge fires, the first
// answer wins and the other is cancelled, the budget runs out, and a
// transient failure of one of a pair waits for the other.
func TestHedging(t *testing.T) {
	a0 := ent(0, 0, 9, 1, "a", "k1", 0)
	a1 := ent(1, 0, 9, 1, "a", "k2", 0)
	start := []event{
		{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
		{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
		// Nothing learned yet: the hedge is due at the cap, 200 ms.
		{2, records(msg(entries(a0), mark(0, 1, 0))), "fetch 2 a t-0:0-9@1\nlag t-0 10\nwake 202\n"},
	}
	cases := []struct {
		name   string
		events []event
		check  func(t *testing.T, c *Core)
	}{{
		name: "the hedge fires and wins: the first GET is cancelled",
		events: append(start[:3:3],
			event{201, tick(), "wake 202\n"},
			event{202, tick(), "fetch 3 hedging 2 a t-0:0-9@1\nwake 1002\n"},
			event{230, fetched(3, ok(a0)), "append 4 t-0 0-9@1\ncancel 2\nwake 60001\n"},
			event{231, appended(4, 10), "progress t-0 end 10 epoch 1 leader 2\napplied t-0 9 bytes\nlag t-0 0\nwake 60001\n"},
			event{240, fetched(2, ok(a0)), "wake 60001\n"}, // the loser's late answer is ignored
		),
		check: func(t *testing.T, c *Core) {
			require.Equal(t, uint64(1), c.Fetches)
			require.Equal(t, uint64(1), c.Hedges)
			require.Equal(t, uint64(1), c.HedgeWins)
			require.Equal(t, uint64(1), c.Applied)
			require.Equal(t, 2, c.latency["a"].Samples(), "the winner's latency, and the loser's until it was given up on")
		},
	}, {
		name: "the first GET answers first: the hedge is cancelled",
		events: append(start[:3:3],
			event{202, tick(), "fetch 3 hedging 2 a t-0:0-9@1\nwake 1002\n"},
			event{210, fetched(2, ok(a0)), "append 4 t-0 0-9@1\ncancel 3\nwake 60001\n"},
			event{211, fetched(3, ok(a0)), "wake 60001\n"},
		),
		check: func(t *testing.T, c *Core) {
			require.Equal(t, uint64(1), c.Hedges)
			require.Zero(t, c.HedgeWins)
		},
	}, {
		name: "a transient failure of one of a pair waits for the other",
		events: append(start[:3:3],
			event{202, tick(), "fetch 3 hedging 2 a t-0:0-9@1\nwake 1002\n"},
			event{205, fetched(3, failed(a0, Unavailable)), "wake 1002\n"},
			event{210, fetched(2, ok(a0)), "append 4 t-0 0-9@1\nwake 60001\n"},
		),
		check: func(t *testing.T, c *Core) {
			require.Zero(t, c.FetchErrors, "the failure was not taken")
			require.Zero(t, c.HedgeWins)
		},
	}, {
		name: "both of a pair fail: the second failure is taken",
		events: append(start[:3:3],
			event{202, tick(), "fetch 3 hedging 2 a t-0:0-9@1\nwake 1002\n"},
			event{205, fetched(2, failed(a0, Failed)), "wake 1202\n"},
			event{206, fetched(3, failed(a0, Failed)), "wake 211\n"}, // a retry after a jittered backoff
		),
		check: func(t *testing.T, c *Core) { require.Equal(t, uint64(1), c.FetchErrors) },
	}, {
		name: "a GET is hedged once",
		events: append(start[:3:3],
			event{202, tick(), "fetch 3 hedging 2 a t-0:0-9@1\nwake 1002\n"},
			event{205, fetched(3, failed(a0, Unavailable)), "wake 1002\n"},
			event{500, tick(), "wake 1002\n"},
		),
	}, {
		name: "the budget runs out: a GET goes unhedged, and the denial is counted",
		events: append(start[:2:2],
			event{1, follow(1, 1, 2), "load 2 t-1\nrewind\nwake 60001\n"},
			event{1, loaded(2, 0), "progress t-1 end 0 epoch -1 leader 2\nwake 60001\n"},
			event{2, records(msg(entries(a0), mark(0, 1, 0)), msg(entries(a1), mark(1, 1, 0))),
				"fetch 3 a t-0:0-9@1\nfetch 4 a t-1:0-9@1\nlag t-0 10\nlag t-1 10\nwake 202\n"},
			event{202, tick(), "fetch 5 hedging 3 a t-0:0-9@1\nwake 1002\n"},
		),
		check: func(t *testing.T, c *Core) {
			require.Equal(t, uint64(2), c.Fetches, "one per object")
			require.Equal(t, uint64(1), c.Hedges)
			require.Equal(t, uint64(1), c.HedgesDenied)
		},
	}, {
		name: "sections of two objects are two GETs: the slow one holds up only its own",
		events: append(start[:2:2],
			event{1, follow(1, 1, 2), "load 2 t-1\nrewind\nwake 60001\n"},
			event{1, loaded(2, 0), "progress t-1 end 0 epoch -1 leader 2\nwake 60001\n"},
			event{2, records(msg(entries(a0), mark(0, 1, 0)), msg(entries(a1), mark(1, 1, 0))),
				"fetch 3 a t-0:0-9@1\nfetch 4 a t-1:0-9@1\nlag t-0 10\nlag t-1 10\nwake 202\n"},
			event{20, fetched(4, ok(a1)), "append 5 t-1 0-9@1\nwake 202\n"},
		),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			hedgeConfig(&cfg)
			c := run(t, cfg, tc.events)
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
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
			c.Ready()
			c.Loaded(now, 1, LocalState{}, nil)
			c.Ready()
			c.Records(now, []metadata.Record{rec(t, nil, mark(0, 1, 0))})
			c.Ready()
			for i := range 25 {
				e := ent(0, int64(i*10), int64(i*10+9), 1, "a", fmt.Sprintf("k%d", i), 0)
				c.Records(now, []metadata.Record{rec(t, entries(e))})
				rd := c.Ready()
				require.Len(t, rd.Fetches, 1)
				threshold := cfg.Hedge.Max
				if i >= 20 {
					threshold = tc.want
				}
				require.Equal(t, now.Add(min(threshold, cfg.HedgeAfter)), rd.WakeAt, "fetch %d", i)
				now = now.Add(tc.latency)
				c.Fetched(now, rd.Fetches[0].ID, []Result{ok(e)})
				rd = c.Ready()
				require.Len(t, rd.Appends, 1)
				c.Appended(now, rd.Appends[0].ID, e.LastOffset+1, nil)
				c.Ready()
			}
			if tc.latency < cfg.Hedge.Max {
				require.Zero(t, c.Hedges, "every GET answered before its threshold")
			}
		})
	}
}
