package walstore_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/internal/clustertest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// Regression tests for defects found in the engines, each through the
// Node as a broker uses it. Most run in a synctest bubble: "settle" lets
// simulated time pass until every goroutine is idle, so the state they
// check is the one the engines come to rest in, without timing.

// world is a set of brokers, one Node each, over memstore, inside a
// synctest bubble. Broker id's store writes to bucket-az<id>.
type world struct {
	t       *testing.T
	objects *memstore.Cluster
	meta    metadata.Log

	mu    sync.Mutex
	nodes map[int32]*walstore.Node
}

func newWorld(t *testing.T) *world {
	t.Helper()
	objects, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{
		"az1": "bucket-az1", "az2": "bucket-az2", "az3": "bucket-az3",
	}})
	require.NoError(t, err)
	meta, err := memstore.NewLog(2, memstore.WithMaxPollWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { meta.Close() })
	return &world{t: t, objects: objects, meta: meta, nodes: make(map[int32]*walstore.Node)}
}

func (w *world) store(id int32) walstore.ObjectStore {
	s, err := w.objects.Store(fmt.Sprintf("az%d", id))
	require.NoError(w.t, err)
	return s
}

// start runs broker id's Node with cfg; unset wiring gets the world's own:
// its store, the world's metadata log, a new local log. Followers' progress
// goes to the leader's Node, as a broker's fetch path carries it. The Node
// stops when the test ends, and its Run must return nil.
func (w *world) start(id int32, cfg walstore.NodeConfig) *walstore.Node {
	w.t.Helper()
	cfg.BrokerID = id
	if cfg.Store == nil {
		cfg.Store = w.store(id)
	}
	if cfg.Log == nil {
		cfg.Log = w.meta
	}
	if cfg.Local == nil {
		cfg.Local = memstore.NewLocalLog()
	}
	if cfg.Leader.Interval == 0 {
		cfg.Leader.Interval = 10 * time.Millisecond
	}
	fast := walstore.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	if cfg.Leader.Backoff == (walstore.Backoff{}) {
		cfg.Leader.Backoff = fast
	}
	if cfg.Follower.Backoff == (walstore.Backoff{}) {
		cfg.Follower.Backoff = fast
	}
	cfg.Logger = discard()
	cfg.OnProgress = func(p walstore.Progress) {
		w.mu.Lock()
		n := w.nodes[p.Leader]
		w.mu.Unlock()
		if n != nil {
			n.RecordProgress(p)
		}
	}
	n, err := walstore.NewNode(cfg)
	require.NoError(w.t, err)
	w.mu.Lock()
	w.nodes[id] = n
	w.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	w.t.Cleanup(func() {
		cancel()
		require.NoError(w.t, <-done, "broker %d's Run", id)
	})
	return n
}

// settle lets d of simulated time pass, then waits until every goroutine
// of the bubble is blocked.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// produce appends [first, last] of epoch to the broker's log and its Node,
// as a broker handles a produce request.
func produce(t *testing.T, n *walstore.Node, local *memstore.LocalLog, tp metadata.TopicPartition, epoch int32, first, last int64) {
	t.Helper()
	b := clustertest.MakeBatch(tp, epoch, first, last)
	require.NoError(t, local.Append(context.Background(), tp, []combiner.Batch{b}))
	require.NoError(t, n.Append(context.Background(), tp, b))
}

func requireSameLog(t *testing.T, want, got *memstore.LocalLog, tp metadata.TopicPartition) {
	t.Helper()
	clustertest.RequireSameLog(t, want.Batches(tp), got.Batches(tp))
}

var (
	tpA = metadata.TopicPartition{Topic: "t", Partition: 0}
	tpB = metadata.TopicPartition{Topic: "t", Partition: 1}
)

// gatedStore holds every Put until its gate opens (or the Put's context
// ends).
type gatedStore struct {
	walstore.ObjectStore
	gate chan struct{}
}

func (s gatedStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return metadata.ObjectRef{}, ctx.Err()
	}
	return s.ObjectStore.Put(ctx, key, body)
}

// A broker re-elected at a later epoch while data of the earlier one was
// still buffered or uploading acknowledged it, but never published it:
// followers dropped or never saw it. Data acknowledged must reach them.
func TestRegressionReelectionPublishesWhatWasAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name string
		// uploading: the first object is cut and its PUT in flight at the
		// re-election; otherwise it is still in the buffer.
		uploading bool
	}{{"buffered", false}, {"uploading", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				gate := make(chan struct{})
				log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
				cfg := walstore.NodeConfig{Local: log1, Store: gatedStore{w.store(1), gate}}
				if !tc.uploading {
					close(gate)
					cfg.Leader.Interval = time.Minute // nothing is cut before the re-election
				}
				n1 := w.start(1, cfg)
				n2 := w.start(2, walstore.NodeConfig{Local: log2})

				require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
				produce(t, n1, log1, tpA, 1, 0, 9)
				if tc.uploading {
					settle(time.Second)
					require.Equal(t, 1, n1.Stats().Leader.UploadsInFlight)
				}

				require.NoError(t, log1.AssignEpoch(tpA, 2, 10))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 2, []int32{2}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 2, 1))
				produce(t, n1, log1, tpA, 2, 10, 19)
				if tc.uploading {
					close(gate)
				}
				wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
				defer cancel()
				require.NoError(t, n1.WaitDurable(wctx, tpA, 9))
				require.NoError(t, n1.WaitDurable(wctx, tpA, 19))
				settle(time.Minute)
				requireSameLog(t, log1, log2, tpA)
			})
		})
	}
}

// A batch that cannot continue the partition's log at this leadership is
// refused by Append with ErrInvalidBatch; it is never acknowledged, never
// reaches a follower, and does not hold up the partition's next valid
// batch nor another partition sharing its object.
func TestRegressionAppendRejectsInvalidBatches(t *testing.T) {
	batch := func(epoch int32, first, last int64) combiner.Batch {
		return combiner.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: []byte("records")}
	}
	for _, tc := range []struct {
		name   string
		epochs []int32 // the leadership's epochs, re-elected in turn; all start at 0
		before int64   // valid records [0, before) appended first, at the last epoch
		bad    combiner.Batch
	}{
		{"negative epoch", []int32{1}, 0, batch(-1, 0, 9)},
		{"no data", []int32{1}, 0, combiner.Batch{Epoch: 1, FirstOffset: 0, LastOffset: 9}},
		{"inverted offsets", []int32{1}, 0, batch(1, 9, 0)},
		{"negative offset", []int32{1}, 0, batch(1, -5, 4)},
		{"last offset at the maximum", []int32{1}, 0, batch(1, 0, math.MaxInt64)},
		{"both offsets at the maximum", []int32{1}, 0, batch(1, math.MaxInt64, math.MaxInt64)},
		{"gap", []int32{1}, 10, batch(1, 20, 29)},
		{"overlap", []int32{1}, 10, batch(1, 5, 14)},
		{"repeat", []int32{1}, 10, batch(1, 0, 9)},
		{"first batch not at the log end", []int32{1}, 0, batch(1, 10, 19)},
		{"older epoch", []int32{1, 2}, 0, batch(1, 0, 9)},
		{"newer epoch", []int32{1}, 0, batch(2, 0, 9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
				n1 := w.start(1, walstore.NodeConfig{Local: log1})
				n2 := w.start(2, walstore.NodeConfig{Local: log2})
				epoch := tc.epochs[len(tc.epochs)-1]
				for _, tp := range []metadata.TopicPartition{tpA, tpB} {
					for _, e := range tc.epochs {
						require.NoError(t, log1.AssignEpoch(tp, e, 0))
						require.NoError(t, n1.BecomeLeader(ctx, tp, e, []int32{2}, -1))
					}
					require.NoError(t, n2.BecomeFollower(ctx, tp, epoch, 1))
				}
				if tc.before > 0 {
					produce(t, n1, log1, tpA, epoch, 0, tc.before-1)
				}

				err := n1.Append(ctx, tpA, tc.bad)
				require.ErrorIs(t, err, walstore.ErrInvalidBatch)
				// The next valid batches of both partitions go into the same
				// object, and both become durable.
				produce(t, n1, log1, tpA, epoch, tc.before, tc.before+9)
				produce(t, n1, log1, tpB, epoch, 0, 9)
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				require.NoError(t, n1.WaitDurable(wctx, tpA, tc.before+9))
				require.NoError(t, n1.WaitDurable(wctx, tpB, 9))
				assert.Equal(t, tc.before+10, n1.DurableOffset(tpA), "nothing past the valid batches is durable")
				settle(time.Minute)
				requireSameLog(t, log1, log2, tpA)
				requireSameLog(t, log1, log2, tpB)
			})
		})
	}
}
