package walstore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/walstore"
)

// Waits and transitions around StopReplica, tried as a broker that
// removes a partition and is given it back.

// StopReplica ends the leadership: leading the same epoch again must be
// refused (a late wait of the first would be answered by the second), a
// later epoch is a new leadership, and a wait of the stopped one fails.
func TestContractStopReplicaThenReleadIsANewLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, nil, -1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 9))

		require.NoError(t, n1.StopReplica(ctx, tpA))
		require.Equal(t, walstore.NoRole, n1.Role(tpA).Role)
		require.ErrorIs(t, n1.WaitDurable(ctx, tpA, 1, 9), walstore.ErrNotLeader, "after StopReplica")
		require.Equal(t, int64(-1), n1.DurableOffset(tpA))

		err := n1.BecomeLeader(ctx, tpA, 1, nil, -1)
		require.ErrorIs(t, err, walstore.ErrStaleEpoch, "re-leading the stopped epoch")
		var te *walstore.TransitionError
		require.ErrorAs(t, err, &te)
		require.Equal(t, walstore.NoRole, te.InEffect.Role)
		require.Equal(t, walstore.NoRole, n1.Role(tpA).Role)

		require.NoError(t, log1.AssignEpoch(tpA, 2, 10))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 2, nil, -1))
		require.ErrorIs(t, n1.WaitDurable(ctx, tpA, 1, 9), walstore.ErrNotLeader, "epoch 1's leadership was stopped")
		require.ErrorIs(t, n1.WaitReplicated(ctx, tpA, 1, 5), walstore.ErrNotLeader, "epoch 1's leadership was stopped")
		produce(t, n1, log1, tpA, 2, 10, 14)
		require.NoError(t, n1.WaitDurable(ctx, tpA, 2, 14))
		require.ErrorIs(t, n1.WaitDurable(ctx, tpA, 0, 3), walstore.ErrNotLeader, "epoch 0 was never led")
	})
}

// A wait issued before the Append of its offset (a broker that waits on a
// separate goroutine) waits for it, within its leadership, and is told
// ErrNotLeader if the leadership ends first.
func TestContractWaitIssuedBeforeAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, nil, -1))

		early := make(chan error, 1)
		go func() { early <- n1.WaitDurable(ctx, tpA, 1, 9) }()
		settle(time.Second)
		select {
		case err := <-early:
			t.Fatalf("a wait for an offset not yet appended returned %v", err)
		default:
		}
		produce(t, n1, log1, tpA, 1, 0, 9)
		require.NoError(t, <-early)

		never := make(chan error, 1)
		go func() { never <- n1.WaitReplicated(ctx, tpA, 1, 100) }()
		settle(time.Second)
		require.NoError(t, n1.BecomeFollower(ctx, tpA, 2, 2))
		require.ErrorIs(t, <-never, walstore.ErrNotLeader)
	})
}

// Progress from a broker that is not a follower, or claiming more than
// the leader holds, or an epoch the leader never had, must not advance
// the high watermark past what real followers applied.
func TestContractBogusProgressIsNotCredited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 9))
		settle(time.Second)
		hw0 := n1.HighWatermark(tpA)

		for _, p := range []walstore.Progress{
			{Partition: tpA, Leader: 1, Follower: 99, EndOffset: 10, LastEpoch: 1}, // not a follower
			{Partition: tpA, Leader: 1, Follower: 1, EndOffset: 10, LastEpoch: 1},  // the leader itself
			{Partition: tpA, Leader: 1, Follower: 2, EndOffset: 10, LastEpoch: 7},  // an epoch never led
			{Partition: tpB, Leader: 1, Follower: 2, EndOffset: 10, LastEpoch: 1},  // a partition not led
			{Partition: tpA, Leader: 1, Follower: 2, EndOffset: -5, LastEpoch: 1},  // negative
		} {
			n1.RecordProgress(p)
			settle(100 * time.Millisecond)
			require.Equal(t, hw0, n1.HighWatermark(tpA), "after %+v", p)
			for _, r := range n1.Replicas(tpA) {
				require.Equal(t, int32(2), r.Broker, "only broker 2 follows")
				require.False(t, r.CaughtUp, "after %+v", p)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		require.ErrorIs(t, n1.WaitReplicated(wctx, tpA, 1, 9), context.DeadlineExceeded)

		// Broker 2's genuine report, then a report of a log end beyond
		// the leader's: the high watermark is capped by the leader's log.
		n1.RecordProgress(walstore.Progress{Partition: tpA, Leader: 1, Follower: 2, EndOffset: 10, LastEpoch: 1})
		settle(100 * time.Millisecond)
		require.Equal(t, int64(10), n1.HighWatermark(tpA))
		rs := n1.Replicas(tpA)
		require.Len(t, rs, 1)
		require.True(t, rs[0].CaughtUp)
		n1.RecordProgress(walstore.Progress{Partition: tpA, Leader: 1, Follower: 2, EndOffset: 1000, LastEpoch: 1})
		settle(100 * time.Millisecond)
		require.Equal(t, int64(10), n1.HighWatermark(tpA))
	})
}
