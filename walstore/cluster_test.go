package walstore_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// The scenario tests run a small cluster in one process: brokers in AZs
// az1..az3, each with a memstore bucket, a local log, and leader and
// follower engines started on demand, all sharing one metadata log.

var testTP = metadata.TopicPartition{Topic: "orders", Partition: 0}

type cluster struct {
	t       *testing.T
	objects *memstore.Cluster
	meta    metadata.Log

	mu       sync.Mutex
	replicas map[metadata.TopicPartition][]int32
	leaders  map[metadata.TopicPartition]leadership
	brokers  map[int32]*broker
}

type leadership struct {
	broker int32
	epoch  int32
}

type broker struct {
	c        *cluster
	id       int32
	az       string
	store    walstore.ObjectStore
	local    *recordingLog
	leader   *walstore.Leader
	follower *walstore.Follower
	// view is the broker's own belief of what it leads; a zombie keeps an
	// old one.
	view  map[metadata.TopicPartition]int32
	stops []func()
}

func newCluster(t *testing.T, metaPartitions int32) *cluster {
	t.Helper()
	objects, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "bucket-az1", "az2": "bucket-az2", "az3": "bucket-az3"},
		Seed:    1,
	})
	require.NoError(t, err)
	meta, err := memstore.NewLog(metaPartitions, memstore.WithMaxPollWait(20*time.Millisecond))
	require.NoError(t, err)
	c := &cluster{
		t: t, objects: objects, meta: meta,
		replicas: make(map[metadata.TopicPartition][]int32),
		leaders:  make(map[metadata.TopicPartition]leadership),
		brokers:  make(map[int32]*broker),
	}
	t.Cleanup(func() {
		for _, b := range c.brokers {
			b.stop()
		}
		meta.Close()
	})
	return c
}

func (c *cluster) addBroker(id int32, az string) *broker {
	store, err := c.objects.Store(az)
	require.NoError(c.t, err)
	b := &broker{c: c, id: id, az: az, store: store, local: newRecordingLog(), view: make(map[metadata.TopicPartition]int32)}
	c.mu.Lock()
	c.brokers[id] = b
	c.mu.Unlock()
	return b
}

func (c *cluster) setReplicas(tp metadata.TopicPartition, ids ...int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replicas[tp] = ids
}

// setLeader records the controller's choice of leader and epoch.
func (c *cluster) setLeader(tp metadata.TopicPartition, id, epoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaders[tp] = leadership{id, epoch}
}

// followers is the placement: the partition's replicas other than the
// broker that leads it in the controller's view.
func (c *cluster) followers(tp metadata.TopicPartition) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for _, id := range c.replicas[tp] {
		if l, ok := c.leaders[tp]; !ok || l.broker != id {
			out = append(out, id)
		}
	}
	return out
}

func (b *broker) LeaderEpoch(tp metadata.TopicPartition) (int32, bool) {
	b.c.mu.Lock()
	defer b.c.mu.Unlock()
	e, ok := b.view[tp]
	return e, ok
}

func (b *broker) follows(tp metadata.TopicPartition) bool {
	return slices.Contains(b.c.followers(tp), b.id)
}

// startLeader starts b's leader engine.
func (b *broker) startLeader(cfg walstore.LeaderConfig) *walstore.Leader {
	cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local, cfg.View = b.id, b.store, b.c.meta, b.local, b
	cfg.Followers = b.c.followers
	cfg.Interval = orDur(cfg.Interval, 5*time.Millisecond)
	cfg.Backoff = walstore.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond}
	cfg.Seed = uint64(b.id)
	l, err := walstore.NewLeader(cfg)
	require.NoError(b.c.t, err)
	b.leader = l
	b.run(l.Run)
	return l
}

func (b *broker) startFollower() *walstore.Follower {
	f, err := walstore.NewFollower(walstore.FollowerConfig{
		BrokerID: b.id, Store: b.store, Log: b.c.meta, Local: b.local,
		Follows: b.follows,
		Backoff: walstore.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond},
		Seed:    uint64(b.id),
		OnApplied: func(tp metadata.TopicPartition, end int64) {
			if l := b.c.leaderEngine(tp); l != nil {
				l.ReportApplied(tp, b.id, end)
			}
		},
	})
	require.NoError(b.c.t, err)
	b.follower = f
	b.run(f.Run)
	return f
}

func (c *cluster) leaderEngine(tp metadata.TopicPartition) *walstore.Leader {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.leaders[tp]
	if !ok || c.brokers[l.broker] == nil {
		return nil
	}
	return c.brokers[l.broker].leader
}

func (b *broker) run(fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	b.stops = append(b.stops, func() {
		cancel()
		require.NoError(b.c.t, <-done)
	})
}

// stop stops b's engines, as a crash would; its local log survives.
func (b *broker) stop() {
	for _, s := range b.stops {
		s()
	}
	b.stops = nil
}

// becomeLeader makes b the leader of tp at epoch starting at its log end,
// as the controller and the broker's makeLeader would.
func (b *broker) becomeLeader(ctx context.Context, tp metadata.TopicPartition, epoch int32, republishFrom int64) {
	t := b.c.t
	end, err := b.local.EndOffset(tp)
	require.NoError(t, err)
	require.NoError(t, b.local.AssignEpoch(tp, epoch, end))
	b.c.setLeader(tp, b.id, epoch)
	b.c.mu.Lock()
	b.view[tp] = epoch
	b.c.mu.Unlock()
	require.NoError(t, b.leader.BecomeLeader(ctx, tp, epoch, republishFrom))
}

// produce appends records [first, last] in batches of size to b's local log
// and, if b runs a leader engine, to the engine.
func (b *broker) produce(ctx context.Context, tp metadata.TopicPartition, epoch int32, first, last, size int64) {
	t := b.c.t
	for off := first; off <= last; off += size {
		batch := makeBatch(tp, epoch, off, min(off+size-1, last))
		require.NoError(t, b.local.Append(ctx, tp, []combiner.Batch{batch}))
		if b.leader != nil {
			require.NoError(t, b.leader.Append(ctx, tp, batch))
		}
	}
}

// preload puts records [first, last] of epoch into b's local log directly,
// as if replicated before the scenario begins.
func (b *broker) preload(tp metadata.TopicPartition, epoch int32, first, last, size int64) {
	ctx := context.Background()
	end, err := b.local.EndOffset(tp)
	require.NoError(b.c.t, err)
	if end < first {
		require.NoError(b.c.t, b.local.Truncate(ctx, tp, first))
	}
	for off := first; off <= last; off += size {
		require.NoError(b.c.t, b.local.Append(ctx, tp, []combiner.Batch{makeBatch(tp, epoch, off, min(off+size-1, last))}))
	}
}

// makeBatch returns the one true batch for (tp, epoch, first, last): its
// bytes depend on all four, so data written under different epochs differs.
func makeBatch(tp metadata.TopicPartition, epoch int32, first, last int64) combiner.Batch {
	var buf bytes.Buffer
	for off := first; off <= last; off++ {
		fmt.Fprintf(&buf, "%s epoch=%d offset=%d payload=%032d\n", tp, epoch, off, off*7919)
	}
	return combiner.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: time.Now().UnixMilli(), Data: buf.Bytes()}
}

// requireConverges waits until follower's log of tp equals leader's, byte
// for byte, then checks it once more.
func requireConverges(t *testing.T, follower, leader *broker, tp metadata.TopicPartition) {
	t.Helper()
	require.Eventually(t, func() bool {
		return sameBatches(follower.local.Batches(tp), leader.local.Batches(tp))
	}, 20*time.Second, 5*time.Millisecond, "broker %d never converged on broker %d's log of %s:\nfollower %v\nleader   %v",
		follower.id, leader.id, tp, describe(follower.local.Batches(tp)), describe(leader.local.Batches(tp)))
	requireSameLog(t, leader.local.Batches(tp), follower.local.Batches(tp))
}

func sameBatches(a, b []combiner.Batch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Epoch != b[i].Epoch || a[i].FirstOffset != b[i].FirstOffset ||
			a[i].LastOffset != b[i].LastOffset || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

func requireSameLog(t *testing.T, want, got []combiner.Batch) {
	t.Helper()
	require.Equal(t, len(want), len(got), "batch count")
	for i := range want {
		require.Equal(t, want[i].Epoch, got[i].Epoch, "batch %d epoch", i)
		require.Equal(t, want[i].FirstOffset, got[i].FirstOffset, "batch %d first offset", i)
		require.Equal(t, want[i].LastOffset, got[i].LastOffset, "batch %d last offset", i)
		require.True(t, bytes.Equal(want[i].Data, got[i].Data), "batch %d [%d, %d] bytes differ", i, want[i].FirstOffset, want[i].LastOffset)
	}
}

func describe(bs []combiner.Batch) string {
	var s []string
	for _, b := range bs {
		s = append(s, fmt.Sprintf("e%d[%d-%d]", b.Epoch, b.FirstOffset, b.LastOffset))
	}
	return fmt.Sprint(s)
}

func orDur(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// recordingLog is a memstore.LocalLog that also remembers every batch ever
// appended, so a test can check nothing forbidden was appended even if it
// was later truncated away.
type recordingLog struct {
	*memstore.LocalLog
	mu       sync.Mutex
	appended []combiner.Batch
}

func newRecordingLog() *recordingLog { return &recordingLog{LocalLog: memstore.NewLocalLog()} }

func (r *recordingLog) Append(ctx context.Context, tp metadata.TopicPartition, batches []combiner.Batch) error {
	if err := r.LocalLog.Append(ctx, tp, batches); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range batches {
		b.Data = nil
		r.appended = append(r.appended, b)
	}
	return nil
}

func (r *recordingLog) everAppended() []combiner.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.appended)
}

type combinerBatch = combiner.Batch

func itoa(v int64) string { return fmt.Sprint(v) }
