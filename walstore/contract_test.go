package walstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// The broker contract, tried with calls made at the times a broker can
// make them.

// switchStore fails every Put while down.
type switchStore struct {
	storage.ObjectStore
	down *atomic.Bool
}

func (s switchStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	if s.down.Load() {
		return metadata.ObjectRef{}, storage.ErrUnavailable
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

// A follower that restarts behind what the store still holds catches up.
// Broker 3 dies and the controller drops it from the replicas; broker 2
// applies 10-39 and the leader collects their objects, which were never
// routed to broker 3's metadata partition anyway. Broker 3 restarts at 10
// and is put back, in either order: its log end reaches the leader in its
// progress, and the leader republishes what no retained entry continues,
// without the broker asking, so that acks=all goes on.
func TestContractRestartedFollowerCatchesUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		// followerFirst: broker 3 follows, and reports, before the leader
		// learns it is a follower again.
		followerFirst bool
	}{{"leader first", false}, {"follower first", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				log1, log2, log3 := memstore.NewLocalLog(), memstore.NewLocalLog(), memstore.NewLocalLog()
				n1 := w.start(1, walstore.NodeConfig{Local: log1})
				n2 := w.start(2, walstore.NodeConfig{Local: log2})
				n3 := w.start(3, walstore.NodeConfig{Local: log3})
				require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2, 3}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
				require.NoError(t, n3.BecomeFollower(ctx, tpA, 1, 1))
				produce(t, n1, log1, tpA, 1, 0, 9)
				require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 9))

				require.NoError(t, n3.StopReplica(ctx, tpA)) // killed
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
				for off := int64(10); off < 40; off += 10 {
					produce(t, n1, log1, tpA, 1, off, off+9)
					settle(100 * time.Millisecond)
				}
				require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 39))
				settle(time.Minute)
				require.Positive(t, n1.Stats().Leader.ObjectsDeleted, "broker 2 applied everything: its objects are gone")

				n3 = w.start(3, walstore.NodeConfig{Local: log3}) // restarted
				steps := []func() error{
					func() error { return n1.BecomeLeader(ctx, tpA, 1, []int32{2, 3}, -1) },
					func() error { return n3.BecomeFollower(ctx, tpA, 1, 1) },
				}
				if tc.followerFirst {
					steps[0], steps[1] = steps[1], steps[0]
				}
				require.NoError(t, steps[0]())
				settle(time.Second)
				require.NoError(t, steps[1]())
				produce(t, n1, log1, tpA, 1, 40, 49)
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				require.NoError(t, n1.WaitReplicated(wctx, tpA, 1, 49), "acks=all waits for broker 3, which must catch up")
				requireSameLog(t, log1, log3, tpA)
				rs := n1.Replicas(tpA)
				for i := range rs {
					require.False(t, rs[i].LastCaughtUp.IsZero(), "broker %d has held everything published", rs[i].Broker)
					rs[i].LastCaughtUp = time.Time{}
				}
				require.Equal(t, []walstore.ReplicaState{
					{Broker: 2, EndOffset: 50, CaughtUp: true, InSync: true},
					{Broker: 3, EndOffset: 50, CaughtUp: true, InSync: true},
				}, rs)
			})
		})
	}
}

// lostDeletes deletes, then answers that it could not: a DELETE whose
// answer was lost.
type lostDeletes struct{ storage.ObjectStore }

func (s lostDeletes) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	if err := s.ObjectStore.Delete(ctx, refs); err != nil {
		return err
	}
	return fmt.Errorf("the answer was lost: %w", storage.ErrUnavailable)
}

// A follower that lost its log (restarted with an empty one) while it
// stayed a follower catches up: its report of an empty log lowers what
// the leader credits it with, the leader republishes from its start what
// it collected, and keeps the copies until the follower applied them.
// It does so too when every DELETE of the collection failed after
// deleting: the leader cannot tell which objects are gone.
func TestContractFollowerThatLostItsLogCatchesUp(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("deletes answered %v", !lost), func(t *testing.T) {
			followerThatLostItsLogCatchesUp(t, lost)
		})
	}
}

func followerThatLostItsLogCatchesUp(t *testing.T, lostDeleteAnswers bool) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		store := w.store(1)
		if lostDeleteAnswers {
			store = lostDeletes{store}
		}
		n1 := w.start(1, walstore.NodeConfig{Local: log1, Store: store})
		n2 := w.start(2, walstore.NodeConfig{})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		for off := int64(0); off < 30; off += 10 {
			produce(t, n1, log1, tpA, 1, off, off+9)
			settle(100 * time.Millisecond)
		}
		require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 29))
		settle(time.Minute)
		if lostDeleteAnswers {
			require.Zero(t, n1.Stats().Leader.ObjectsDeleted, "no DELETE was answered")
		} else {
			require.Positive(t, n1.Stats().Leader.ObjectsDeleted)
		}

		require.NoError(t, n2.StopReplica(ctx, tpA)) // its disk is gone
		log2 := memstore.NewLocalLog()
		n2 = w.start(2, walstore.NodeConfig{Local: log2})
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		produce(t, n1, log1, tpA, 1, 30, 39)
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		require.NoError(t, n1.WaitReplicated(wctx, tpA, 1, 39))
		requireSameLog(t, log1, log2, tpA)
		require.Positive(t, n1.Stats().Leader.Republished)
	})
}

// Laggards share one republish at a time, from the lowest: two that
// report 120 and 100 before anything is republished cause one, from 100;
// a third reporting 110 while it runs causes none. The followers here
// are only their reports, as a broker relays them.
func TestContractLaggardsShareOneRepublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		var down atomic.Bool
		log1 := memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1, Store: switchStore{ObjectStore: w.store(1), down: &down}})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2, 3, 4}, -1))
		for off := int64(0); off < 150; off += 50 {
			produce(t, n1, log1, tpA, 1, off, off+49)
			settle(100 * time.Millisecond)
		}
		require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 149))
		report := func(follower int32, end int64) {
			n1.RecordProgress(walstore.Progress{Partition: tpA, Leader: 1, Follower: follower, EndOffset: end, LastEpoch: 1})
		}
		for _, f := range []int32{2, 3, 4} {
			report(f, 150)
		}
		settle(time.Minute)
		require.Equal(t, uint64(3), n1.Stats().Leader.ObjectsDeleted)

		down.Store(true) // copies wait in the store's retries
		report(2, 120)
		settle(time.Second)
		report(3, 100)
		settle(time.Second)
		report(4, 110)
		settle(time.Second)
		down.Store(false)
		settle(time.Minute)
		require.Equal(t, uint64(1), n1.Stats().Leader.Republished)
		var republished []string
		for _, e := range publishedEntries(t, w.meta, tpA) {
			if e.FirstOffset >= 100 {
				republished = append(republished, fmt.Sprintf("%d-%d", e.FirstOffset, e.LastOffset))
			}
		}
		require.Equal(t, []string{"100-149", "100-149"}, republished, "the original and one copy")
	})
}

// publishedEntries returns the entries of tp in the partitions of log,
// each object's once.
func publishedEntries(t *testing.T, log metadata.Log, tp metadata.TopicPartition) []metadata.Entry {
	t.Helper()
	seen := make(map[metadata.ObjectRef]bool)
	var out []metadata.Entry
	for _, m := range messages(t, log) {
		for _, e := range m.Entries {
			if e.Partition == tp && !seen[e.Object] {
				seen[e.Object] = true
				out = append(out, e)
			}
		}
	}
	return out
}
