package walstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// The broker contract, tried with calls made at the times a broker can
// make them.

// switchStore fails every Put while down.
type switchStore struct {
	walstore.ObjectStore
	down *atomic.Bool
}

func (s switchStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	if s.down.Load() {
		return metadata.ObjectRef{}, walstore.ErrUnavailable
	}
	return s.ObjectStore.Put(ctx, key, body)
}

// A wait names the leadership that accepted its records. Broker 1 leads
// epoch 1 and accepts 10-19, which never leave it; broker 2 takes over at
// epoch 2 from 10 and writes other records there; broker 1 truncates,
// follows, and leads again at epoch 3. A produce goroutine descheduled
// between its Append and its wait, and waiting only now, must be told
// that its records were not acknowledged: at offset 19 broker 1's log now
// holds broker 2's record, durable and replicated at epoch 3.
func TestContractWaitAfterLeadershipCycleIsNotLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		var down atomic.Bool
		log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1, Store: switchStore{ObjectStore: w.store(1), down: &down}})
		n2 := w.start(2, walstore.NodeConfig{Local: log2})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 9))

		down.Store(true)
		produce(t, n1, log1, tpA, 1, 10, 19)
		settle(time.Second)

		require.NoError(t, n1.BecomeFollower(ctx, tpA, 2, 2))
		require.NoError(t, log2.AssignEpoch(tpA, 2, 10))
		require.NoError(t, n2.BecomeLeader(ctx, tpA, 2, []int32{1}, -1))
		produce(t, n2, log2, tpA, 2, 10, 24)
		require.NoError(t, n2.WaitReplicated(ctx, tpA, 2, 24))
		requireSameLog(t, log2, log1, tpA)

		down.Store(false)
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 3, 1))
		require.NoError(t, log1.AssignEpoch(tpA, 3, 25))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 3, []int32{2}, -1))
		produce(t, n1, log1, tpA, 3, 25, 29)
		require.NoError(t, n1.WaitReplicated(ctx, tpA, 3, 29))
		require.Greater(t, n1.DurableOffset(tpA), int64(19))

		for name, wait := range map[string]func() error{
			"WaitDurable":    func() error { return n1.WaitDurable(ctx, tpA, 1, 19) },
			"WaitReplicated": func() error { return n1.WaitReplicated(ctx, tpA, 1, 19) },
		} {
			require.ErrorIs(t, wait(), walstore.ErrNotLeader, "%s of epoch 1's offset 19 after the cycle", name)
		}
		// The records of epoch 3 are acknowledged, and a wait naming an
		// epoch this leadership never held is not.
		require.NoError(t, n1.WaitDurable(ctx, tpA, 3, 29))
		require.ErrorIs(t, n1.WaitDurable(ctx, tpA, 2, 24), walstore.ErrNotLeader, "epoch 2 was broker 2's")
		require.ErrorIs(t, n1.WaitReplicated(ctx, tpA, 4, 29), walstore.ErrNotLeader, "epoch 4 has not begun")

		// Broker 2 led epoch 2 and resigned it: leading it again would let
		// a late wait of the first epoch-2 leadership be answered by the
		// second.
		require.ErrorIs(t, n2.BecomeLeader(ctx, tpA, 2, []int32{1}, -1), walstore.ErrStaleEpoch)
	})
}

// A re-election without a break continues the leadership: records
// accepted at the earlier epoch are acknowledged under the later one.
func TestContractWaitSpansAContinuedLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		n2 := w.start(2, walstore.NodeConfig{})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		require.NoError(t, log1.AssignEpoch(tpA, 3, 10))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 3, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 3, 1))
		produce(t, n1, log1, tpA, 3, 10, 19)
		require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 9))
		require.NoError(t, n1.WaitDurable(ctx, tpA, 3, 19))
		require.ErrorIs(t, n1.WaitDurable(ctx, tpA, 2, 9), walstore.ErrNotLeader, "epoch 2 was skipped")
	})
}
