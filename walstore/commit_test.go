package walstore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// The high watermark through the Node: WaitReplicated returns once every
// in-sync follower applied the offset, the commit is published in the
// metadata log, and a follower dropped from the in-sync set no longer
// holds it back.
func TestNodeHighWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		n2 := w.start(2, walstore.NodeConfig{})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2, 3}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		require.Equal(t, int64(-1), n1.HighWatermark(tpA))
		require.Equal(t, int64(-1), n2.HighWatermark(tpA), "not its leader")

		produce(t, n1, log1, tpA, 1, 0, 9)
		require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 9))
		settle(time.Second)
		require.Equal(t, int64(-1), n1.HighWatermark(tpA), "broker 3 never reported")

		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		require.ErrorIs(t, n1.WaitReplicated(wctx, tpA, 1, 9), context.DeadlineExceeded)

		require.NoError(t, n1.SetInSync(tpA, []int32{2}))
		require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 9))
		require.Equal(t, int64(10), n1.HighWatermark(tpA))
		require.Error(t, n1.SetInSync(tpA, []int32{4}), "not a follower")
		require.ErrorIs(t, n1.SetInSync(tpB, nil), walstore.ErrNotLeader)
		require.ErrorIs(t, n1.WaitReplicated(ctx, tpB, 1, 0), walstore.ErrNotLeader)

		settle(time.Second)
		require.Equal(t, int64(10), publishedCommit(t, w.meta, tpA), "the commit is in the metadata log")

		// A leadership that ends fails the wait.
		errc := make(chan error, 1)
		go func() { errc <- n1.WaitReplicated(ctx, tpA, 1, 100) }()
		synctest.Wait()
		require.NoError(t, n1.StopReplica(ctx, tpA))
		require.ErrorIs(t, <-errc, walstore.ErrNotLeader)
		require.Equal(t, int64(-1), n1.HighWatermark(tpA))
	})
}

// publishedCommit returns the highest commit of tp in every partition of
// log, or -1.
func publishedCommit(t *testing.T, log metadata.Log, tp metadata.TopicPartition) int64 {
	t.Helper()
	best := int64(-1)
	for _, m := range messages(t, log) {
		for _, c := range m.Commits {
			if c.Partition == tp {
				best = max(best, c.Offset)
			}
		}
	}
	return best
}

// messages returns every message in log, partition after partition.
func messages(t *testing.T, log metadata.Log) []*metadata.Message {
	t.Helper()
	var out []*metadata.Message
	for p := range log.Partitions() {
		_, high, err := log.Watermarks(context.Background(), p)
		require.NoError(t, err)
		recs, err := log.Read(context.Background(), p, 0, int(high))
		require.NoError(t, err)
		for _, r := range recs {
			m, err := metadata.DecodeMessage(r.Value)
			require.NoError(t, err)
			out = append(out, m)
		}
	}
	return out
}
