package walstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/walstore"
)

// The in-sync set changed at random from another goroutine (subsets of
// two live followers, sometimes with a third that never reports) while
// the leader appends and waits for acks=all, and a third goroutine
// watches: the high watermark never goes back within the leadership
// (not even when an unreported follower joins), a follower Replicas
// calls CaughtUp holds the high watermark read before the call, InSync
// says what the last SetInSync set when nothing else changes it, and a
// WaitReplicated that returns nil leaves the high watermark past its
// offset. Once the set is the live followers again, everything appended
// is replicated.
func TestAdversaryInSyncChurnWhileAppending(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	c := clustertest.New(t, clustertest.Mem(), 4)
	leader, f2, f3 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2"), c.AddBroker(3, "az3")
	c.AddBroker(4, "az1") // a replica that never runs: it never reports
	tp := clustertest.TP
	c.SetReplicas(tp, 1, 2, 3, 4)
	c.SetLeader(tp, 1, 1)
	leader.StartLeader(walstore.NodeConfig{})
	ctx := context.Background()
	leader.BecomeLeader(ctx, tp, 1, -1)
	f2.StartFollower(tp)
	f3.StartFollower(tp)
	n := leader.Node
	require.NoError(t, n.SetInSync(tp, []int32{2, 3}))

	sets := [][]int32{{}, {2}, {3}, {2, 3}, {2, 3, 4}, {4}, {2, 4}}
	var setMu sync.Mutex // the toggler's last set, for the watcher
	lastSet := []int32{2, 3}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var toggles, watches atomic.Int64
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := sets[rng.IntN(len(sets))]
			setMu.Lock()
			assert.NoError(t, n.SetInSync(tp, s))
			lastSet = s
			setMu.Unlock()
			toggles.Add(1)
			if rng.IntN(4) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})
	wg.Go(func() {
		high := int64(-1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			hw := n.HighWatermark(tp)
			assert.GreaterOrEqual(t, hw, high, "the high watermark went back within the leadership")
			high = max(high, hw)
			setMu.Lock()
			rs := n.Replicas(tp)
			want := lastSet
			setMu.Unlock()
			assert.Len(t, rs, 3)
			for _, r := range rs {
				if r.CaughtUp {
					assert.GreaterOrEqual(t, r.EndOffset, hw, "broker %d CaughtUp at %d below the high watermark %d", r.Broker, r.EndOffset, hw)
				}
				in := false
				for _, b := range want {
					in = in || b == r.Broker
				}
				assert.Equal(t, in, r.InSync, "broker %d: InSync after SetInSync(%v)", r.Broker, want)
				if r.Broker == 4 {
					assert.False(t, r.CaughtUp, "a follower that never reported is caught up")
					assert.Equal(t, int64(-1), r.EndOffset)
				}
			}
			watches.Add(1)
		}
	})

	var replicated, timedOut int
	end := int64(0)
	for off := int64(0); off < 300 || (toggles.Load() < 300 && off < 3000); off += 10 {
		end = off + 10
		leader.Produce(ctx, tp, 1, off, off+9, 10)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		err := n.WaitReplicated(wctx, tp, 1, off+9)
		cancel()
		if err == nil {
			replicated++
			require.Greater(t, n.HighWatermark(tp), off+9)
			continue
		}
		require.True(t, errors.Is(err, context.DeadlineExceeded), "WaitReplicated: %v", err)
		timedOut++
	}
	close(stop)
	wg.Wait()
	t.Logf("%d SetInSync calls, %d watches; %d waits replicated, %d timed out", toggles.Load(), watches.Load(), replicated, timedOut)
	require.NoError(t, n.SetInSync(tp, []int32{2, 3}))
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, n.WaitReplicated(wctx, tp, 1, end-1))
	require.Equal(t, end, n.HighWatermark(tp))
	// The high watermark may have passed end while no follower was in
	// sync: the live ones catch up since, and are then said to be.
	require.Eventually(t, func() bool {
		caught := 0
		for _, r := range n.Replicas(tp) {
			if r.Broker != 4 && r.CaughtUp && r.EndOffset == end {
				caught++
			}
		}
		return caught == 2
	}, 20*time.Second, time.Millisecond, "%+v", n.Replicas(tp))
}

// A WaitReplicated held up by an in-sync follower that never reports is
// released by the SetInSync that drops it, with no other event (no
// append, no progress) to wake it; and one that waits while that
// follower joins again is held until it leaves.
func TestAdversarySetInSyncWakesWaiters(t *testing.T) {
	c := clustertest.New(t, clustertest.Mem(), 4)
	leader, f2 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2")
	c.AddBroker(4, "az1") // never runs
	tp := clustertest.TP
	c.SetReplicas(tp, 1, 2, 4)
	c.SetLeader(tp, 1, 1)
	leader.StartLeader(walstore.NodeConfig{})
	ctx := context.Background()
	leader.BecomeLeader(ctx, tp, 1, -1)
	f2.StartFollower(tp)
	n := leader.Node
	require.NoError(t, n.SetInSync(tp, []int32{2}))
	leader.Produce(ctx, tp, 1, 0, 9, 10)
	require.NoError(t, n.WaitReplicated(ctx, tp, 1, 9))

	require.NoError(t, n.SetInSync(tp, []int32{2, 4}))
	leader.Produce(ctx, tp, 1, 10, 19, 10)
	require.NoError(t, n.WaitDurable(ctx, tp, 1, 19))
	done := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	go func() { done <- n.WaitReplicated(wctx, tp, 1, 19) }()
	// Broker 2 applies 10-19, which moves nothing while 4 is in sync.
	require.Eventually(t, func() bool {
		for _, r := range n.Replicas(tp) {
			if r.Broker == 2 && r.EndOffset == 20 {
				return true
			}
		}
		return false
	}, 20*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("WaitReplicated returned %v while broker 4, in sync, never applied", err)
	default:
	}
	require.Equal(t, int64(10), n.HighWatermark(tp))
	require.NoError(t, n.SetInSync(tp, []int32{2}))
	require.NoError(t, <-done, "the SetInSync that dropped broker 4 released the wait")
	require.Equal(t, int64(20), n.HighWatermark(tp))
}

// A BecomeLeader again at the same epoch (the controller changing the
// followers) that adds a follower that never reports keeps the high
// watermark where it was, holds it there, and keeps what the follower
// that did report was credited with.
func TestAdversarySameEpochReleadKeepsHighWatermark(t *testing.T) {
	c := clustertest.New(t, clustertest.Mem(), 4)
	leader, f2 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2")
	c.AddBroker(4, "az1") // never runs
	tp := clustertest.TP
	c.SetReplicas(tp, 1, 2)
	c.SetLeader(tp, 1, 1)
	leader.StartLeader(walstore.NodeConfig{})
	ctx := context.Background()
	leader.BecomeLeader(ctx, tp, 1, -1)
	f2.StartFollower(tp)
	n := leader.Node
	leader.Produce(ctx, tp, 1, 0, 19, 10)
	require.NoError(t, n.WaitReplicated(ctx, tp, 1, 19))
	require.Equal(t, int64(20), n.HighWatermark(tp))
	require.NoError(t, n.BecomeLeader(ctx, tp, 1, []int32{2, 4}, -1))
	require.Equal(t, int64(20), n.HighWatermark(tp), "the same-epoch BecomeLeader took the high watermark back")
	rs := n.Replicas(tp)
	require.Len(t, rs, 2)
	require.Equal(t, walstore.ReplicaState{Broker: 2, EndOffset: 20, CaughtUp: true, InSync: true, LastCaughtUp: rs[0].LastCaughtUp}, rs[0])
	require.Equal(t, walstore.ReplicaState{Broker: 4, EndOffset: -1, InSync: true}, rs[1])
	leader.Produce(ctx, tp, 1, 20, 29, 10)
	require.NoError(t, n.WaitDurable(ctx, tp, 1, 29))
	require.Equal(t, int64(20), n.HighWatermark(tp), "broker 4, in sync, has applied nothing")
	require.NoError(t, n.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, n.WaitReplicated(wctx, tp, 1, 29))
}
