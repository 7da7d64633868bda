package clustertest

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

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// TP is the partition most scenarios replicate.
var TP = metadata.TopicPartition{Topic: "orders", Partition: 0}

// Cluster is a test cluster: brokers, placement, the controller's choice
// of leaders, and the shared backend. Its methods fail the test on error.
type Cluster struct {
	T       *testing.T
	Objects Objects
	Meta    metadata.Log

	mu       sync.Mutex
	replicas map[metadata.TopicPartition][]int32
	leaders  map[metadata.TopicPartition]leadership
	brokers  map[int32]*Broker
	fault    func(Op, string) Fault
	gets     map[string]int64
}

type leadership struct {
	broker int32
	epoch  int32
}

// New returns a cluster on backend b with a metadata log of metaPartitions
// partitions. Everything is stopped and closed when the test ends.
func New(t *testing.T, b Backend, metaPartitions int32) *Cluster {
	t.Helper()
	c := &Cluster{
		T: t, Objects: b.Objects(t), Meta: b.Log(t, metaPartitions),
		replicas: make(map[metadata.TopicPartition][]int32),
		leaders:  make(map[metadata.TopicPartition]leadership),
		brokers:  make(map[int32]*Broker),
		gets:     make(map[string]int64),
	}
	t.Cleanup(func() {
		for _, b := range c.brokers {
			b.Stop()
		}
		c.Meta.Close()
	})
	return c
}

// SetFault installs fn to decide the fate of every request of every
// broker's store (nil removes it).
func (c *Cluster) SetFault(fn func(op Op, bucket string) Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fault = fn
}

// Gets returns how many GETs brokers have made to bucket.
func (c *Cluster) Gets(bucket string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets[bucket]
}

// AddBroker adds broker id in az, with an empty local log.
func (c *Cluster) AddBroker(id int32, az string) *Broker {
	store, err := c.Objects.Store(az)
	require.NoError(c.T, err)
	b := &Broker{C: c, ID: id, AZ: az, Store: faultyStore{store, c}, Local: NewRecordingLog(), view: make(map[metadata.TopicPartition]int32)}
	c.mu.Lock()
	c.brokers[id] = b
	c.mu.Unlock()
	return b
}

// SetReplicas sets tp's replica set.
func (c *Cluster) SetReplicas(tp metadata.TopicPartition, ids ...int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replicas[tp] = ids
}

// SetLeader records the controller's choice of leader and epoch for tp.
func (c *Cluster) SetLeader(tp metadata.TopicPartition, id, epoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaders[tp] = leadership{id, epoch}
}

// Followers is the placement: tp's replicas other than its current leader.
func (c *Cluster) Followers(tp metadata.TopicPartition) []int32 {
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

// leaderEngine returns the leader engine of tp's current leader, if running.
func (c *Cluster) leaderEngine(tp metadata.TopicPartition) *walstore.Leader {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.leaders[tp]
	if !ok || c.brokers[l.broker] == nil {
		return nil
	}
	return c.brokers[l.broker].Leader
}

// Broker is one broker of a Cluster.
type Broker struct {
	C        *Cluster
	ID       int32
	AZ       string
	Store    walstore.ObjectStore
	Local    *RecordingLog
	Leader   *walstore.Leader
	Follower *walstore.Follower
	// view is the broker's own belief of what it leads; a zombie keeps an
	// old one.
	view  map[metadata.TopicPartition]int32
	stops []func()
}

// LeaderEpoch implements walstore.EpochView from the broker's own belief.
func (b *Broker) LeaderEpoch(tp metadata.TopicPartition) (int32, bool) {
	b.C.mu.Lock()
	defer b.C.mu.Unlock()
	e, ok := b.view[tp]
	return e, ok
}

// Follows reports whether b follows tp under the current placement.
func (b *Broker) Follows(tp metadata.TopicPartition) bool {
	return slices.Contains(b.C.Followers(tp), b.ID)
}

// StartLeader starts b's leader engine; cfg's wiring fields are filled in,
// and a 5ms interval and fast retries are the defaults.
func (b *Broker) StartLeader(cfg walstore.LeaderConfig) *walstore.Leader {
	cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local, cfg.View = b.ID, b.Store, b.C.Meta, b.Local, b
	cfg.Followers = b.C.Followers
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Millisecond
	}
	if cfg.Backoff == (walstore.Backoff{}) {
		cfg.Backoff = walstore.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond}
	}
	cfg.Seed = uint64(b.ID)
	l, err := walstore.NewLeader(cfg)
	require.NoError(b.C.T, err)
	b.Leader = l
	b.run(l.Run)
	return l
}

// StartFollower starts b's follower engine, relaying its progress to the
// current leader's garbage collector as a broker would.
func (b *Broker) StartFollower() *walstore.Follower {
	return b.StartFollowerConfig(walstore.FollowerConfig{})
}

// StartFollowerConfig is StartFollower with cfg's tuning fields; its wiring
// fields are filled in.
func (b *Broker) StartFollowerConfig(cfg walstore.FollowerConfig) *walstore.Follower {
	cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local, cfg.Follows = b.ID, b.Store, b.C.Meta, b.Local, b.Follows
	if cfg.Backoff == (walstore.Backoff{}) {
		cfg.Backoff = walstore.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond}
	}
	cfg.Seed = uint64(b.ID)
	cfg.OnApplied = func(tp metadata.TopicPartition, end int64) {
		if l := b.C.leaderEngine(tp); l != nil {
			l.ReportApplied(tp, b.ID, end)
		}
	}
	f, err := walstore.NewFollower(cfg)
	require.NoError(b.C.T, err)
	b.Follower = f
	b.run(f.Run)
	return f
}

func (b *Broker) run(fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	b.stops = append(b.stops, func() {
		cancel()
		require.NoError(b.C.T, <-done)
	})
}

// Stop stops b's engines, as a crash would; its local log survives.
func (b *Broker) Stop() {
	for _, s := range b.stops {
		s()
	}
	b.stops = nil
}

// BecomeLeader makes b the leader of tp at epoch, starting at its log end,
// as the controller and the broker's makeLeader would, and tells its leader
// engine (which must be running).
func (b *Broker) BecomeLeader(ctx context.Context, tp metadata.TopicPartition, epoch int32, republishFrom int64) {
	t := b.C.T
	end, err := b.Local.EndOffset(tp)
	require.NoError(t, err)
	require.NoError(t, b.Local.AssignEpoch(tp, epoch, end))
	b.C.SetLeader(tp, b.ID, epoch)
	b.C.mu.Lock()
	b.view[tp] = epoch
	b.C.mu.Unlock()
	require.NoError(t, b.Leader.BecomeLeader(ctx, tp, epoch, republishFrom))
}

// Produce appends records [first, last] in batches of size to b's local log
// and, if b runs a leader engine, to the engine.
func (b *Broker) Produce(ctx context.Context, tp metadata.TopicPartition, epoch int32, first, last, size int64) {
	t := b.C.T
	for off := first; off <= last; off += size {
		batch := MakeBatch(tp, epoch, off, min(off+size-1, last))
		require.NoError(t, b.Local.Append(ctx, tp, []combiner.Batch{batch}))
		if b.Leader != nil {
			require.NoError(t, b.Leader.Append(ctx, tp, batch))
		}
	}
}

// Preload puts records [first, last] of epoch into b's local log directly,
// as if replicated before the scenario begins; an empty log starts at first.
func (b *Broker) Preload(tp metadata.TopicPartition, epoch int32, first, last, size int64) {
	ctx := context.Background()
	end, err := b.Local.EndOffset(tp)
	require.NoError(b.C.T, err)
	if end < first {
		require.NoError(b.C.T, b.Local.Truncate(ctx, tp, first))
	}
	for off := first; off <= last; off += size {
		require.NoError(b.C.T, b.Local.Append(ctx, tp, []combiner.Batch{MakeBatch(tp, epoch, off, min(off+size-1, last))}))
	}
}

// MakeBatch returns the one true batch for (tp, epoch, first, last): its
// bytes depend on all four, so data written under different epochs differs.
func MakeBatch(tp metadata.TopicPartition, epoch int32, first, last int64) combiner.Batch {
	var buf bytes.Buffer
	for off := first; off <= last; off++ {
		fmt.Fprintf(&buf, "%s epoch=%d offset=%d payload=%032d\n", tp, epoch, off, off*7919)
	}
	return combiner.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: time.Now().UnixMilli(), Data: buf.Bytes()}
}

// RequireConverges waits until follower's log of tp equals leader's, byte
// for byte. It waits less than the leader's default marker refresh (30s),
// so a follower that only gets going again when markers are republished
// fails the test instead of passing slowly.
func RequireConverges(t *testing.T, follower, leader *Broker, tp metadata.TopicPartition) {
	t.Helper()
	converged := func() bool { return SameBatches(follower.Local.Batches(tp), leader.Local.Batches(tp)) }
	if !assert.Eventually(t, converged, 20*time.Second, 5*time.Millisecond) {
		var stats any
		if follower.Follower != nil {
			stats = follower.Follower.Stats()
		}
		require.FailNow(t, "no convergence", "broker %d never converged on broker %d's log of %s:\nfollower %v\nleader   %v\nfollower stats %+v",
			follower.ID, leader.ID, tp, Describe(follower.Local.Batches(tp)), Describe(leader.Local.Batches(tp)), stats)
	}
	RequireSameLog(t, leader.Local.Batches(tp), follower.Local.Batches(tp))
}

// SameBatches reports whether two logs are equal byte for byte.
func SameBatches(a, b []combiner.Batch) bool {
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

// RequireSameLog fails the test at the first batch where got differs from
// want.
func RequireSameLog(t *testing.T, want, got []combiner.Batch) {
	t.Helper()
	require.Equal(t, len(want), len(got), "batch count")
	for i := range want {
		require.Equal(t, want[i].Epoch, got[i].Epoch, "batch %d epoch", i)
		require.Equal(t, want[i].FirstOffset, got[i].FirstOffset, "batch %d first offset", i)
		require.Equal(t, want[i].LastOffset, got[i].LastOffset, "batch %d last offset", i)
		require.True(t, bytes.Equal(want[i].Data, got[i].Data), "batch %d [%d, %d] bytes differ", i, want[i].FirstOffset, want[i].LastOffset)
	}
}

// Describe formats a log's batches as e<epoch>[first-last].
func Describe(bs []combiner.Batch) string {
	var s []string
	for _, b := range bs {
		s = append(s, fmt.Sprintf("e%d[%d-%d]", b.Epoch, b.FirstOffset, b.LastOffset))
	}
	return fmt.Sprint(s)
}

// RecordingLog is a memstore.LocalLog that also remembers every batch ever
// appended, so a test can check nothing forbidden was appended even if it
// was later truncated away.
type RecordingLog struct {
	*memstore.LocalLog
	mu       sync.Mutex
	appended []combiner.Batch
}

// NewRecordingLog returns an empty log.
func NewRecordingLog() *RecordingLog { return &RecordingLog{LocalLog: memstore.NewLocalLog()} }

// Append appends to the log and records the batches' offsets and epochs.
func (r *RecordingLog) Append(ctx context.Context, tp metadata.TopicPartition, batches []combiner.Batch) error {
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

// EverAppended returns every batch ever appended, without data.
func (r *RecordingLog) EverAppended() []combiner.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.appended)
}

// LoseLeadership makes b's own view forget that it leads tp, as a broker
// does when the controller's LeaderAndIsr reaches it.
func (b *Broker) LoseLeadership(tp metadata.TopicPartition) {
	b.C.mu.Lock()
	defer b.C.mu.Unlock()
	delete(b.view, tp)
}
