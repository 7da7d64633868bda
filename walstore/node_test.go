package walstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

func TestNewNodeRejectsInvalidConfig(t *testing.T) {
	w := newWorld(t)
	base := func() walstore.NodeConfig {
		return walstore.NodeConfig{BrokerID: 1, Store: w.store(1), Log: w.meta, Local: memstore.NewLocalLog()}
	}
	for _, tc := range []struct {
		field string
		mod   func(*walstore.NodeConfig)
	}{
		{"Store", func(c *walstore.NodeConfig) { c.Store = nil }},
		{"Log", func(c *walstore.NodeConfig) { c.Log = nil }},
		{"Local", func(c *walstore.NodeConfig) { c.Local = nil }},
		{"BrokerID", func(c *walstore.NodeConfig) { c.BrokerID = -1 }},
		{"Interval", func(c *walstore.NodeConfig) { c.Interval = -time.Second }},
		{"Readahead", func(c *walstore.NodeConfig) { c.Readahead = -1 }},
		{"Backoff.Max", func(c *walstore.NodeConfig) { c.Backoff.Max = -1 }},
		{"UploadHedge", func(c *walstore.NodeConfig) { c.UploadHedge.Quantile = 2 }},
		{"FetchHedge", func(c *walstore.NodeConfig) { c.FetchHedge.Burst = -1 }},
		{"ProgressInterval", func(c *walstore.NodeConfig) { c.ProgressInterval = -time.Second }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := base()
			tc.mod(&cfg)
			_, err := walstore.NewNode(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	_, err := walstore.NewNode(base())
	require.NoError(t, err)
}

// Every entry point of a Node given arguments a broker should not pass,
// or a partition in the wrong role, returns an error (the right sentinel
// where one exists) or does nothing; none panics, and the Node goes on.
func TestNodeMisuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n := w.start(1, walstore.NodeConfig{Local: log1})
		require.NoError(t, log1.AssignEpoch(tpA, 3, 0))
		require.NoError(t, n.BecomeLeader(ctx, tpA, 3, []int32{2}, -1))
		require.NoError(t, n.BecomeFollower(ctx, tpB, 3, 2))
		unknown := metadata.TopicPartition{Topic: "nobody", Partition: 7}
		batch := storage.Batch{Epoch: 3, FirstOffset: 0, LastOffset: 0, Data: []byte("x")}

		for _, tc := range []struct {
			name string
			call func() error
			is   error // nil: any error
		}{
			{"BecomeLeader of no topic", func() error { return n.BecomeLeader(ctx, metadata.TopicPartition{}, 1, nil, -1) }, nil},
			{"BecomeLeader of a negative partition", func() error {
				return n.BecomeLeader(ctx, metadata.TopicPartition{Topic: "t", Partition: -1}, 1, nil, -1)
			}, nil},
			{"BecomeLeader at a negative epoch", func() error { return n.BecomeLeader(ctx, unknown, -1, nil, -1) }, nil},
			{"BecomeLeader at an earlier epoch", func() error { return n.BecomeLeader(ctx, tpA, 2, []int32{2}, -1) }, nil},
			{"BecomeLeader with itself as follower", func() error { return n.BecomeLeader(ctx, unknown, 1, []int32{2, 1}, -1) }, nil},
			{"BecomeLeader with a negative follower", func() error { return n.BecomeLeader(ctx, unknown, 1, []int32{-2}, -1) }, nil},
			{"BecomeFollower of no topic", func() error { return n.BecomeFollower(ctx, metadata.TopicPartition{}, 1, 2) }, nil},
			{"BecomeFollower of itself", func() error { return n.BecomeFollower(ctx, unknown, 1, 1) }, nil},
			{"BecomeFollower of a negative leader", func() error { return n.BecomeFollower(ctx, unknown, 1, -1) }, nil},
			{"BecomeFollower at a negative epoch", func() error { return n.BecomeFollower(ctx, unknown, -1, 2) }, nil},
			{"BecomeFollower at an earlier epoch", func() error { return n.BecomeFollower(ctx, tpB, 2, 2) }, nil},
			{"Append to an unknown partition", func() error { return n.Append(ctx, unknown, batch) }, walstore.ErrNotLeader},
			{"Append to a followed partition", func() error { return n.Append(ctx, tpB, batch) }, walstore.ErrNotLeader},
			{"Append of a zero batch", func() error { return n.Append(ctx, tpA, storage.Batch{}) }, storage.ErrInvalidBatch},
			{"WaitDurable of an unknown partition", func() error { return n.WaitDurable(ctx, unknown, 1, 0) }, walstore.ErrNotLeader},
			{"WaitDurable of a followed partition", func() error { return n.WaitDurable(ctx, tpB, 1, 0) }, walstore.ErrNotLeader},
			{"Republish of an unknown partition", func() error { return n.Republish(ctx, unknown, 0) }, walstore.ErrNotLeader},
			{"Republish from a negative offset", func() error { return n.Republish(ctx, tpA, -1) }, nil},
			{"BecomeLeader with a cancelled context", func() error {
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				err := n.BecomeLeader(cctx, tpB, 4, nil, -1)
				if err == nil {
					// Taking the role anyway is fine; hand it back.
					return fmt.Errorf("took it: %w", n.BecomeFollower(ctx, tpB, 4, 2))
				}
				return err
			}, nil},
		} {
			err := tc.call()
			if assert.Error(t, err, tc.name) && tc.is != nil {
				assert.ErrorIs(t, err, tc.is, tc.name)
			}
		}

		// Calls that have nothing to do.
		assert.Equal(t, int64(-1), n.DurableOffset(unknown))
		assert.Equal(t, int64(-1), n.DurableOffset(tpB))
		require.NoError(t, n.StopReplica(ctx, unknown))
		for _, p := range []walstore.Progress{
			{}, {Partition: tpA, Follower: -1, EndOffset: 5}, {Partition: tpA, Follower: 1, EndOffset: 5},
			{Partition: tpA, Follower: 2, EndOffset: -5}, {Partition: tpA, Follower: 2, EndOffset: 5, LastEpoch: -1},
			{Partition: tpA, Follower: 2, EndOffset: 5, LastEpoch: 99}, {Partition: unknown, Follower: 2, EndOffset: 5},
		} {
			n.RecordProgress(p)
		}
		n.ReportTiered(unknown, -10)
		n.ReportTiered(tpA, -10)

		// The Node still works.
		produce(t, n, log1, tpA, 3, 0, 9)
		require.NoError(t, n.WaitDurable(ctx, tpA, 3, 9))
	})
}

// After Run returns, the Node refuses work with ErrStopped; a second Run
// is refused too.
func TestNodeAfterRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n, err := walstore.NewNode(walstore.NodeConfig{BrokerID: 1, Store: w.store(1), Log: w.meta, Local: log1, Logger: discard()})
		require.NoError(t, err)
		// Transitions before Run take effect once it runs.
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n.BecomeLeader(ctx, tpA, 1, nil, -1))
		require.NoError(t, n.BecomeFollower(ctx, tpB, 1, 2))
		produce(t, n, log1, tpA, 1, 0, 9)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- n.Run(runCtx) }()
		require.NoError(t, n.WaitDurable(ctx, tpA, 1, 9))
		assert.ErrorIs(t, n.Run(ctx), walstore.ErrStopped, "a second Run")
		stop()
		require.NoError(t, <-done)

		assert.ErrorIs(t, n.Run(ctx), walstore.ErrStopped)
		assert.ErrorIs(t, n.BecomeLeader(ctx, tpA, 2, nil, -1), walstore.ErrStopped)
		assert.ErrorIs(t, n.BecomeFollower(ctx, tpA, 2, 2), walstore.ErrStopped)
		assert.ErrorIs(t, n.Append(ctx, tpA, storage.Batch{Epoch: 1, FirstOffset: 10, LastOffset: 10, Data: []byte("x")}), walstore.ErrStopped)
		assert.ErrorIs(t, n.WaitDurable(ctx, tpA, 1, 20), walstore.ErrStopped)
		assert.ErrorIs(t, n.Republish(ctx, tpA, 0), walstore.ErrStopped)
		assert.NoError(t, n.StopReplica(ctx, tpB))
		_ = n.Health()
		_ = n.Stats()
	})
}

// Transitions of different partitions may run concurrently, while the
// broker appends to the ones it leads.
func TestNodeConcurrentTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n := w.start(1, walstore.NodeConfig{Local: log1})
		const partitions = 8
		var wg sync.WaitGroup
		for i := range partitions {
			tp := metadata.TopicPartition{Topic: "c", Partition: int32(i)}
			wg.Go(func() {
				end := int64(0)
				for round := range int32(5) {
					epoch := 2*round + 1
					require.NoError(t, log1.AssignEpoch(tp, epoch, end))
					require.NoError(t, n.BecomeLeader(ctx, tp, epoch, []int32{2}, -1))
					produce(t, n, log1, tp, epoch, end, end+4)
					end += 5
					require.NoError(t, n.BecomeFollower(ctx, tp, epoch+1, 2))
					require.NoError(t, n.StopReplica(ctx, tp))
				}
				require.NoError(t, log1.AssignEpoch(tp, 11, end))
				require.NoError(t, n.BecomeLeader(ctx, tp, 11, []int32{2}, -1))
				produce(t, n, log1, tp, 11, end, end+4)
				require.NoError(t, n.WaitDurable(ctx, tp, 11, end+4))
			})
		}
		wg.Wait()
	})
}
