package sim

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// Regression tests for engine bugs the simulation found, each named after
// the seed that found it, with a minimal reproduction that does not depend
// on the simulation's schedule.

// TestSimSeed1DurableOffsetStartsOverAtANewEpoch: a leader engine that led
// a partition before, lost it (and its log was truncated as a follower's
// is), and leads it again at a newer epoch must not report the old
// leadership's durable offset: WaitDurable would acknowledge records of the
// new epoch that were never uploaded. Seed 1 found it: b2 led t-0 at epoch
// 2 up to 179, was truncated to 58, and led epoch 5 from 58 with
// DurableOffset still 179.
func TestSimSeed1DurableOffsetStartsOverAtANewEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		tp := metadata.TopicPartition{Topic: "t", Partition: 0}
		r := startRegressLeader(t, nil)
		defer r.stop()
		cluster, local, l := r.cluster, r.local, r.n

		produce := func(epoch int32, first, last int64) {
			b := regressBatch(tp, epoch, first, last)
			require.NoError(t, l.Append(ctx, tp, b))
			require.NoError(t, local.Append(ctx, tp, []storage.Batch{b}))
		}
		require.NoError(t, local.AssignEpoch(tp, 1, 0))
		require.NoError(t, l.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
		produce(1, 0, 49)
		produce(1, 50, 99)
		require.NoError(t, l.WaitDurable(ctx, tp, 1, 99))

		// Deposed; as a follower the broker truncates the records from 50
		// on, which the next leader did not have.
		require.NoError(t, l.StopReplica(ctx, tp))
		require.NoError(t, local.Truncate(ctx, tp, 50))
		require.NoError(t, local.AssignEpoch(tp, 3, 50))
		require.NoError(t, l.BecomeLeader(ctx, tp, 3, []int32{2}, -1))
		require.LessOrEqual(t, l.DurableOffset(tp), int64(50), "durable offset after leading again at epoch 3 from 50")

		// Nothing can be uploaded now, so nothing new may be acknowledged.
		require.NoError(t, cluster.SetOutage("az1", true))
		produce(3, 50, 59)
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		require.ErrorIs(t, l.WaitDurable(wctx, tp, 3, 59), context.DeadlineExceeded, "offset 59 of epoch 3 acknowledged as durable with the bucket down")
	})
}

// TestSimSeed2DataOfAnEarlierLeadershipIsNotPublishedUnderANewEpoch: data a
// leader engine accepted and had not yet cut when it lost leadership must
// stay withheld (as Resign says) even if the engine leads the partition
// again before the data is cut; otherwise it is published under the new
// epoch although the log no longer holds it, and DurableOffset counts it.
// Seed 2 found it: b2's epoch-6 batches 97-139 waited in its builder behind
// slow uploads while it was deposed, truncated to 72 and elected at epoch
// 14, and were then published by epoch 14 (durable offset 140, log end 117).
func TestSimSeed2DataOfAnEarlierLeadershipIsNotPublishedUnderANewEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		tp := metadata.TopicPartition{Topic: "t", Partition: 0}
		r := startRegressLeader(t, func(c *walstore.NodeConfig) { c.MaxInflight = 1 })
		defer r.stop()
		cluster, meta, local, l := r.cluster, r.meta, r.local, r.n
		produce := func(epoch int32, first, last int64) {
			b := regressBatch(tp, epoch, first, last)
			require.NoError(t, l.Append(ctx, tp, b))
			require.NoError(t, local.Append(ctx, tp, []storage.Batch{b}))
		}

		require.NoError(t, local.AssignEpoch(tp, 1, 0))
		require.NoError(t, l.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
		// The bucket is down: the first object's upload holds the only
		// slot, so the second batch stays in the builder, uncut.
		require.NoError(t, cluster.SetOutage("az1", true))
		produce(1, 0, 9)
		time.Sleep(50 * time.Millisecond)
		produce(1, 10, 19)
		time.Sleep(50 * time.Millisecond)

		// Deposed at 10; leads again at epoch 3 from 10.
		require.NoError(t, l.StopReplica(ctx, tp))
		require.NoError(t, local.Truncate(ctx, tp, 10))
		require.NoError(t, local.AssignEpoch(tp, 3, 10))
		require.NoError(t, l.BecomeLeader(ctx, tp, 3, []int32{2}, -1))
		require.NoError(t, cluster.SetOutage("az1", false))
		time.Sleep(5 * time.Second)
		synctest.Wait()

		require.LessOrEqual(t, l.DurableOffset(tp), int64(10), "durable offset; the log ends at 10")
		low, high, err := meta.Watermarks(ctx, 0)
		require.NoError(t, err)
		recs, err := meta.Read(ctx, 0, low, int(high-low))
		require.NoError(t, err)
		for _, r := range recs {
			m, err := metadata.DecodeMessage(r.Value)
			require.NoError(t, err)
			for _, e := range m.Entries {
				require.False(t, e.PublisherEpoch == 3, "epoch 3 published %s records e%d [%d, %d], accepted under epoch 1", e.Partition, e.RecordEpoch, e.FirstOffset, e.LastOffset)
			}
		}
	})
}

// TestSimSeed3DurableOffsetWaitsForTheRepublish: a new leader that
// republishes part of its log (BecomeLeader with republishFrom) must not
// report offsets past the republish start durable before the republish is
// stored: the records in between are on this broker only, and a producer
// acknowledged for a later offset would lose its record with them. Seed 3
// found it: b1 restarted with offsets 960-2725 never uploaded, led epoch 4
// republishing from 700, and reported 2734 durable after its first new
// batch while the republish was still retrying.
func TestSimSeed3DurableOffsetWaitsForTheRepublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		tp := metadata.TopicPartition{Topic: "t", Partition: 0}
		r := startRegressLeader(t, nil)
		defer r.stop()
		cluster, local, l := r.cluster, r.local, r.n
		// The broker's log holds 0-99 of epoch 1, which no engine ever
		// uploaded (the engine that took them crashed).
		require.NoError(t, local.AssignEpoch(tp, 1, 0))
		for first := int64(0); first < 100; first += 10 {
			require.NoError(t, local.Append(ctx, tp, []storage.Batch{regressBatch(tp, 1, first, first+9)}))
		}

		// The republish's object is large and slow to store; new data's
		// objects are small and quick.
		cluster.AddFault(faults.On(func(r faults.Request) bool {
			return r.Op == faults.OpPut && r.Length > 200
		}, faults.Delay(10*time.Second)))
		require.NoError(t, local.AssignEpoch(tp, 2, 100))
		require.NoError(t, l.BecomeLeader(ctx, tp, 2, []int32{2}, 0))
		time.Sleep(time.Second) // the markers are out, the republish is stuck
		b := regressBatch(tp, 2, 100, 100)
		require.NoError(t, l.Append(ctx, tp, b))
		require.NoError(t, local.Append(ctx, tp, []storage.Batch{b}))
		time.Sleep(time.Second)
		require.LessOrEqual(t, l.DurableOffset(tp), int64(0), "durable offset while 0-99 are only being republished")

		require.NoError(t, l.WaitDurable(ctx, tp, 2, 100))
		require.Equal(t, int64(101), l.DurableOffset(tp), "durable offset once the republish is stored")
	})
}

// TestSimSeed11FollowerProgressIsForgottenAtANewEpoch: what followers
// reported applied while an engine led a partition describes their logs
// against that leadership's log; when the engine leads the partition again
// at a newer epoch (after its log was truncated and rewritten), those
// reports say nothing about the new epoch's data, and its garbage collector
// must not delete the new objects on their word. Seed 11 found it: b5, once
// leader at epoch 4 and told b3 was at 304, led epoch 7 from 189 and
// deleted its epoch-7 object of 189-201, which b3 never had.
func TestSimSeed11FollowerProgressIsForgottenAtANewEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		tp := metadata.TopicPartition{Topic: "t", Partition: 0}
		r := startRegressLeader(t, func(c *walstore.NodeConfig) { c.GCInterval = time.Hour })
		defer r.stop()
		local, l := r.local, r.n
		produce := func(epoch int32, first, last int64) {
			b := regressBatch(tp, epoch, first, last)
			require.NoError(t, l.Append(ctx, tp, b))
			require.NoError(t, local.Append(ctx, tp, []storage.Batch{b}))
			require.NoError(t, l.WaitDurable(ctx, tp, epoch, last))
		}

		require.NoError(t, local.AssignEpoch(tp, 1, 0))
		require.NoError(t, l.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
		produce(1, 0, 49)
		produce(1, 50, 99)
		l.RecordProgress(walstore.Progress{Partition: tp, Leader: 1, Follower: 2, EndOffset: 100, LastEpoch: 1}) // follower 2 holds 0-99 of epoch 1
		n, err := l.CollectGarbage(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n, "epoch 1's two objects, which follower 2 holds")

		// Deposed; epoch 2 started at 50 elsewhere; the broker's log is
		// truncated to 50 and it leads again at epoch 3 from 50.
		require.NoError(t, l.StopReplica(ctx, tp))
		require.NoError(t, local.Truncate(ctx, tp, 50))
		require.NoError(t, local.AssignEpoch(tp, 3, 50))
		require.NoError(t, l.BecomeLeader(ctx, tp, 3, []int32{2}, -1))
		produce(3, 50, 59)
		n, err = l.CollectGarbage(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "epoch 3's object deleted on the word of a report about epoch 1")
	})
}

// TestFuzzFollowerMarkerInsideABatch: a marker that starts an epoch inside
// a batch of the local log (here epoch 2 at 1, over the batch 0-4 of epoch
// 1) makes the follower truncate the divergent records; the batch holding
// the offset must go whole, as Kafka's truncateTo removes it, instead of the
// engine asking the local log for a truncation inside a batch, which
// memstore refuses and which stopped the engine's Run. FuzzFollower found
// it (its input is among the fuzz target's seeds). Epochs start at batch
// boundaries in every log, so only a wrong marker does this; it may cost
// the follower a refetch, never the engine.
func TestFuzzFollowerMarkerInsideABatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		tp := metadata.TopicPartition{Topic: "t", Partition: 0}
		cluster, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "bucket-az1"}})
		require.NoError(t, err)
		store, err := cluster.Store("az1")
		require.NoError(t, err)
		meta, err := memstore.NewLog(1)
		require.NoError(t, err)
		defer meta.Close()
		local := memstore.NewLocalLog()
		require.NoError(t, local.Append(ctx, tp, []storage.Batch{regressBatch(tp, 1, 0, 4)}))
		msg, err := metadata.AppendMessage(nil, &metadata.Message{WriterBrokerID: 1, Markers: []metadata.EpochStart{
			{Partition: tp, Epoch: 1, StartOffset: 0, LeaderBrokerID: 1}, {Partition: tp, Epoch: 2, StartOffset: 1, LeaderBrokerID: 1},
		}})
		require.NoError(t, err)
		_, err = meta.Append(ctx, 0, msg)
		require.NoError(t, err)
		f, err := walstore.NewNode(walstore.NodeConfig{BrokerID: 2, Store: store, Log: meta, Local: local, Logger: quiet()})
		require.NoError(t, err)
		require.NoError(t, f.BecomeFollower(ctx, tp, 2, 1))
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f.Run(runCtx) }()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("the follower stopped on a marker inside a batch: %v", err)
		default:
		}
		end, err := local.EndOffset(tp)
		require.NoError(t, err)
		require.Equal(t, int64(0), end, "the batch holding the divergent offset 1 is truncated whole")
		stop()
		require.NoError(t, <-done)
	})
}

// regressLeader is the setup the leader regressions share: broker 1 in az1
// with a memstore bucket, a one-partition metadata log and a local log,
// leading for follower 2, its Node running until stop.
type regressLeader struct {
	cluster *memstore.Cluster
	meta    *memstore.Log
	local   *memstore.LocalLog
	n       *walstore.Node
	stop    func()
}

// startRegressLeader starts it; tune, if not nil, adjusts the engine's
// configuration first.
func startRegressLeader(t *testing.T, tune func(*walstore.NodeConfig)) *regressLeader {
	t.Helper()
	cluster, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "bucket-az1"}})
	require.NoError(t, err)
	store, err := cluster.Store("az1")
	require.NoError(t, err)
	meta, err := memstore.NewLog(1)
	require.NoError(t, err)
	local := memstore.NewLocalLog()
	cfg := walstore.NodeConfig{BrokerID: 1, Store: store, Log: meta, Local: local, Logger: quiet(),
		Interval: 10 * time.Millisecond}
	if tune != nil {
		tune(&cfg)
	}
	n, err := walstore.NewNode(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- n.Run(ctx) }()
	return &regressLeader{cluster: cluster, meta: meta, local: local, n: n, stop: func() {
		cancel()
		require.NoError(t, <-done)
		meta.Close()
	}}
}

// regressBatch returns a batch of records [first, last] of tp at epoch.
func regressBatch(tp metadata.TopicPartition, epoch int32, first, last int64) storage.Batch {
	data := []byte(fmt.Sprintf("%s e%d [%d,%d]", tp, epoch, first, last))
	return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: 1_000_000 + last, Data: data}
}

// quiet is a logger for engines whose retries are expected.
func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }
