//go:build activetier_knownbugs

package sim

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// Reproductions of engine bugs the simulation found that need more than a
// small, local fix. They fail today and are left out of CI:
//
//	go test -tags activetier_knownbugs ./internal/sim -run TestKnownBug -v

// TestKnownBugFollowsFlippedWhileIdle: walstore documents that a broker that
// becomes a partition's leader only has to make Follows say so. A follower
// engine notices Follows only in step, which runs when something wakes it;
// if nothing does while the broker leads (no metadata for its partition),
// the engine keeps its state when Follows turns true again: the log end and
// epochs from before the broker led. It then neither truncates the records
// the broker wrote as leader nor appends where the log ends; here its Run
// fails. The simulation finds it with ACTIVETIER_SIM_FOLLOWS_ONLY=1 (seed
// 25: b2 led t-0 at epoch 20 from 355 to 434, resigned, and kept e20[422-434]
// after handling epoch 21's marker at 355).
func TestKnownBugFollowsFlippedWhileIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		tp := metadata.TopicPartition{Topic: "t", Partition: 0}
		cluster, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "bucket-az1", "az2": "bucket-az2"}})
		require.NoError(t, err)
		store1, err := cluster.Store("az1")
		require.NoError(t, err)
		store2, err := cluster.Store("az2")
		require.NoError(t, err)
		meta, err := memstore.NewLog(1)
		require.NoError(t, err)
		defer meta.Close()
		log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
		leader, err := walstore.NewLeader(walstore.LeaderConfig{
			BrokerID: 1, Store: store1, Log: meta, Local: log1, Interval: 10 * time.Millisecond, Logger: quiet(),
			Followers: func(metadata.TopicPartition) []int32 { return []int32{2} },
		})
		require.NoError(t, err)
		var follows atomic.Bool
		follows.Store(true)
		follower, err := walstore.NewFollower(walstore.FollowerConfig{
			BrokerID: 2, Store: store2, Log: meta, Local: log2, Logger: quiet(),
			Follows: func(metadata.TopicPartition) bool { return follows.Load() },
		})
		require.NoError(t, err)
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		leaderDone, followerDone := make(chan error, 1), make(chan error, 1)
		go func() { leaderDone <- leader.Run(runCtx) }()
		go func() { followerDone <- follower.Run(runCtx) }()

		// Broker 1 leads epoch 1; broker 2 follows and has 0-9.
		require.NoError(t, log1.AssignEpoch(tp, 1, 0))
		require.NoError(t, leader.BecomeLeader(ctx, tp, 1, -1))
		b := regressBatch(tp, 1, 0, 9)
		require.NoError(t, leader.Append(ctx, tp, b))
		require.NoError(t, log1.Append(ctx, tp, []combiner.Batch{b}))
		time.Sleep(time.Second)
		synctest.Wait()
		end, err := log2.EndOffset(tp)
		require.NoError(t, err)
		require.Equal(t, int64(10), end)

		// Broker 2 leads epoch 2 and writes 10-19; nothing is published
		// to its metadata partition meanwhile.
		leader.Resign(tp)
		follows.Store(false)
		require.NoError(t, log2.AssignEpoch(tp, 2, 10))
		require.NoError(t, log2.Append(ctx, tp, []combiner.Batch{regressBatch(tp, 2, 10, 19)}))
		time.Sleep(time.Second)

		// Broker 1 leads epoch 3 from 10; broker 2 follows again and must
		// truncate 10-19, which epoch 3 does not have.
		follows.Store(true)
		require.NoError(t, log1.AssignEpoch(tp, 3, 10))
		require.NoError(t, leader.BecomeLeader(ctx, tp, 3, -1))
		b = regressBatch(tp, 3, 10, 14)
		require.NoError(t, leader.Append(ctx, tp, b))
		require.NoError(t, log1.Append(ctx, tp, []combiner.Batch{b}))
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case err := <-followerDone:
			t.Fatalf("the follower engine stopped: %v", err)
		default:
		}
		require.Equal(t, log1.Batches(tp), log2.Batches(tp), "broker 2's log, which should be broker 1's")
		stop()
		require.NoError(t, <-leaderDone)
		require.NoError(t, <-followerDone)
	})
}

// slowMarkers is a metadata log whose reads return one record at a time,
// and take a second from offset from on: a follower that reads its
// metadata slowly.
type slowMarkers struct {
	metadata.Log
	from int64
}

func (s slowMarkers) Read(ctx context.Context, partition int32, from int64, max int) ([]metadata.Record, error) {
	if from >= s.from {
		time.Sleep(time.Second)
	}
	return s.Log.Read(ctx, partition, from, 1)
}

// TestKnownBugProgressOfRecordsToBeTruncated: a follower reports its log
// end (OnApplied, relayed to ReportApplied) after applying records it has
// not yet learned are fenced: here the old leader's uncommitted tail,
// published before the election, which a lagging follower applies after it.
// The new leader's garbage collector counts them, deletes its own object of
// the same offsets, and the follower, once it reads the new epoch's marker
// and truncates, cannot get them: it never catches up. The report carries
// no epoch, so the leader cannot tell; Kafka's fetch carries the follower's
// last epoch for this. The simulation finds it with
// ACTIVETIER_SIM_RELAY_UNCHECKED=1 (for example seed 36).
func TestKnownBugProgressOfRecordsToBeTruncated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		tp := metadata.TopicPartition{Topic: "t", Partition: 0}
		cluster, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "bucket-az1", "az2": "bucket-az2", "az3": "bucket-az3"}})
		require.NoError(t, err)
		meta, err := memstore.NewLog(1)
		require.NoError(t, err)
		defer meta.Close()
		follower3 := func(metadata.TopicPartition) []int32 { return []int32{3} }
		newLeader := func(id int32, az string, local walstore.LocalLog) *walstore.Leader {
			store, err := cluster.Store(az)
			require.NoError(t, err)
			l, err := walstore.NewLeader(walstore.LeaderConfig{
				BrokerID: id, Store: store, Log: meta, Local: local, Interval: 10 * time.Millisecond,
				GCInterval: time.Hour, Followers: follower3, Logger: quiet(),
			})
			require.NoError(t, err)
			return l
		}
		log1, log2, log3 := memstore.NewLocalLog(), memstore.NewLocalLog(), memstore.NewLocalLog()
		l1, l2 := newLeader(1, "az1", log1), newLeader(2, "az2", log2)
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		done := make(chan error, 3)
		go func() { done <- l1.Run(runCtx) }()
		go func() { done <- l2.Run(runCtx) }()
		produce := func(l *walstore.Leader, local *memstore.LocalLog, epoch int32, first, last int64) {
			b := regressBatch(tp, epoch, first, last)
			require.NoError(t, l.Append(ctx, tp, b))
			require.NoError(t, local.Append(ctx, tp, []combiner.Batch{b}))
			require.NoError(t, l.WaitDurable(ctx, tp, last))
		}

		// Broker 1 leads epoch 1 and publishes 0-69; broker 2 replicated
		// only 0-49 when it is elected at epoch 2 from 50.
		require.NoError(t, log1.AssignEpoch(tp, 1, 0))
		require.NoError(t, l1.BecomeLeader(ctx, tp, 1, -1))
		produce(l1, log1, 1, 0, 49)
		produce(l1, log1, 1, 50, 69)
		require.NoError(t, log2.Append(ctx, tp, []combiner.Batch{regressBatch(tp, 1, 0, 49)}))
		l1.Resign(tp)
		_, high, err := meta.Watermarks(ctx, 0)
		require.NoError(t, err)
		require.NoError(t, log2.AssignEpoch(tp, 2, 50))
		require.NoError(t, l2.BecomeLeader(ctx, tp, 2, 0))
		produce(l2, log2, 2, 50, 59)

		// Broker 3, which lags, reads the metadata slowly from epoch 2's
		// first message on; its progress goes to the leader, broker 2.
		store3, err := cluster.Store("az3")
		require.NoError(t, err)
		f3, err := walstore.NewFollower(walstore.FollowerConfig{
			BrokerID: 3, Store: store3, Log: slowMarkers{meta, high}, Local: log3, Logger: quiet(),
			Follows:   func(metadata.TopicPartition) bool { return true },
			OnApplied: func(tp metadata.TopicPartition, end int64) { l2.ReportApplied(tp, 3, end) },
		})
		require.NoError(t, err)
		go func() { done <- f3.Run(runCtx) }()
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		end, err := log3.EndOffset(tp)
		require.NoError(t, err)
		require.Equal(t, int64(70), end, "broker 3 applied epoch 1's 0-69 before reading epoch 2's marker")
		// Broker 2 reckons broker 3 holds 0-69 and deletes its object of
		// epoch 2's 50-59 (the republished 0-49 stays: its section ends
		// below 70 too, but broker 3 holds those records).
		n, err := l2.CollectGarbage(ctx)
		require.NoError(t, err)
		require.Positive(t, n, "broker 2 deleted nothing")

		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, log2.Batches(tp), log3.Batches(tp), "broker 3's log, which should be broker 2's")
		stop()
		for range 3 {
			require.NoError(t, <-done)
		}
	})
}
