package walstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

func TestFollowerReadsTenPartitionsOfOneObjectWithOneGet(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 4)
	r1, r2 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2")
	for i := range 10 {
		c.SetReplicas(tpN(i), 1, 2)
		c.SetLeader(tpN(i), 1, 1)
	}
	// R2 follows all ten before anything is published, so that it learns
	// of the ten sections in one message.
	// Not hedged: a GET slow on a busy machine would be sent twice.
	var f *walstore.Node
	for i := range 10 {
		f = r2.StartFollowerConfig(tpN(i), walstore.NodeConfig{FetchHedge: walstore.HedgeConfig{Disabled: true}})
	}
	before := c.Gets(r1.Store.Local().Bucket)
	l := r1.StartLeader(walstore.NodeConfig{Interval: 50 * time.Millisecond})
	for i := range 10 {
		r1.BecomeLeader(ctx, tpN(i), 1, -1)
	}
	// A burst of leaderships shares marker messages, the first going at
	// once and the rest up to an Interval later; entries wait for their
	// partition's markers. Produce once all ten are announced, so that
	// one entry message names all ten sections.
	require.Eventually(t, func() bool { return markersPublished(t, c.Meta) == 10 }, 10*time.Second, 5*time.Millisecond)
	for i := range 10 {
		r1.Produce(ctx, tpN(i), 1, 0, 9, 10)
	}
	for i := range 10 {
		require.NoError(t, l.WaitDurable(ctx, tpN(i), 1, 9))
	}
	require.Equal(t, uint64(1), l.Stats().Leader.Objects, "one object holds all ten partitions")

	for i := range 10 {
		clustertest.RequireConverges(t, r2, r1, tpN(i))
	}
	assert.Equal(t, int64(1), c.Gets(r1.Store.Local().Bucket)-before)
	assert.Equal(t, uint64(10), f.Stats().Follower.Applied)
}

func TestFollowerBootstrapsEmptyReplicaFromMetadata(t *testing.T) {
	for _, start := range []int64{0, 1000} {
		t.Run(strconv.FormatInt(start, 10), func(t *testing.T) {
			ctx := context.Background()
			c := clustertest.New(t, clustertest.Mem(), 4)
			r1, r2 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2")
			c.SetReplicas(clustertest.TP, 1, 2)
			c.SetLeader(clustertest.TP, 1, 3)
			l := r1.StartLeader(walstore.NodeConfig{})
			require.NoError(t, r1.Local.Truncate(ctx, clustertest.TP, start))
			r1.BecomeLeader(ctx, clustertest.TP, 3, -1)
			r1.Produce(ctx, clustertest.TP, 3, start, start+49, 10)
			require.NoError(t, l.WaitDurable(ctx, clustertest.TP, 3, start+49))

			// R2 has an empty log and an empty epoch cache.
			f := r2.StartFollower(clustertest.TP)
			clustertest.RequireConverges(t, r2, r1, clustertest.TP)
			epochs, err := r2.Local.Epochs(clustertest.TP)
			require.NoError(t, err)
			require.Len(t, epochs, 1)
			assert.Equal(t, int32(3), epochs[0].Epoch)
			assert.Equal(t, start, epochs[0].StartOffset)
			assert.Zero(t, f.Stats().Follower.Held)
		})
	}
}

func TestFollowerRejectsInvalidConfig(t *testing.T) {
	c := clustertest.New(t, clustertest.Mem(), 1)
	b := c.AddBroker(1, "az1")
	base := func() walstore.NodeConfig {
		return walstore.NodeConfig{Store: b.Store, Log: c.Meta, Local: b.Local}
	}
	tests := []struct {
		field string
		mod   func(*walstore.NodeConfig)
	}{
		{"Store", func(c *walstore.NodeConfig) { c.Store = nil }},
		{"Log", func(c *walstore.NodeConfig) { c.Log = nil }},
		{"Local", func(c *walstore.NodeConfig) { c.Local = nil }},
		{"BrokerID", func(c *walstore.NodeConfig) { c.BrokerID = -1 }},
		{"FetchConcurrency", func(c *walstore.NodeConfig) { c.FetchConcurrency = -1 }},
		{"Readahead", func(c *walstore.NodeConfig) { c.Readahead = -1 }},
		{"PollInterval", func(c *walstore.NodeConfig) { c.PollInterval = -time.Second }},
		{"FetchHedge", func(c *walstore.NodeConfig) { c.FetchHedge.Budget = -1 }},
		{"FetchHedge", func(c *walstore.NodeConfig) { c.FetchHedge.Quantile = 1.5 }},
		{"FetchHedge", func(c *walstore.NodeConfig) { c.FetchHedge.Min, c.FetchHedge.Max = time.Second, time.Millisecond }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			cfg := base()
			tt.mod(&cfg)
			_, err := walstore.NewNode(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
}

func TestFollowerBoundsHeldEntriesAndStillConverges(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 4)
	r1, r2, r3 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2"), c.AddBroker(3, "az3")
	tp := clustertest.TP
	c.SetReplicas(tp, 1, 2, 3)
	c.SetLeader(tp, 1, 5)
	r1.StartLeader(walstore.NodeConfig{})
	require.NoError(t, r1.Local.Truncate(ctx, tp, 100))
	r1.BecomeLeader(ctx, tp, 5, -1)
	r1.Produce(ctx, tp, 5, 100, 149, 10)
	require.NoError(t, r1.Node.WaitDurable(ctx, tp, 5, 149))
	r2.Preload(tp, 5, 100, 149, 10)
	r3.Preload(tp, 5, 100, 109, 10)
	r1.Stop()
	require.NoError(t, c.Objects.SetOutage("az1", true))

	// R2 publishes ten epoch-6 objects R3 cannot apply before the gap
	// 110-149 is republished; R3 may hold only three entries.
	r2.StartLeader(walstore.NodeConfig{})
	r2.BecomeLeader(ctx, tp, 6, -1)
	for off := int64(150); off < 250; off += 10 {
		r2.Produce(ctx, tp, 6, off, off+9, 10)
		require.NoError(t, r2.Node.WaitDurable(ctx, tp, 6, off+9))
	}
	f3 := r3.StartFollowerConfig(tp, walstore.NodeConfig{MaxHeld: 3})
	require.Eventually(t, func() bool { return f3.Stats().Follower.Evicted > 0 }, 10*time.Second, time.Millisecond)
	assert.LessOrEqual(t, f3.Stats().Follower.Held, 3)
	require.NoError(t, r2.Node.Republish(ctx, tp, 110))
	clustertest.RequireConverges(t, r3, r2, tp)
}

func TestFollowerStopsAppendingWhenItsBrokerLeads(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 4)
	r1, r2 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2")
	tp := clustertest.TP
	c.SetReplicas(tp, 1, 2)
	c.SetLeader(tp, 1, 1)
	r1.StartLeader(walstore.NodeConfig{})
	r1.BecomeLeader(ctx, tp, 1, -1)

	// R2's follower can never fetch: every GET fails, so entries stay
	// pending until R2 takes over.
	c.SetFault(faults.On(func(r faults.Request) bool { return r.Op.IsGet() }, faults.Fail(storage.ErrUnavailable)))
	f := r2.StartFollower(tp)
	r1.Produce(ctx, tp, 1, 0, 49, 10)
	require.NoError(t, r1.Node.WaitDurable(ctx, tp, 1, 49))
	require.Eventually(t, func() bool { return f.Stats().Follower.FetchErrors > 0 }, 10*time.Second, time.Millisecond)

	// R2 becomes the leader: once BecomeLeader returns, its follower side
	// has dropped the partition and never appends to it again.
	r2.BecomeLeader(ctx, tp, 2, -1)
	_, following := f.Stats().Follower.Lag[tp]
	assert.False(t, following)
	c.SetFault(nil)
	time.Sleep(50 * time.Millisecond) // room for a wrongful append to happen
	assert.Empty(t, r2.Local.EverAppended())
}

func TestFollowerHedgesAroundABucketThatStopsAnswering(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 4)
	r1, r2, r3 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2"), c.AddBroker(3, "az3")
	tp := clustertest.TP
	c.SetReplicas(tp, 1, 2, 3)
	c.SetLeader(tp, 1, 5)
	r1.StartLeader(walstore.NodeConfig{})
	require.NoError(t, r1.Local.Truncate(ctx, tp, 100))
	r1.BecomeLeader(ctx, tp, 5, -1)
	r1.Produce(ctx, tp, 5, 100, 149, 10)
	require.NoError(t, r1.Node.WaitDurable(ctx, tp, 5, 149))
	r2.Preload(tp, 5, 100, 149, 10)
	r1.Stop()

	// AZ1 silently drops traffic: its GETs never answer.
	dead := r1.Store.Local().Bucket
	c.SetFault(faults.On(func(r faults.Request) bool { return r.Bucket == dead }, faults.Delay(time.Hour)))
	f3 := r3.StartFollowerConfig(tp, walstore.NodeConfig{HedgeAfter: 50 * time.Millisecond, FetchTimeout: time.Hour})
	require.Eventually(t, func() bool { return c.Gets(dead) > 0 }, 10*time.Second, time.Millisecond)

	// R2 leads and republishes into AZ2: R3 uses that copy without waiting
	// for the hung request.
	r2.StartLeader(walstore.NodeConfig{})
	r2.BecomeLeader(ctx, tp, 6, 100)
	clustertest.RequireConverges(t, r3, r2, tp)
	assert.Zero(t, f3.Stats().Follower.FetchErrors, "the hung request is still hanging, not failed")
}

// TestFollowerHedgesASlowGET: the first GET hangs; with HedgeAfter and
// FetchTimeout an hour away, only its hedge, sent once its threshold
// passes, lets the follower converge. The hung GET is cancelled.
func TestFollowerHedgesASlowGET(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 4)
	r1, r2 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2")
	tp := clustertest.TP
	c.SetReplicas(tp, 1, 2)
	c.SetLeader(tp, 1, 1)
	r1.StartLeader(walstore.NodeConfig{})
	r1.BecomeLeader(ctx, tp, 1, -1)
	r1.Produce(ctx, tp, 1, 0, 49, 10)
	require.NoError(t, r1.Node.WaitDurable(ctx, tp, 1, 49))

	c.SetFault(faults.Once(faults.On(func(r faults.Request) bool { return r.Op.IsGet() }, faults.Delay(time.Hour))))
	f := r2.StartFollowerConfig(tp, walstore.NodeConfig{HedgeAfter: time.Hour, FetchTimeout: time.Hour, FetchHedge: walstore.HedgeConfig{Max: 10 * time.Millisecond}})
	clustertest.RequireConverges(t, r2, r1, tp)
	st := f.Stats().Follower
	// Later GETs may be hedged too on a busy machine; the hung one was.
	assert.GreaterOrEqual(t, st.Hedges, uint64(1))
	assert.GreaterOrEqual(t, st.HedgeWins, uint64(1))
	assert.Zero(t, st.FetchErrors, "the hung GET was cancelled, not failed")
}

// markersPublished counts the epoch markers in every partition of log.
func markersPublished(t *testing.T, log metadata.Log) int {
	t.Helper()
	n := 0
	ctx := context.Background()
	for p := range log.Partitions() {
		low, high, err := log.Watermarks(ctx, p)
		require.NoError(t, err)
		if high == low {
			continue // Read would wait for a record
		}
		recs, err := log.Read(ctx, p, low, int(high-low))
		require.NoError(t, err)
		for _, r := range recs {
			m, err := metadata.DecodeMessage(r.Value)
			require.NoError(t, err)
			n += len(m.Markers)
		}
	}
	return n
}
