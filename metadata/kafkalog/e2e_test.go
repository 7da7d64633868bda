package kafkalog

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// The end-to-end tests run walstore's leader and follower engines with this
// package's log as the metadata transport: brokers in az1..az3, each with a
// memstore bucket, a memstore local log and a Log of its own on one
// in-process Kafka cluster. They replay the thread's scenarios in which the
// transport matters most: a zombie leader that keeps publishing, entries of
// a newer epoch arriving before the republished ones, and an AZ lost with
// its bucket.

var e2eTP = metadata.TopicPartition{Topic: "orders", Partition: 0}

type e2eCluster struct {
	t       *testing.T
	kafka   *kfake.Cluster
	objects *memstore.Cluster

	mu       sync.Mutex
	replicas []int32
	leader   int32 // in the controller's view
	brokers  map[int32]*e2eBroker
}

type e2eBroker struct {
	c        *e2eCluster
	id       int32
	store    walstore.ObjectStore
	local    *recordingLog
	meta     *Log
	leader   *walstore.Leader
	follower *walstore.Follower
	stops    []func()

	mu sync.Mutex
	// epoch is the broker's own belief of the epoch at which it leads
	// e2eTP, 0 if it does not; a zombie keeps an old one.
	epoch int32
}

func newE2E(t *testing.T) *e2eCluster {
	objects, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "bucket-az1", "az2": "bucket-az2", "az3": "bucket-az3"},
		Seed:    1,
	})
	require.NoError(t, err)
	c := &e2eCluster{
		t:       t,
		kafka:   newCluster(t, kfake.SeedTopics(4, testTopic)),
		objects: objects,
		leader:  -1,
		brokers: make(map[int32]*e2eBroker),
	}
	return c
}

func (c *e2eCluster) addBroker(id int32, az string) *e2eBroker {
	store, err := c.objects.Store(az)
	require.NoError(c.t, err)
	b := &e2eBroker{
		c: c, id: id, store: store, local: &recordingLog{LocalLog: memstore.NewLocalLog()},
		meta: openLog(c.t, c.kafka, Config{Partitions: 4, ReadWait: 100 * time.Millisecond}),
	}
	// Cleanups run last first: the engines stop before their Log closes,
	// and both before the Kafka cluster.
	c.t.Cleanup(b.stop)
	c.mu.Lock()
	c.brokers[id] = b
	c.mu.Unlock()
	return b
}

func (c *e2eCluster) setReplicas(ids ...int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replicas = ids
}

// followers is the placement: the replicas other than the controller's
// leader.
func (c *e2eCluster) followers(tp metadata.TopicPartition) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tp != e2eTP {
		return nil
	}
	var out []int32
	for _, id := range c.replicas {
		if id != c.leader {
			out = append(out, id)
		}
	}
	return out
}

func (c *e2eCluster) leaderEngine() *walstore.Leader {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.brokers[c.leader]; b != nil {
		return b.leader
	}
	return nil
}

// LeaderEpoch is the broker's EpochView.
func (b *e2eBroker) LeaderEpoch(tp metadata.TopicPartition) (int32, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.epoch, tp == e2eTP && b.epoch > 0
}

func (b *e2eBroker) startLeader() {
	l, err := walstore.NewLeader(walstore.LeaderConfig{
		BrokerID: b.id, Store: b.store, Log: b.meta, Local: b.local, View: b,
		Followers: b.c.followers,
		Interval:  5 * time.Millisecond,
		Backoff:   walstore.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond},
		Seed:      uint64(b.id),
		Logger:    quietLogger(),
	})
	require.NoError(b.c.t, err)
	b.leader = l
	b.run(l.Run)
}

func (b *e2eBroker) startFollower() *walstore.Follower {
	f, err := walstore.NewFollower(walstore.FollowerConfig{
		BrokerID: b.id, Store: b.store, Log: b.meta, Local: b.local,
		Follows: func(tp metadata.TopicPartition) bool { return slices.Contains(b.c.followers(tp), b.id) },
		Backoff: walstore.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond},
		Seed:    uint64(b.id),
		Logger:  quietLogger(),
		OnApplied: func(tp metadata.TopicPartition, end int64) {
			if l := b.c.leaderEngine(); l != nil {
				l.ReportApplied(tp, b.id, end)
			}
		},
	})
	require.NoError(b.c.t, err)
	b.follower = f
	b.run(f.Run)
	return f
}

func (b *e2eBroker) run(fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	b.stops = append(b.stops, func() {
		cancel()
		require.NoError(b.c.t, <-done)
	})
}

// stop stops b's engines, as a crash would; its local log survives.
func (b *e2eBroker) stop() {
	for _, s := range b.stops {
		s()
	}
	b.stops = nil
}

// becomeLeader makes b the leader at epoch from its log end, as the
// controller and the broker's makeLeader would.
func (b *e2eBroker) becomeLeader(ctx context.Context, epoch int32, republishFrom int64) {
	end, err := b.local.EndOffset(e2eTP)
	require.NoError(b.c.t, err)
	require.NoError(b.c.t, b.local.AssignEpoch(e2eTP, epoch, end))
	b.c.mu.Lock()
	b.c.leader = b.id
	b.c.mu.Unlock()
	b.mu.Lock()
	b.epoch = epoch
	b.mu.Unlock()
	require.NoError(b.c.t, b.leader.BecomeLeader(ctx, e2eTP, epoch, republishFrom))
}

// produce appends records [first, last] in batches of ten to b's local log
// and its leader engine.
func (b *e2eBroker) produce(ctx context.Context, epoch int32, first, last int64) {
	for off := first; off <= last; off += 10 {
		batch := e2eBatch(epoch, off, min(off+9, last))
		require.NoError(b.c.t, b.local.Append(ctx, e2eTP, []combiner.Batch{batch}))
		require.NoError(b.c.t, b.leader.Append(ctx, e2eTP, batch))
	}
}

// preload puts records [first, last] of epoch into b's local log, as if
// replicated before the scenario begins.
func (b *e2eBroker) preload(epoch int32, first, last int64) {
	ctx := context.Background()
	require.NoError(b.c.t, b.local.Truncate(ctx, e2eTP, first))
	for off := first; off <= last; off += 10 {
		require.NoError(b.c.t, b.local.Append(ctx, e2eTP, []combiner.Batch{e2eBatch(epoch, off, min(off+9, last))}))
	}
}

// e2eBatch is the one true batch for (epoch, first, last): data written
// under different epochs differs.
func e2eBatch(epoch int32, first, last int64) combiner.Batch {
	var buf bytes.Buffer
	for off := first; off <= last; off++ {
		fmt.Fprintf(&buf, "epoch=%d offset=%d payload=%032d\n", epoch, off, off*7919)
	}
	return combiner.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: 1_760_000_000_000 + first, Data: buf.Bytes()}
}

// uploadOldEpoch has r1 lead at epoch 5 from offset 100 and upload
// [100, last], waiting until all of it is published.
func uploadOldEpoch(t *testing.T, ctx context.Context, r1 *e2eBroker, last int64) {
	r1.startLeader()
	require.NoError(t, r1.local.Truncate(ctx, e2eTP, 100))
	r1.becomeLeader(ctx, 5, -1)
	r1.produce(ctx, 5, 100, last)
	require.NoError(t, r1.leader.WaitDurable(ctx, e2eTP, last))
}

// requireConverges waits until follower's log equals leader's, batch for
// batch and byte for byte.
func requireConverges(t *testing.T, follower, leader *e2eBroker) {
	t.Helper()
	same := func() bool {
		a, b := follower.local.Batches(e2eTP), leader.local.Batches(e2eTP)
		return slices.EqualFunc(a, b, func(x, y combiner.Batch) bool {
			return x.Epoch == y.Epoch && x.FirstOffset == y.FirstOffset && x.LastOffset == y.LastOffset && bytes.Equal(x.Data, y.Data)
		})
	}
	require.Eventually(t, same, testTimeout, 5*time.Millisecond,
		"broker %d never converged on broker %d's log", follower.id, leader.id)
}

// requireNoFencedAppend checks that r never appended, even transiently,
// epoch-5 data at or above offset 150, which epoch 6 superseded.
func requireNoFencedAppend(t *testing.T, r *e2eBroker) {
	t.Helper()
	for _, b := range r.local.everAppended() {
		assert.False(t, b.Epoch == 5 && b.LastOffset >= 150, "broker %d appended fenced batch e5[%d-%d]", r.id, b.FirstOffset, b.LastOffset)
	}
}

// recordingLog remembers every batch ever appended, so a test can check that
// nothing forbidden was appended even if it was later truncated away.
type recordingLog struct {
	*memstore.LocalLog
	mu       sync.Mutex
	appended []combiner.Batch
}

func (r *recordingLog) Append(ctx context.Context, tp metadata.TopicPartition, batches []combiner.Batch) error {
	if err := r.LocalLog.Append(ctx, tp, batches); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range batches {
		r.appended = append(r.appended, combiner.Batch{Epoch: b.Epoch, FirstOffset: b.FirstOffset, LastOffset: b.LastOffset})
	}
	return nil
}

func (r *recordingLog) everAppended() []combiner.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.appended)
}

// TestEngineZombieLeaderOverKafka: a leader that was never told it lost
// leadership keeps uploading and publishing to the topic; the follower
// appends none of it.
func TestEngineZombieLeaderOverKafka(t *testing.T) {
	ctx := testContext(t)
	c := newE2E(t)
	r1, r2, r3 := c.addBroker(1, "az1"), c.addBroker(2, "az2"), c.addBroker(3, "az3")
	c.setReplicas(1, 2, 3)
	uploadOldEpoch(t, ctx, r1, 149)
	r2.preload(5, 100, 149)
	f3 := r3.startFollower()
	requireConverges(t, r3, r1)

	r2.startLeader()
	r2.becomeLeader(ctx, 6, -1)
	r1.produce(ctx, 5, 150, 199) // r1's view still says epoch 5
	require.NoError(t, r1.leader.WaitDurable(ctx, e2eTP, 199), "the zombie's uploads and publishes succeed")
	r2.produce(ctx, 6, 150, 179)

	requireConverges(t, r3, r2)
	requireNoFencedAppend(t, r3)
	assert.Positive(t, f3.Stats().Dropped, "the zombie's entries are dropped as stale")
}

// TestEngineRepublishAfterNewerEpochOverKafka: the new leader publishes
// epoch-6 data before republishing what the follower lacks; the follower
// holds, then converges.
func TestEngineRepublishAfterNewerEpochOverKafka(t *testing.T) {
	ctx := testContext(t)
	c := newE2E(t)
	r1, r2, r3 := c.addBroker(1, "az1"), c.addBroker(2, "az2"), c.addBroker(3, "az3")
	c.setReplicas(1, 2, 3)
	uploadOldEpoch(t, ctx, r1, 199)
	r2.preload(5, 100, 149)
	r3.preload(5, 100, 119)
	r1.stop()
	require.NoError(t, c.objects.SetOutage("az1", true))

	r2.startLeader()
	r2.becomeLeader(ctx, 6, -1)
	r2.produce(ctx, 6, 150, 189)
	require.NoError(t, r2.leader.WaitDurable(ctx, e2eTP, 189))
	f3 := r3.startFollower()
	require.Eventually(t, func() bool { return f3.Stats().Held > 0 }, testTimeout, time.Millisecond,
		"R3 holds epoch-6 entries it cannot apply yet")
	require.NoError(t, r2.leader.Republish(ctx, e2eTP, 120))

	requireConverges(t, r3, r2)
	requireNoFencedAppend(t, r3)
}

// TestEngineAZLossOverKafka: the leader's AZ goes down with its bucket; the
// new leader republishes in its own AZ and the lagging follower catches up
// from that, ignoring the old leader's entries past the new epoch's start.
func TestEngineAZLossOverKafka(t *testing.T) {
	ctx := testContext(t)
	c := newE2E(t)
	r1, r2, r3 := c.addBroker(1, "az1"), c.addBroker(2, "az2"), c.addBroker(3, "az3")
	c.setReplicas(1, 2, 3)
	uploadOldEpoch(t, ctx, r1, 199)
	r2.preload(5, 100, 149)
	r3.preload(5, 100, 119)
	r1.stop()
	require.NoError(t, c.objects.SetOutage("az1", true))

	r2.startLeader()
	r2.becomeLeader(ctx, 6, 120)
	r2.produce(ctx, 6, 150, 189)
	f3 := r3.startFollower()

	requireConverges(t, r3, r2)
	requireNoFencedAppend(t, r3)
	assert.Positive(t, f3.Stats().Applied)
}
