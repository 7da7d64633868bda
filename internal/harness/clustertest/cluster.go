package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/internal/cluster"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// TP is the partition most scenarios replicate.
var TP = metadata.TopicPartition{Topic: "orders", Partition: 0}

// Cluster is a test cluster: a cluster.Cluster (brokers, placement, the
// controller's choice of leaders) on a shared backend, whose brokers'
// stores go through faults the test sets. Its methods fail the test on
// error.
type Cluster struct {
	*cluster.Cluster
	T       *testing.T
	Objects Objects

	mu      sync.Mutex
	brokers map[int32]*Broker
	gets    map[string]int64

	// faults decides the fate of every request of every broker's store.
	faults faults.Set
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
		Cluster: cluster.New(b.Log(t, metaPartitions)),
		T:       t, Objects: b.Objects(t),
		brokers: make(map[int32]*Broker),
		gets:    make(map[string]int64),
	}
	t.Cleanup(func() {
		c.mu.Lock()
		brokers := maps.Clone(c.brokers)
		c.mu.Unlock()
		for _, b := range brokers {
			b.Stop()
		}
		// Close reports what the stops above could not: a Node that
		// stopped by itself, or one AddBroker replaced.
		require.NoError(t, c.Cluster.Close(), "closing the cluster")
	})
	return c
}

// SetFault puts every later request of every broker's store to inj, in
// place of the injector set before (nil sets none).
func (c *Cluster) SetFault(inj faults.Injector) {
	c.faults.Clear()
	if inj != nil {
		c.faults.Add(inj)
	}
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
	local := NewRecordingLog()
	b := &Broker{Broker: c.Cluster.AddBroker(id, az, c.brokerStore(store), local), C: c, Local: local,
		following: make(map[metadata.TopicPartition]leadership)}
	c.mu.Lock()
	c.brokers[id] = b
	c.mu.Unlock()
	return b
}

// Broker is one broker of a Cluster: a cluster.Broker whose local log
// records every append, and which remembers what it follows.
type Broker struct {
	*cluster.Broker
	C     *Cluster
	Local *RecordingLog
	// following is what the broker follows, at which epoch and leader; a
	// zombie leader is simply a broker nobody told.
	following map[metadata.TopicPartition]leadership
}

// Start starts b's Node with cfg's tuning (its wiring is filled in; a 5ms
// interval and fast retries are the defaults), relaying its followers'
// progress to the leaders' Nodes as a broker's fetch path would.
func (b *Broker) Start(cfg walstore.NodeConfig) *walstore.Node {
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Millisecond
	}
	fast := walstore.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond}
	if cfg.Backoff == (walstore.Backoff{}) {
		cfg.Backoff = fast
	}
	cfg.Seed = uint64(b.ID)
	n, err := b.Broker.Start(cfg)
	require.NoError(b.C.T, err)
	return n
}

// StartLeader starts b's Node with cfg's tuning, if it is not running.
func (b *Broker) StartLeader(cfg walstore.NodeConfig) *walstore.Node {
	if !b.Running() {
		b.Start(cfg)
	}
	return b.Node
}

// StartFollower starts b's Node, if it is not running, and makes it follow
// tp's current leader.
func (b *Broker) StartFollower(tp metadata.TopicPartition) *walstore.Node {
	return b.StartFollowerConfig(tp, walstore.NodeConfig{})
}

// StartFollowerConfig is StartFollower with cfg's tuning.
func (b *Broker) StartFollowerConfig(tp metadata.TopicPartition, cfg walstore.NodeConfig) *walstore.Node {
	if !b.Running() {
		b.Start(cfg)
	}
	l, _ := b.C.Leadership(tp)
	b.Follow(tp, l.Epoch, l.Broker)
	return b.Node
}

// Follow makes b's Node follow tp, led by leader at epoch.
func (b *Broker) Follow(tp metadata.TopicPartition, epoch, leader int32) {
	require.NoError(b.C.T, b.Node.BecomeFollower(context.Background(), tp, epoch, leader))
	b.C.mu.Lock()
	b.following[tp] = leadership{leader, epoch}
	b.C.mu.Unlock()
}

// Stop stops b's Node, as a crash would; its local log survives, and
// b.Node stays the stopped Node until b starts again.
func (b *Broker) Stop() {
	require.NoError(b.C.T, b.Broker.Stop())
	b.C.mu.Lock()
	clear(b.following)
	b.C.mu.Unlock()
}

// BecomeLeader makes b the leader of tp at epoch, starting at its log end,
// as the controller and the broker's makeLeader would, and tells b's Node
// (which must be running) and every running broker that follows tp. A
// former leader is not told: it goes on as a zombie until it is.
func (b *Broker) BecomeLeader(ctx context.Context, tp metadata.TopicPartition, epoch int32, republishFrom int64) {
	t := b.C.T
	end, err := b.Local.EndOffset(tp)
	require.NoError(t, err)
	require.NoError(t, b.Local.AssignEpoch(tp, epoch, end))
	b.C.SetLeader(tp, b.ID, epoch)
	b.C.mu.Lock()
	delete(b.following, tp)
	var told []*Broker
	for _, o := range b.C.brokers {
		if _, ok := o.following[tp]; ok && o != b {
			told = append(told, o)
		}
	}
	b.C.mu.Unlock()
	require.NoError(t, b.Node.BecomeLeader(ctx, tp, epoch, b.C.Followers(tp), republishFrom))
	for _, o := range told {
		if o.Running() {
			o.Follow(tp, epoch, b.ID)
		}
	}
}

// Produce appends records [first, last] in batches of size to b's local log
// and, if b's Node runs, to the Node.
func (b *Broker) Produce(ctx context.Context, tp metadata.TopicPartition, epoch int32, first, last, size int64) {
	t := b.C.T
	for off := first; off <= last; off += size {
		batch := MakeBatch(tp, epoch, off, min(off+size-1, last))
		require.NoError(t, b.Local.Append(ctx, tp, []storage.Batch{batch}))
		if b.Running() {
			require.NoError(t, b.Node.Append(ctx, tp, batch))
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
		require.NoError(b.C.T, b.Local.Append(ctx, tp, []storage.Batch{MakeBatch(tp, epoch, off, min(off+size-1, last))}))
	}
}

// MakeBatch returns the one true batch for (tp, epoch, first, last): its
// bytes depend on all four, so data written under different epochs differs.
func MakeBatch(tp metadata.TopicPartition, epoch int32, first, last int64) storage.Batch {
	var buf bytes.Buffer
	for off := first; off <= last; off++ {
		fmt.Fprintf(&buf, "%s epoch=%d offset=%d payload=%032d\n", tp, epoch, off, off*7919)
	}
	return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: time.Now().UnixMilli(), Data: buf.Bytes()}
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
		if follower.Node != nil {
			stats = follower.Node.Stats().Follower
		}
		require.FailNow(t, "no convergence", "broker %d never converged on broker %d's log of %s:\nfollower %v\nleader   %v\nfollower stats %+v",
			follower.ID, leader.ID, tp, Describe(follower.Local.Batches(tp)), Describe(leader.Local.Batches(tp)), stats)
	}
	RequireSameLog(t, leader.Local.Batches(tp), follower.Local.Batches(tp))
}

// SameBatches reports whether two logs are equal byte for byte.
func SameBatches(a, b []storage.Batch) bool { return cluster.SameBatches(a, b) }

// RequireSameLog fails the test at the first batch where got differs from
// want.
func RequireSameLog(t *testing.T, want, got []storage.Batch) {
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
func Describe(bs []storage.Batch) string {
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
	appended []storage.Batch
}

// NewRecordingLog returns an empty log.
func NewRecordingLog() *RecordingLog { return &RecordingLog{LocalLog: memstore.NewLocalLog()} }

// Append appends to the log and records the batches' offsets and epochs.
func (r *RecordingLog) Append(ctx context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
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
func (r *RecordingLog) EverAppended() []storage.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.appended)
}
