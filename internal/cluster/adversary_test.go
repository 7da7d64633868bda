package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/internal/cluster"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// The tests of this file call the cluster's exported API in orders and
// with dependencies its callers do not use, and require that it neither
// panics, hangs nor leaks a goroutine, and that its errors say which
// broker or partition failed.

var (
	tpC     = metadata.TopicPartition{Topic: "orders", Partition: 2}
	errBoom = errors.New("injected failure")
)

// faultyLocal is a memstore.LocalLog behind a fault injector: the
// storage.LocalLog calls go through faults.WrapLocal, the epoch
// assignment and the batch listing to the log itself.
type faultyLocal struct {
	storage.LocalLog
	mem *memstore.LocalLog
}

func newFaultyLocal(inj faults.Injector) *faultyLocal {
	mem := memstore.NewLocalLog()
	return &faultyLocal{LocalLog: faults.WrapLocal(mem, inj), mem: mem}
}

func (l *faultyLocal) AssignEpoch(tp metadata.TopicPartition, epoch int32, start int64) error {
	return l.mem.AssignEpoch(tp, epoch, start)
}

func (l *faultyLocal) Batches(tp metadata.TopicPartition) []storage.Batch { return l.mem.Batches(tp) }

func (l *faultyLocal) EachBatch(tp metadata.TopicPartition, from int64, fn func(storage.Batch) error) error {
	return l.mem.EachBatch(tp, from, fn)
}

// advConfig is the Node tuning of these tests: fast, as newCluster's.
func advConfig() walstore.NodeConfig {
	return walstore.NodeConfig{Interval: 5 * time.Millisecond,
		Backoff: walstore.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond}}
}

// advCluster returns brokers 1, 2, 3 in az1, az2, az3, each local log
// behind its own injector set (empty, so healthy, until a test adds to
// it), replicating tpA (led by 1) and tpB (led by 2), their Nodes not yet
// started.
func advCluster(t *testing.T) (*cluster.Cluster, *memstore.Cluster, map[int32]*faults.Set) {
	t.Helper()
	objects, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "b1", "az2": "b2", "az3": "b3"}, Seed: 1})
	require.NoError(t, err)
	meta, err := memstore.NewLog(4, memstore.WithMaxPollWait(20*time.Millisecond))
	require.NoError(t, err)
	c := cluster.New(meta)
	sets := make(map[int32]*faults.Set)
	for i, az := range []string{"az1", "az2", "az3"} {
		store, err := objects.Store(az)
		require.NoError(t, err)
		id := int32(i + 1)
		sets[id] = &faults.Set{}
		c.AddBroker(id, az, store, newFaultyLocal(sets[id]))
	}
	c.SetReplicas(tpA, 1, 2, 3)
	c.SetLeader(tpA, 1, 0)
	c.SetReplicas(tpB, 2, 3, 1)
	c.SetLeader(tpB, 2, 0)
	return c, objects, sets
}

// startAll starts every broker's Node and both partitions.
func startAll(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	for _, b := range c.Brokers() {
		_, err := b.Start(advConfig())
		require.NoError(t, err)
	}
	for _, tp := range c.Partitions() {
		require.NoError(t, c.StartPartition(context.Background(), tp))
	}
}

// noLeak returns a check, to defer, that fails t if a goroutine started
// after noLeak outlives the test: every Node a test starts must have
// stopped once the cluster is closed.
func noLeak(t *testing.T) func() {
	t.Helper()
	before := goleak.IgnoreCurrent()
	return func() { goleak.VerifyNone(t, before) }
}

// bounded is a context for calls that might hang: a hang fails the test
// instead of timing it out.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAdvStartTwiceLeavesNoNodeRunning(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	b := c.Broker(1)
	first, err := b.Start(advConfig())
	require.NoError(t, err)
	_, err = b.Start(advConfig())
	require.Error(t, err, "the first Node would run on, never stopped")
	assert.ErrorContains(t, err, "broker 1")
	assert.True(t, first == b.Node, "a refused Start leaves the running Node in place")
	assert.True(t, b.Running())

	// Concurrent Starts of a stopped broker: one runs.
	require.NoError(t, b.Stop())
	var wg sync.WaitGroup
	var mu sync.Mutex
	started := 0
	for range 4 {
		wg.Go(func() {
			if _, err := b.Start(advConfig()); err == nil {
				mu.Lock()
				started++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, started)
	require.NoError(t, c.Close())
	assert.False(t, b.Running())
}

func TestAdvStopTwiceAndStopNeverStarted(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	assert.NoError(t, c.Broker(2).Stop(), "never started")
	startAll(t, c)
	b := c.Broker(3)
	require.NoError(t, b.Stop())
	require.NoError(t, b.Stop())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.NoError(t, c.Broker(1).Stop()) })
	}
	wg.Wait()
	require.NoError(t, c.Close())
}

func TestAdvCloseOrders(t *testing.T) {
	t.Run("brokers running", func(t *testing.T) {
		defer noLeak(t)()
		c, _, _ := advCluster(t)
		startAll(t, c)
		require.NoError(t, c.Close())
		for _, b := range c.Brokers() {
			assert.False(t, b.Running(), "broker %d", b.ID)
		}
	})
	t.Run("brokers stopped", func(t *testing.T) {
		defer noLeak(t)()
		c, _, _ := advCluster(t)
		startAll(t, c)
		for _, b := range c.Brokers() {
			require.NoError(t, b.Stop())
		}
		require.NoError(t, c.Close())
	})
	t.Run("never started", func(t *testing.T) {
		defer noLeak(t)()
		c, _, _ := advCluster(t)
		require.NoError(t, c.Close())
	})
	t.Run("twice", func(t *testing.T) {
		defer noLeak(t)()
		c, _, _ := advCluster(t)
		startAll(t, c)
		require.NoError(t, c.Close())
		err := c.Close()
		require.ErrorIs(t, err, metadata.ErrClosed, "the second Close closes the metadata log again")
	})
	t.Run("after a crash", func(t *testing.T) {
		defer noLeak(t)()
		c, _, _ := advCluster(t)
		startAll(t, c)
		c.Crash("az1")
		require.NoError(t, c.Close())
	})
}

func TestAdvStartPartitionBeforeStart(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	var err error
	require.NotPanics(t, func() { err = c.StartPartition(bounded(t), tpA) })
	require.Error(t, err)
	assert.ErrorContains(t, err, "broker 1")
	assert.ErrorContains(t, err, tpA.String())
	require.NoError(t, c.Close())
}

func TestAdvStartPartitionUnknown(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	startAll(t, c)
	err := c.StartPartition(bounded(t), tpC)
	require.ErrorContains(t, err, tpC.String())
	require.NoError(t, c.Close())
}

// A partition given replicas but no leader yet, as between the
// controller's two calls, is one the cluster's readers and Elect visit.
func TestAdvPartitionWithoutLeader(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	startAll(t, c)
	c.SetReplicas(tpC, 1, 2, 3)
	l, _ := c.Leader(tpC)
	assert.Nil(t, l)
	assert.Equal(t, []int32{1, 2, 3}, c.Followers(tpC))
	require.NotPanics(t, func() { c.LiveReplicas() })
	require.NotPanics(t, func() {
		_, _, err := c.Behind()
		assert.NoError(t, err)
	})
	require.NotPanics(t, func() {
		_, diffs := c.Compare()
		assert.Empty(t, diffs)
	})
	c.Crash("az3")
	require.NotPanics(t, func() { assert.NoError(t, c.ShrinkInSync()) })
	require.NotPanics(t, func() {
		_, err := c.Elect(bounded(t), tpC)
		if err != nil {
			assert.ErrorContains(t, err, tpC.String())
		}
	})
	require.NoError(t, c.Close())
}

func TestAdvElectWithEveryReplicaDownNamesPartition(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	startAll(t, c)
	for _, az := range []string{"az1", "az2", "az3"} {
		c.Crash(az)
	}
	for _, tp := range []metadata.TopicPartition{tpA, tpB, tpC} {
		_, err := c.Elect(bounded(t), tp)
		require.ErrorContains(t, err, tp.String())
	}
	require.NoError(t, c.Close())
}

// Elect of a partition whose replicas were assigned and leader chosen
// but which StartPartition never started.
func TestAdvElectPartitionNeverStarted(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	for _, b := range c.Brokers() {
		_, err := b.Start(advConfig())
		require.NoError(t, err)
	}
	c.SetReplicas(tpC, 1, 2, 3)
	c.SetLeader(tpC, 1, 0)
	c.Crash("az1")
	var e cluster.Election
	var err error
	require.NotPanics(t, func() { e, err = c.Elect(bounded(t), tpC) })
	require.NoError(t, err)
	assert.Equal(t, int32(2), e.Leader.ID)
	assert.Zero(t, e.Lost())
	require.NoError(t, c.Close())
}

// A replica added to the assignment whose Node never started.
func TestAdvElectSurvivorNeverStarted(t *testing.T) {
	defer noLeak(t)()
	c, objects, _ := advCluster(t)
	startAll(t, c)
	store, err := objects.Store("az3")
	require.NoError(t, err)
	c.AddBroker(4, "az3", store, memstore.NewLocalLog())
	c.SetReplicas(tpA, 1, 4, 2)
	c.Crash("az1")
	require.NotPanics(t, func() {
		_, err = c.Elect(bounded(t), tpA)
	})
	if err != nil {
		assert.ErrorContains(t, err, "broker 4")
	}
	require.NoError(t, c.Close())
}

// A surviving replica that was stopped, not crashed: the controller
// still counts it live.
func TestAdvElectSurvivorStopped(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	startAll(t, c)
	require.NoError(t, c.Broker(2).Stop())
	require.NoError(t, c.Broker(3).Stop())
	c.Crash("az1")
	var err error
	require.NotPanics(t, func() { _, err = c.Elect(bounded(t), tpA) })
	require.Error(t, err)
	assert.ErrorIs(t, err, walstore.ErrStopped)
	assert.ErrorContains(t, err, "broker 2")
	require.NoError(t, c.Close())
}

func TestAdvCrashTwiceAndElectTwice(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	startAll(t, c)
	produce(t, c, tpA, 5)
	requireCaughtUp(t, c, 4, "")
	crashed, moved := c.Crash("az1")
	require.Len(t, crashed, 1)
	assert.Equal(t, []metadata.TopicPartition{tpA}, moved)
	crashed, moved = c.Crash("az1")
	assert.Empty(t, crashed, "a crashed broker crashes once")
	assert.Equal(t, []metadata.TopicPartition{tpA}, moved, "still offline")
	e, err := c.Elect(bounded(t), tpA)
	require.NoError(t, err)
	assert.Equal(t, int32(1), e.Epoch)
	crashed, moved = c.Crash("az1")
	assert.Empty(t, crashed)
	assert.Empty(t, moved, "tpA has a live leader again")
	crashed, moved = c.Crash("nowhere")
	assert.Empty(t, crashed)
	assert.Empty(t, moved)

	// Electing again moves tpA on from its live leader at the next epoch.
	e2, err := c.Elect(bounded(t), tpA)
	require.NoError(t, err)
	assert.Equal(t, int32(2), e2.Epoch)
	l, epoch := c.Leader(tpA)
	assert.Same(t, e2.Leader, l)
	assert.Equal(t, int32(2), epoch)
	require.NoError(t, c.ShrinkInSync())
	require.NoError(t, c.ShrinkInSync())
	produce(t, c, tpA, 5)
	requireCaughtUp(t, c, 2, "one live follower each")
	require.NoError(t, c.Close())
}

func TestAdvRestartAfterCrash(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	startAll(t, c)
	c.Crash("az1")
	_, err := c.Elect(bounded(t), tpA)
	require.NoError(t, err)
	b := c.Broker(1)
	_, err = b.Start(advConfig())
	require.Error(t, err, "a crashed broker never runs again")
	assert.ErrorContains(t, err, "broker 1")
	assert.False(t, b.Running())
	assert.False(t, b.Live())
	require.NoError(t, c.Close())
}

// Errors of a local log are returned wrapped, naming the broker and the
// partition.
func TestAdvLocalLogErrorsNameBrokerAndPartition(t *testing.T) {
	defer noLeak(t)()
	c, _, sets := advCluster(t)
	startAll(t, c)
	produce(t, c, tpA, 3)
	requireCaughtUp(t, c, 4, "")

	remove := sets[3].Add(faults.On(faults.IsOp(faults.OpLocalEndOffset), faults.Fail(errBoom)))
	_, _, err := c.Behind()
	require.ErrorIs(t, err, errBoom)
	assert.ErrorContains(t, err, "broker 3")
	for _, r := range c.LiveReplicas() {
		if r.Follower.ID == 3 {
			_, err := r.Lacks()
			require.ErrorIs(t, err, errBoom)
			assert.ErrorContains(t, err, "broker 3")
			assert.ErrorContains(t, err, r.TP.String())
		}
	}

	c.Crash("az1")
	_, err = c.Elect(bounded(t), tpA)
	require.ErrorIs(t, err, errBoom)
	assert.ErrorContains(t, err, "broker 3")
	assert.ErrorContains(t, err, tpA.String())
	remove()
	require.NoError(t, c.Close())
}

// A Node whose local log fails every call: an election that needs its
// log fails, naming it, instead of waiting on it, and succeeds once the
// log answers again.
func TestAdvNodeWhoseLocalLogFails(t *testing.T) {
	defer noLeak(t)()
	c, _, sets := advCluster(t)
	startAll(t, c)
	remove := sets[3].Add(faults.Fail(errBoom))
	produce(t, c, tpA, 3)
	c.Crash("az1")
	c.Crash("az2")
	_, err := c.Elect(bounded(t), tpA)
	require.ErrorIs(t, err, errBoom)
	assert.ErrorContains(t, err, "broker 3")
	assert.ErrorContains(t, err, tpA.String())
	l, _ := c.Leader(tpA)
	assert.Nil(t, l, "still offline")
	remove()
	e, err := c.Elect(bounded(t), tpA)
	require.NoError(t, err)
	assert.Equal(t, int32(3), e.Leader.ID)
	require.NoError(t, c.Close())
}

// A Node whose object store fails every call does not stop: it retries,
// its records never become durable, and the cluster closes.
func TestAdvNodeWhoseStoreFails(t *testing.T) {
	defer noLeak(t)()
	objects, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "b1", "az2": "b2"}, Seed: 1})
	require.NoError(t, err)
	meta, err := memstore.NewLog(4, memstore.WithMaxPollWait(20*time.Millisecond))
	require.NoError(t, err)
	c := cluster.New(meta)
	s1, err := objects.Store("az1")
	require.NoError(t, err)
	s2, err := objects.Store("az2")
	require.NoError(t, err)
	c.AddBroker(1, "az1", faults.WrapStore(s1, faults.Fail(fmt.Errorf("%w: down", storage.ErrUnavailable))), memstore.NewLocalLog())
	c.AddBroker(2, "az2", s2, memstore.NewLocalLog())
	c.SetReplicas(tpA, 1, 2)
	c.SetLeader(tpA, 1, 0)
	startAll(t, c)
	produce(t, c, tpA, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	l, epoch := c.Leader(tpA)
	require.Error(t, l.Node.WaitDurable(ctx, tpA, epoch, 2))
	assert.NoError(t, c.Failed())
	crashed, moved := c.Crash("az1")
	require.Len(t, crashed, 1)
	require.Equal(t, []metadata.TopicPartition{tpA}, moved)
	e, err := c.Elect(bounded(t), tpA)
	require.NoError(t, err)
	assert.Equal(t, int64(3), e.Lost(), "nothing was uploaded")
	require.NoError(t, c.Close())
}

// What a leader said was durable before its AZ failed is in the new
// leader's log whenever the election says nothing was lost.
func TestAdvDurableRecordsSurviveElection(t *testing.T) {
	defer noLeak(t)()
	c, objects, _ := advCluster(t)
	startAll(t, c)
	produce(t, c, tpA, 20)
	l, epoch := c.Leader(tpA)
	require.NoError(t, l.Node.WaitDurable(bounded(t), tpA, epoch, 19))
	want := l.Local.Batches(tpA)
	require.NoError(t, objects.SetOutage("az1", true))
	c.Crash("az1")
	e, err := c.Elect(bounded(t), tpA)
	require.NoError(t, err)
	if e.Lost() == 0 {
		got := e.Leader.Local.Batches(tpA)
		require.GreaterOrEqual(t, len(got), len(want))
		assert.Empty(t, cluster.DiffLogs(want, got[:len(want)]))
	}
	require.NoError(t, c.Close())
}

func TestAdvCompareFindsAWrongBatch(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	startAll(t, c)
	produce(t, c, tpA, 10)
	produce(t, c, tpB, 10)
	requireCaughtUp(t, c, 4, "")
	compared, diffs := c.Compare()
	assert.Equal(t, 4, compared)
	assert.Empty(t, diffs)

	// Broker 3 stops following and gets one extra, wrong batch of tpA.
	b3 := c.Broker(3)
	require.NoError(t, b3.Stop())
	wrong := storage.Batch{Epoch: 0, FirstOffset: 10, LastOffset: 10, Data: []byte("not the leader's")}
	require.NoError(t, b3.Local.Append(context.Background(), tpA, []storage.Batch{wrong}))
	_, diffs = c.Compare()
	require.Len(t, diffs, 1)
	assert.Contains(t, diffs[0], tpA.String())
	assert.Contains(t, diffs[0], "broker 3")
	n, off, err := c.Behind()
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a replica with more than its leader is not at its end")
	assert.Zero(t, off)

	// The same length, one batch's bytes different.
	require.NoError(t, b3.Local.Truncate(context.Background(), tpA, 9))
	wrong.FirstOffset, wrong.LastOffset = 9, 9
	require.NoError(t, b3.Local.Append(context.Background(), tpA, []storage.Batch{wrong}))
	_, diffs = c.Compare()
	require.Len(t, diffs, 1)
	assert.Contains(t, diffs[0], "different bytes")
	n, _, err = c.Behind()
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, c.Close())
}

// The demo produces on one goroutine (Leader, then the leader's Node),
// samples on another (Behind, Node.Stats), and fails an AZ on a third
// (Crash, Elect, ShrinkInSync); the cluster must be race free under it.
func TestAdvConcurrentAsTheDemo(t *testing.T) {
	defer noLeak(t)()
	c, objects, _ := advCluster(t)
	startAll(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { // the producer
		for ctx.Err() == nil {
			for _, tp := range []metadata.TopicPartition{tpA, tpB} {
				l, epoch := c.Leader(tp)
				if l == nil {
					continue
				}
				end, err := l.Local.EndOffset(tp)
				if err != nil {
					continue
				}
				b := storage.Batch{Epoch: epoch, FirstOffset: end, LastOffset: end, Data: fmt.Appendf(nil, "e%d o%d", epoch, end)}
				// A leader that just crashed or lost its leadership refuses.
				if l.Local.Append(ctx, tp, []storage.Batch{b}) == nil {
					_ = l.Node.Append(ctx, tp, b)
				}
			}
		}
	})
	wg.Go(func() { // the progress line
		for ctx.Err() == nil {
			for _, b := range c.Brokers() {
				_ = b.Node.Stats()
			}
			_, _, _ = c.Behind()
			c.EachLiveReplica(func(cluster.Replica) error { return nil })
		}
	})
	time.Sleep(20 * time.Millisecond) // let some records flow first
	require.NoError(t, objects.SetOutage("az1", true))
	_, moved := c.Crash("az1")
	for _, tp := range moved {
		_, err := c.Elect(ctx, tp)
		require.NoError(t, err)
	}
	require.NoError(t, c.ShrinkInSync())
	time.Sleep(20 * time.Millisecond)
	cancel()
	wg.Wait()
	require.NoError(t, c.Close())
}

// A follower that applies past where the new leader's log ends, between
// the election's reading of the logs and the new leader's taking over,
// would hold records of the old epoch the new leader lacks, to be
// truncated away: the election must see the logs as they stay.
func TestAdvFollowerAheadOfTheNewLeader(t *testing.T) {
	defer noLeak(t)()
	objects, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "b1", "az2": "b2", "az3": "b3"}, Seed: 1})
	require.NoError(t, err)
	meta, err := memstore.NewLog(4, memstore.WithMaxPollWait(20*time.Millisecond))
	require.NoError(t, err)
	c := cluster.New(meta)
	stores := make(map[int32]*faults.Set)
	mems := make(map[int32]*faultyLocal)
	locals := make(map[int32]*faults.Set)
	for i, az := range []string{"az1", "az2", "az3"} {
		id := int32(i + 1)
		store, err := objects.Store(az)
		require.NoError(t, err)
		stores[id], locals[id] = &faults.Set{}, &faults.Set{}
		mems[id] = newFaultyLocal(locals[id])
		c.AddBroker(id, az, faults.WrapStore(store, stores[id]), mems[id])
	}
	c.SetReplicas(tpA, 1, 2, 3)
	c.SetLeader(tpA, 1, 0)
	// The followers fetch nothing until told.
	gets := faults.On(faults.IsOp(faults.OpGetRange, faults.OpReadRange), faults.Fail(storage.ErrUnavailable))
	remove2, remove3 := stores[2].Add(gets), stores[3].Add(gets)
	for _, b := range c.Brokers() {
		_, err := b.Start(advConfig())
		require.NoError(t, err)
	}
	require.NoError(t, c.StartPartition(bounded(t), tpA))
	produce(t, c, tpA, 20)
	l, epoch := c.Leader(tpA)
	require.NoError(t, l.Node.WaitDurable(bounded(t), tpA, epoch, 19))
	c.Crash("az1") // its bucket stays up: the followers can still read it

	// Elect reads broker 3's log end twice: to elect (a tie at 0, so
	// broker 2 wins) and to find where to republish from. Before the
	// second, broker 3 may fetch again, and catches up if it still
	// follows.
	var mu sync.Mutex
	reads := 0
	locals[3].Add(faults.Func(func(_ context.Context, req faults.Request) faults.Effect {
		if req.Op != faults.OpLocalEndOffset {
			return faults.Effect{}
		}
		mu.Lock()
		reads++
		n := reads
		mu.Unlock()
		if n == 2 {
			remove3()
			deadline := time.Now().Add(time.Second) // none, if it no longer follows
			for time.Now().Before(deadline) {
				if end, _ := mems[3].mem.EndOffset(tpA); end == 20 {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
		return faults.Effect{}
	}))
	e, err := c.Elect(bounded(t), tpA)
	require.NoError(t, err)
	remove2()
	end3, err := mems[3].mem.EndOffset(tpA)
	require.NoError(t, err)
	assert.LessOrEqual(t, end3, e.Start, "broker 3 holds records the new leader lacks, and must drop them")
	require.NoError(t, c.ShrinkInSync())
	produce(t, c, tpA, 5)
	requireCaughtUp(t, c, 1, "broker 3 has broker 2's log")
	require.NoError(t, c.Close())
}

// ShrinkInSync called while a partition is still offline (its leader
// crashed, no successor elected yet) must still shrink the partitions
// whose leaders live.
func TestAdvShrinkInSyncBeforeElect(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	startAll(t, c)
	produce(t, c, tpA, 5)
	produce(t, c, tpB, 5)
	requireCaughtUp(t, c, 4, "")
	_, moved := c.Crash("az1")
	require.Equal(t, []metadata.TopicPartition{tpA}, moved)
	err := c.ShrinkInSync()
	if err != nil {
		assert.ErrorContains(t, err, tpA.String())
	}
	// tpB's in-sync set no longer waits for broker 1: its high watermark
	// moves on.
	l, epoch := c.Leader(tpB)
	produce(t, c, tpB, 1)
	require.NoError(t, l.Node.WaitReplicated(bounded(t), tpB, epoch, 5))
	_, err = c.Elect(bounded(t), tpA)
	require.NoError(t, err)
	require.NoError(t, c.ShrinkInSync())
	require.NoError(t, c.Close())
}

// Two AZs fail one after the other; the last broker leads both
// partitions, and nothing acknowledged durable is lost while the buckets
// stay up.
func TestAdvTwoAZsFailInTurn(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	startAll(t, c)
	for round, az := range []string{"az1", "az2"} {
		produce(t, c, tpA, 10)
		produce(t, c, tpB, 10)
		for _, tp := range []metadata.TopicPartition{tpA, tpB} {
			l, epoch := c.Leader(tp)
			end, err := l.Local.EndOffset(tp)
			require.NoError(t, err)
			require.NoError(t, l.Node.WaitDurable(bounded(t), tp, epoch, end-1))
		}
		requireCaughtUp(t, c, 4-2*round, "")
		_, moved := c.Crash(az)
		for _, tp := range moved {
			e, err := c.Elect(bounded(t), tp)
			require.NoError(t, err)
			assert.Zero(t, e.Lost(), "%s in round %d", tp, round)
		}
		require.NoError(t, c.ShrinkInSync())
	}
	for _, tp := range []metadata.TopicPartition{tpA, tpB} {
		l, epoch := c.Leader(tp)
		require.NotNil(t, l)
		assert.Equal(t, int32(3), l.ID)
		end, err := l.Local.EndOffset(tp)
		require.NoError(t, err)
		assert.Equal(t, int64(20), end)
		produce(t, c, tp, 1)
		require.NoError(t, l.Node.WaitReplicated(bounded(t), tp, epoch, 20), "no follower is in sync, so the leader alone")
	}
	compared, diffs := c.Compare()
	assert.Zero(t, compared)
	assert.Empty(t, diffs)
	require.NoError(t, c.Close())
}

// An Elect whose context has ended changes nothing: tp stays offline,
// and the next Elect moves it.
func TestAdvElectCanceled(t *testing.T) {
	defer noLeak(t)()
	c, _, _ := advCluster(t)
	startAll(t, c)
	produce(t, c, tpA, 5)
	requireCaughtUp(t, c, 4, "")
	c.Crash("az1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Elect(ctx, tpA)
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, tpA.String())
	l, _ := c.Leader(tpA)
	assert.Nil(t, l, "still offline")
	e, err := c.Elect(bounded(t), tpA)
	require.NoError(t, err)
	assert.Equal(t, int32(1), e.Epoch, "the refused election used no epoch")
	assert.Equal(t, int64(5), e.Start)
	produce(t, c, tpA, 5)
	require.NoError(t, c.ShrinkInSync())
	requireCaughtUp(t, c, 2, "one live follower each")
	require.NoError(t, c.Close())
}

// A broker added in place of a running one with its id (a replacement
// broker on a fresh disk, say): the old Node must not outlive Close.
func TestAdvAddBrokerInPlaceOfARunningOne(t *testing.T) {
	defer noLeak(t)()
	c, objects, _ := advCluster(t)
	startAll(t, c)
	old := c.Broker(3)
	store, err := objects.Store("az3")
	require.NoError(t, err)
	b := c.AddBroker(3, "az3", store, memstore.NewLocalLog())
	assert.True(t, c.Broker(3) == b)
	assert.Len(t, c.Brokers(), 3)
	_, err = b.Start(advConfig())
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.False(t, old.Running())
}

// Stop returns once the Node has stopped, for every caller of concurrent
// Stops (a Crash's and a Close's, say), not only the first.
func TestAdvConcurrentStopsWaitForTheNode(t *testing.T) {
	defer noLeak(t)()
	for range 20 {
		c, _, _ := advCluster(t)
		startAll(t, c)
		b := c.Broker(1)
		n := b.Node
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				_ = b.Stop()
				batch := storage.Batch{FirstOffset: 0, LastOffset: 0, Data: []byte("late")}
				assert.ErrorIs(t, n.Append(context.Background(), tpA, batch), walstore.ErrStopped)
			})
		}
		wg.Wait()
		require.NoError(t, c.Close())
	}
}
