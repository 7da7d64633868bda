package followcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/internal/hedge"
	"github.com/activetier/activetier/metadata"
)

func ep(epoch int32, start int64) fencing.EpochEntry {
	return fencing.EpochEntry{Epoch: epoch, StartOffset: start}
}

func entries(es ...metadata.Entry) []metadata.Entry { return es }

// TestInteractions plays tables of events and checks every Ready.
func TestInteractions(t *testing.T) {
	a0 := ent(0, 0, 9, 1, "a", "k1", 0)
	a1 := ent(1, 0, 4, 1, "a", "k1", 10)
	a0next := ent(0, 10, 19, 1, "a", "k2", 0)
	b0 := ent(0, 0, 9, 1, "b", "k9", 0) // a republished copy of a0 elsewhere
	forged := a0
	forged.WriterBrokerID = 3
	e2 := ent(0, 10, 19, 2, "a", "k3", 0)
	zombie := ent(0, 5, 9, 1, "a", "k4", 0)

	cases := []struct {
		name   string
		cfg    func(*Config)
		events []event
		check  func(t *testing.T, c *Core)
	}{{
		name: "a new partition loads, fetches, appends and reports",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			{2, records(msg(entries(a0), mark(0, 1, 0))), "fetch 2 a t-0:0-9@1\nlag t-0 10\nwake 1002\n"},
			{5, fetched(2, ok(a0)), "append 3 t-0 0-9@1\nwake 60001\n"},
			{6, appended(3, 10), "progress t-0 end 10 epoch 1 leader 2\napplied t-0 9 bytes\nlag t-0 0\nwake 60001\n"},
		},
		check: func(t *testing.T, c *Core) {
			require.Equal(t, uint64(1), c.Applied)
			require.Equal(t, uint64(1), c.Messages)
			require.Zero(t, c.Held)
		},
	}, {
		name: "one object's sections for two partitions: one round, and one bad entry fails alone",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{0, follow(1, 1, 2), "load 2 t-1\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			{1, loaded(2, 0), "progress t-1 end 0 epoch -1 leader 2\nwake 60001\n"},
			{2, records(msg(entries(a0, a1), mark(0, 1, 0), mark(1, 1, 0))), "fetch 3 a t-0:0-9@1 t-1:0-4@1\nlag t-0 10\nlag t-1 5\nwake 1002\n"},
			{5, fetched(3, failed(a0, Gone), ok(a1)), "append 4 t-1 0-4@1\nwake 60001\n"},
			{6, appended(4, 5), "progress t-1 end 5 epoch 1 leader 2\napplied t-1 9 bytes\nlag t-1 0\nwake 60001\n"},
		},
		check: func(t *testing.T, c *Core) {
			require.Equal(t, uint64(1), c.NotFound)
			require.Zero(t, c.Held, "the entry that is gone is given up on")
		},
	}, {
		name: "fetches read ahead while an append is outstanding",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			{2, records(msg(entries(a0), mark(0, 1, 0))), "fetch 2 a t-0:0-9@1\nlag t-0 10\nwake 1002\n"},
			{3, fetched(2, ok(a0)), "append 3 t-0 0-9@1\nwake 60001\n"},
			{4, records(msg(entries(a0next))), "fetch 4 a t-0:10-19@1\nlag t-0 20\nwake 1004\n"},
			{5, appended(3, 10), "progress t-0 end 10 epoch 1 leader 2\napplied t-0 9 bytes\nlag t-0 10\nwake 1004\n"},
			{6, fetched(4, ok(a0next)), "append 5 t-0 10-19@1\nwake 60001\n"},
		},
	}, {
		name: "metadata that comes while the partition loads is handled once it has",
		events: []event{
			{0, follow(0, 2, 2), "load 1 t-0\nrewind\n"},
			{1, records(msg(nil, mark(0, 1, 0), mark(0, 2, 5))), ""},
			// The marker of epoch 2 fences the log's tail at once.
			{2, loaded(1, 10, ep(1, 0)), "truncate 2 t-0 to 5 at batch\nprogress t-0 end 10 epoch 1 leader 2\nwake 60002\n"},
		},
	}, {
		name: "an entry of the known epoch from a broker that is not its leader is ignored",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			{2, records(msg(entries(forged), mark(0, 1, 0))), "wake 60001\n"},
		},
		check: func(t *testing.T, c *Core) { require.Equal(t, uint64(1), c.Forged) },
	}, {
		name: "markers of an epoch the broker does not know wait for it",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 10, ep(1, 0)), "progress t-0 end 10 epoch 1 leader 2\nwake 60001\n"},
			// Epoch 2 starting at 10: held until the broker is told.
			{2, records(msg(entries(e2), mark(0, 1, 0), mark(0, 2, 10))), "lag t-0 10\nwake 60001\n"},
			{3, follow(0, 2, 2), "fetch 2 a t-0:10-19@2\nprogress t-0 end 10 epoch 1 leader 2\nwake 1003\n"},
		},
	}, {
		name: "a known epoch whose markers have not come holds every entry",
		events: []event{
			{0, follow(0, 2, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			// A zombie of epoch 1 publishes 0-9; the broker knows epoch 2.
			{2, records(msg(entries(a0), mark(0, 1, 0))), "lag t-0 10\nwake 60001\n"},
			// Epoch 2 starts at 5: only 0-4 of the zombie's entry is the log.
			{3, records(msg(nil, mark(0, 1, 0), mark(0, 2, 5))), "fetch 2 a t-0:0-9@1\nwake 1003\n"},
			{4, fetched(2, ok(a0)), "wake 60001\n"},
		},
		check: func(t *testing.T, c *Core) {
			require.Equal(t, uint64(1), c.Dropped, "a batch straddling the epoch's end does not describe the lineage")
		},
	}, {
		name: "a log that diverged is truncated at a batch boundary, then metadata is read again",
		events: []event{
			{0, follow(0, 2, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 10, ep(1, 0)), "progress t-0 end 10 epoch 1 leader 2\nwake 60001\n"},
			{2, records(msg(nil, mark(0, 1, 0), mark(0, 2, 5))), "truncate 2 t-0 to 5 at batch\nwake 60001\n"},
			// The batch holding offset 5 starts at 0: the log truncates there.
			{3, truncated(2, 0, 0), "progress t-0 end 0 epoch -1 leader 2\nlag t-0 10\nrewind\nwake 60001\n"},
			{4, records(msg(entries(zombie))), "wake 60001\n"},
		},
		check: func(t *testing.T, c *Core) {
			require.Equal(t, uint64(1), c.Truncations)
			require.Equal(t, uint64(1), c.Dropped, "the zombie's entry above the fence is dropped")
		},
	}, {
		name: "a truncation the log did not do as asked sets the partition aside",
		events: []event{
			{0, follow(0, 2, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 10, ep(1, 0)), "progress t-0 end 10 epoch 1 leader 2\nwake 60001\n"},
			{2, records(msg(nil, mark(0, 1, 0), mark(0, 2, 5))), "truncate 2 t-0 to 5 at batch\nwake 60001\n"},
			{3, truncated(2, 7, 7), "failing t-0 since 3: truncating to 5: followcore: the local log's answer breaks its contract: truncated to 7 when asked for 5\nwake 2003\n"},
			{2003, tick(), "load 3 t-0\nwake 60001\n"},
			{2004, loaded(3, 5, ep(1, 0)), "progress t-0 end 5 epoch 1 leader 2\nrewind\nwake 4004\n"},
		},
		check: func(t *testing.T, c *Core) { require.Equal(t, uint64(1), c.LocalErrors) },
	}, {
		name: "an empty trailing epoch is trimmed when loading",
		events: []event{
			{0, follow(0, 3, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 10, ep(1, 0), ep(2, 10)), "truncate 2 t-0 to 10\n"},
			{2, truncated(2, 10, 10), "progress t-0 end 10 epoch 1 leader 2\nwake 60002\n"},
			{3, records(msg(entries(ent(0, 10, 19, 1, "a", "k5", 0)), mark(0, 1, 0), mark(0, 3, 20))), "fetch 3 a t-0:10-19@1\nlag t-0 10\nwake 1003\n"},
		},
	}, {
		name: "a local log that fails rests, then starts again and reads the metadata again",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loadFailed(1), "failing t-0 since 1: loading the local log: disk gone\nwake 2001\n"},
			{2, records(msg(entries(a0), mark(0, 1, 0))), "wake 2001\n"},
			{2001, tick(), "load 2 t-0\n"},
			{2002, loaded(2, 0), "progress t-0 end 0 epoch -1 leader 2\nrewind\nwake 4002\n"},
			{2003, records(msg(entries(a0), mark(0, 1, 0))), "fetch 3 a t-0:0-9@1\nlag t-0 10\nwake 3003\n"},
			{2004, fetched(3, ok(a0)), "append 4 t-0 0-9@1\nwake 4002\n"},
			// Failing still, since the first failure: a load that works
			// does not say the append will.
			{2005, appendFailed(4), "failing t-0 since 1: appending at 0: disk full\nwake 4002\n"},
			{4005, tick(), "load 5 t-0\n"},
			{4006, loaded(5, 0), "progress t-0 end 0 epoch -1 leader 2\nlag t-0 0\nrewind\nwake 6006\n"},
			{4007, records(msg(entries(a0), mark(0, 1, 0))), "fetch 6 a t-0:0-9@1\nlag t-0 10\nwake 5007\n"},
			{4008, fetched(6, ok(a0)), "append 7 t-0 0-9@1\nwake 6006\n"},
			{4009, appended(7, 10), "progress t-0 end 10 epoch 1 leader 2\napplied t-0 9 bytes\nlag t-0 0\nrecovered t-0\nwake 6006\n"},
		},
		check: func(t *testing.T, c *Core) { require.Equal(t, uint64(2), c.LocalErrors) },
	}, {
		name: "a partition with nothing to write recovers a backoff after it started again",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loadFailed(1), "failing t-0 since 1: loading the local log: disk gone\nwake 2001\n"},
			{2001, tick(), "load 2 t-0\n"},
			{2002, loaded(2, 10, ep(1, 0)), "progress t-0 end 10 epoch 1 leader 2\nrewind\nwake 4002\n"},
			{4002, tick(), "recovered t-0\nwake 62002\n"},
			{4003, unfollow(0), "wake 62002\n"},
		},
	}, {
		name: "a partition no longer followed no longer fails",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loadFailed(1), "failing t-0 since 1: loading the local log: disk gone\nwake 2001\n"},
			{2, unfollow(0), "recovered t-0\nwake 2001\n"},
		},
	}, {
		name: "an append that leaves the log elsewhere is a failure of the log",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			{2, records(msg(entries(a0), mark(0, 1, 0))), "fetch 2 a t-0:0-9@1\nlag t-0 10\nwake 1002\n"},
			{3, fetched(2, ok(a0)), "append 3 t-0 0-9@1\nwake 60001\n"},
			{4, appended(3, 7), "failing t-0 since 4: appending at 0: followcore: the local log's answer breaks its contract: the log ends at 7 afterwards, not 10\nwake 2004\n"},
		},
		check: func(t *testing.T, c *Core) {
			require.Equal(t, uint64(1), c.LocalErrors)
			require.Zero(t, c.Applied)
		},
	}, {
		name: "a bucket that does not answer is hedged with a copy elsewhere",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			{2, records(msg(entries(a0), mark(0, 1, 0)), msg(entries(b0))), "fetch 2 a t-0:0-9@1\nlag t-0 10\nwake 1002\n"},
			{1002, tick(), "fetch 3 b t-0:0-9@1\nwake 2002\n"},
			// The entry in a was passed over until its bucket's backoff
			// (3002) ends: the core looks at it again then.
			{1010, fetched(3, ok(b0)), "append 4 t-0 0-9@1\nwake 3002\n"},
		},
	}, {
		name: "a section whose batches do not match its entry is dropped",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			{2, records(msg(entries(a0), mark(0, 1, 0))), "fetch 2 a t-0:0-9@1\nlag t-0 10\nwake 1002\n"},
			{3, fetched(2, Result{Entry: a0, Outcome: Fetched, Batches: batchesOf(a1)}), "wake 60001\n"},
		},
		check: func(t *testing.T, c *Core) {
			require.Equal(t, uint64(1), c.Dropped)
			require.Zero(t, c.Held)
		},
	}, {
		name: "an undecodable record is counted and skipped",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			{2, records(garbage(), msg(entries(a0), mark(0, 1, 0))), "fetch 2 a t-0:0-9@1\nlag t-0 10\nwake 1002\n"},
		},
		check: func(t *testing.T, c *Core) { require.Equal(t, uint64(1), c.Poisoned) },
	}, {
		name: "answers for a partition no longer followed are ignored",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			{2, records(msg(entries(a0), mark(0, 1, 0))), "fetch 2 a t-0:0-9@1\nlag t-0 10\nwake 1002\n"},
			{3, fetched(2, ok(a0)), "append 3 t-0 0-9@1\nwake 60001\n"},
			{4, unfollow(0), "wake 60001\n"},
			{5, appended(3, 10), "wake 60001\n"},
			{6, follow(0, 1, 2), "load 4 t-0\nrewind\nwake 60001\n"},
		},
		check: func(t *testing.T, c *Core) { require.Zero(t, c.Applied) },
	}, {
		name: "past MaxHeld the entries furthest ahead are forgotten and read again",
		cfg:  func(c *Config) { c.MaxHeld = 2 },
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			// Three entries past a gap at 0-9.
			{2, records(msg(entries(ent(0, 10, 19, 1, "a", "k6", 0))), msg(entries(ent(0, 20, 29, 1, "a", "k7", 0))), msg(entries(ent(0, 30, 39, 1, "a", "k8", 0)), mark(0, 1, 0))),
				// The gap at 0 is reported if it lasts 30 s.
				"lag t-0 40\nrewind\nwake 30002\n"},
		},
		check: func(t *testing.T, c *Core) {
			require.Equal(t, uint64(1), c.Evicted)
			require.Equal(t, 2, c.Held)
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			c := run(t, cfg, tc.events)
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// TestFollowRejects checks the role changes the core refuses.
func TestFollowRejects(t *testing.T) {
	c, err := New(testConfig())
	require.NoError(t, err)
	require.NoError(t, c.Follow(t0, tp(0), 2, 2))
	for name, fn := range map[string]func() error{
		"an invalid partition": func() error { return c.Follow(t0, metadata.TopicPartition{Partition: -1}, 1, 2) },
		"a negative epoch":     func() error { return c.Follow(t0, tp(1), -1, 2) },
		"itself as leader":     func() error { return c.Follow(t0, tp(1), 1, 1) },
		"a negative leader":    func() error { return c.Follow(t0, tp(1), 1, -1) },
		"an epoch going back":  func() error { return c.Follow(t0, tp(0), 1, 2) },
	} {
		require.Error(t, fn(), name)
	}
	require.NoError(t, c.Follow(t0, tp(0), 2, 2), "the same epoch again")
}

// TestNewRejects checks the configurations New refuses.
func TestNewRejects(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"negative broker":      func(c *Config) { c.BrokerID = -1 },
		"no readahead":         func(c *Config) { c.Readahead = 0 },
		"no held entries":      func(c *Config) { c.MaxHeld = 0 },
		"no fetch concurrency": func(c *Config) { c.FetchConcurrency = 0 },
		"no hedge":             func(c *Config) { c.HedgeAfter = 0 },
		"max below initial":    func(c *Config) { c.BackoffMax = time.Millisecond },
		"invalid hedge policy": func(c *Config) { c.Hedge = hedge.Policy{Quantile: 2} },
	} {
		cfg := testConfig()
		mod(&cfg)
		_, err := New(cfg)
		require.Error(t, err, name)
	}
}

// A partition whose log does not change reports its progress again every
// ReportInterval: one that holds everything appends nothing, and one that
// nothing continues waits, and their leader must still learn where they
// are. An append reports, and puts the next reminder off; none is made
// while an append is outstanding, whose answer reports.
func TestReportsWhileTheLogDoesNotChange(t *testing.T) {
	a0 := ent(0, 0, 9, 1, "a", "k1", 0)
	a0next := ent(0, 10, 19, 1, "a", "k2", 0)
	for _, tc := range []struct {
		name   string
		events []event
	}{{
		name: "a partition that holds everything",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 10, ep(1, 0)), "progress t-0 end 10 epoch 1 leader 2\nwake 60001\n"},
			{60000, tick(), "wake 60001\n"},
			{60001, tick(), "progress t-0 end 10 epoch 1 leader 2\nwake 120001\n"},
			{120001, tick(), "progress t-0 end 10 epoch 1 leader 2\nwake 180001\n"},
		},
	}, {
		name: "a partition that nothing continues, then appends",
		events: []event{
			{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
			{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
			{2, records(msg(entries(a0next), mark(0, 1, 0))), "lag t-0 20\nwake 30002\n"}, // when the gap is logged
			{30002, tick(), "wake 60001\n"},
			{60001, tick(), "progress t-0 end 0 epoch -1 leader 2\nwake 60002\n"},
			{60002, tick(), "wake 90002\n"},
			{70000, records(msg(entries(a0))), "fetch 2 a t-0:0-9@1\nfetch 3 a t-0:10-19@1\nwake 71000\n"},
			{70005, fetched(2, ok(a0)), "append 4 t-0 0-9@1\nwake 71000\n"},
			{70006, appended(4, 10), "progress t-0 end 10 epoch 1 leader 2\napplied t-0 9 bytes\nlag t-0 10\nwake 71000\n"},
			{70007, fetched(3, ok(a0next)), "append 5 t-0 10-19@1\nwake 90002\n"},
			{90002, tick(), "wake 120001\n"},
			{120001, tick(), ""}, // the append outstanding reports when answered
			{130007, appended(5, 20), "progress t-0 end 20 epoch 1 leader 2\napplied t-0 11 bytes\nlag t-0 0\nwake 190007\n"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) { run(t, testConfig(), tc.events) })
	}
}
