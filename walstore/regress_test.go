package walstore_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
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

func (w *world) store(id int32) storage.ObjectStore {
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
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	fast := walstore.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	if cfg.Backoff == (walstore.Backoff{}) {
		cfg.Backoff = fast
	}
	if cfg.Backoff == (walstore.Backoff{}) {
		cfg.Backoff = fast
	}
	cfg.Logger = discard()
	cfg.OnProgress = w.relay
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

// relay delivers a follower's progress to its leader's Node, as a
// broker's fetch path carries it.
func (w *world) relay(p walstore.Progress) {
	w.mu.Lock()
	n := w.nodes[p.Leader]
	w.mu.Unlock()
	if n != nil {
		n.RecordProgress(p)
	}
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
	require.NoError(t, local.Append(context.Background(), tp, []storage.Batch{b}))
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
	storage.ObjectStore
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
					cfg.Interval = time.Minute // nothing is cut before the re-election
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
				require.NoError(t, n1.WaitDurable(wctx, tpA, 2, 9))
				require.NoError(t, n1.WaitDurable(wctx, tpA, 2, 19))
				settle(time.Minute)
				requireSameLog(t, log1, log2, tpA)
			})
		})
	}
}

// A batch that cannot continue the partition's log at this leadership is
// refused by Append with storage.ErrInvalidBatch; it is never acknowledged, never
// reaches a follower, and does not hold up the partition's next valid
// batch nor another partition sharing its object.
func TestRegressionAppendRejectsInvalidBatches(t *testing.T) {
	batch := func(epoch int32, first, last int64) storage.Batch {
		return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: []byte("records")}
	}
	for _, tc := range []struct {
		name   string
		epochs []int32 // the leadership's epochs, re-elected in turn; all start at 0
		before int64   // valid records [0, before) appended first, at the last epoch
		bad    storage.Batch
	}{
		{"negative epoch", []int32{1}, 0, batch(-1, 0, 9)},
		{"no data", []int32{1}, 0, storage.Batch{Epoch: 1, FirstOffset: 0, LastOffset: 9}},
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
				require.ErrorIs(t, err, storage.ErrInvalidBatch)
				// The next valid batches of both partitions go into the same
				// object, and both become durable.
				produce(t, n1, log1, tpA, epoch, tc.before, tc.before+9)
				produce(t, n1, log1, tpB, epoch, 0, 9)
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				require.NoError(t, n1.WaitDurable(wctx, tpA, epoch, tc.before+9))
				require.NoError(t, n1.WaitDurable(wctx, tpB, epoch, 9))
				assert.Equal(t, tc.before+10, n1.DurableOffset(tpA), "nothing past the valid batches is durable")
				settle(time.Minute)
				requireSameLog(t, log1, log2, tpA)
				requireSameLog(t, log1, log2, tpB)
			})
		})
	}
}

// publishCrafted copies batches into an object of broker 1's bucket with
// a Manager and appends one message naming them, with markers, to the
// metadata partition broker reads: metadata no engine would publish.
func (w *world) publishCrafted(ctx context.Context, broker int32, markers []metadata.EpochStart, inputs ...walstore.CopyInput) {
	t := w.t
	t.Helper()
	mgr, err := walstore.NewManager(walstore.ManagerConfig{Store: w.store(1), BrokerID: 1, Logger: discard()})
	require.NoError(t, err)
	defer mgr.Close()
	msg := metadata.Message{WriterBrokerID: 1, Markers: markers}
	if len(inputs) > 0 {
		msg.Entries, err = mgr.Copy(ctx, inputs)
		require.NoError(t, err)
		msg.Object = msg.Entries[0].Object
	}
	buf, err := metadata.AppendMessage(nil, &msg)
	require.NoError(t, err)
	_, err = w.meta.Append(ctx, broker%w.meta.Partitions(), buf)
	require.NoError(t, err)
}

func copyOf(tp metadata.TopicPartition, epoch int32, first, last int64) walstore.CopyInput {
	return walstore.CopyInput{Partition: tp, PublisherEpoch: epoch, Batches: []storage.Batch{clustertest.MakeBatch(tp, epoch, first, last)}}
}

// Entries that skip offsets, which no leader publishes, once made the
// follower's Run fail. A follower now waits at the gap for that partition
// only, and goes on when the missing entry comes.
func TestRegressionFollowerWaitsAtAGapForThatPartitionOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log2 := memstore.NewLocalLog()
		n2 := w.start(2, walstore.NodeConfig{Local: log2})
		for _, tp := range []metadata.TopicPartition{tpA, tpB} {
			require.NoError(t, n2.BecomeFollower(ctx, tp, 1, 1))
		}
		w.publishCrafted(ctx, 2, []metadata.EpochStart{
			{Partition: tpA, Epoch: 1, StartOffset: 0, LeaderBrokerID: 1},
			{Partition: tpB, Epoch: 1, StartOffset: 0, LeaderBrokerID: 1},
		}, copyOf(tpA, 1, 0, 9), copyOf(tpB, 1, 0, 9))
		// An entry for 10-29 whose batches skip 15-19, then entries with
		// a gap at 10-19.
		gapped := copyOf(tpA, 1, 20, 29)
		gapped.Batches = append([]storage.Batch{clustertest.MakeBatch(tpA, 1, 10, 14)}, gapped.Batches...)
		w.publishCrafted(ctx, 2, nil, gapped)
		w.publishCrafted(ctx, 2, nil, copyOf(tpA, 1, 20, 29), copyOf(tpB, 1, 10, 19))
		settle(time.Minute)
		want := func(tp metadata.TopicPartition, ends ...int64) []storage.Batch {
			var bs []storage.Batch
			for first, i := int64(0), 0; i < len(ends); first, i = ends[i]+1, i+1 {
				bs = append(bs, clustertest.MakeBatch(tp, 1, first, ends[i]))
			}
			return bs
		}
		clustertest.RequireSameLog(t, want(tpA, 9), log2.Batches(tpA))
		clustertest.RequireSameLog(t, want(tpB, 9, 19), log2.Batches(tpB))

		w.publishCrafted(ctx, 2, nil, copyOf(tpA, 1, 10, 19))
		settle(time.Minute)
		clustertest.RequireSameLog(t, want(tpA, 9, 19, 29), log2.Batches(tpA))
	})
}

// objectsIn counts the objects in broker id's bucket.
func (w *world) objectsIn(id int32) int {
	s := w.store(id)
	infos, err := s.List(context.Background(), s.Local().Bucket, "")
	require.NoError(w.t, err)
	return len(infos)
}

// The collector judged an object by the followers the placement named at
// collection time; a placement that briefly named nobody made every
// object look applied by all, and they were deleted before the follower
// had them.
func TestRegressionGCKeepsObjectsThroughAPlacementFlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1, GCInterval: time.Hour})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		produce(t, n1, log1, tpA, 1, 10, 19)
		require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 19))
		objects := w.objectsIn(1)
		require.Positive(t, objects)

		// The placement flaps: no followers, then broker 2 again.
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, nil, -1))
		n, err := n1.CollectGarbage(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "broker 2 has applied nothing")
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		n, err = n1.CollectGarbage(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "broker 2 has applied nothing")
		require.Equal(t, objects, w.objectsIn(1))

		// Broker 2 catches up from the objects; then they go.
		n2 := w.start(2, walstore.NodeConfig{Local: log2})
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		settle(time.Minute)
		requireSameLog(t, log1, log2, tpA)
		n, err = n1.CollectGarbage(ctx)
		require.NoError(t, err)
		assert.Equal(t, objects, n)
	})
}

// A marker of an epoch the broker has not heard of may be forged; acting
// on {Epoch: 999, StartOffset: 0} once truncated a follower's whole log.
// The follower holds it until its broker learns a later epoch, ignores
// markers of the known epoch from a broker that does not lead it, and acts
// on the genuine markers of a later epoch once told.
func TestRegressionForgedMarkerDoesNotTruncate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1, log2, log3 := memstore.NewLocalLog(), memstore.NewLocalLog(), memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		n2 := w.start(2, walstore.NodeConfig{Local: log2})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2, 3}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		for off := int64(0); off < 30; off += 10 {
			produce(t, n1, log1, tpA, 1, off, off+9)
		}
		settle(time.Minute)
		requireSameLog(t, log1, log2, tpA)

		w.publishCrafted(ctx, 2, []metadata.EpochStart{{Partition: tpA, Epoch: 999, StartOffset: 0, LeaderBrokerID: 1}})
		w.publishCrafted(ctx, 2, []metadata.EpochStart{{Partition: tpA, Epoch: 1, StartOffset: 15, LeaderBrokerID: 3}})
		produce(t, n1, log1, tpA, 1, 30, 39)
		settle(time.Minute)
		requireSameLog(t, log1, log2, tpA)
		require.Zero(t, n2.Stats().Follower.Truncations)

		// Broker 3, which has 0-19, leads epoch 2 from 20: broker 2 must
		// truncate 20-39 and take epoch 2's records.
		n3 := w.start(3, walstore.NodeConfig{Local: log3})
		for off := int64(0); off < 20; off += 10 {
			require.NoError(t, log3.Append(ctx, tpA, []storage.Batch{clustertest.MakeBatch(tpA, 1, off, off+9)}))
		}
		require.NoError(t, log3.AssignEpoch(tpA, 1, 0))
		require.NoError(t, log3.AssignEpoch(tpA, 2, 20))
		require.NoError(t, n3.BecomeLeader(ctx, tpA, 2, []int32{1, 2}, -1))
		require.NoError(t, n1.BecomeFollower(ctx, tpA, 2, 3))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 2, 3))
		produce(t, n3, log3, tpA, 2, 20, 29)
		settle(time.Minute)
		requireSameLog(t, log3, log2, tpA)
		requireSameLog(t, log3, log1, tpA)
		assert.Positive(t, n2.Stats().Follower.Truncations)
	})
}

// A broker that follows, leads, then follows again: its follower side
// once kept the state from before it led (the log end, the epochs), and
// neither truncated what it wrote as leader nor appended where its log
// ended.
func TestRegressionFollowLeadFollowTruncatesWhatItWroteAsLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		n2 := w.start(2, walstore.NodeConfig{Local: log2})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		settle(time.Minute)
		requireSameLog(t, log1, log2, tpA)

		// Broker 1 drops out; broker 2 leads epoch 2 and writes 10-19,
		// which broker 1 never gets.
		require.NoError(t, n1.StopReplica(ctx, tpA))
		require.NoError(t, log2.AssignEpoch(tpA, 2, 10))
		require.NoError(t, n2.BecomeLeader(ctx, tpA, 2, []int32{1}, -1))
		produce(t, n2, log2, tpA, 2, 10, 19)
		require.NoError(t, n2.WaitDurable(ctx, tpA, 2, 19))

		// Broker 1 leads epoch 3 from 10; broker 2 follows again.
		require.NoError(t, log1.AssignEpoch(tpA, 3, 10))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 3, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 3, 1))
		produce(t, n1, log1, tpA, 3, 10, 14)
		settle(time.Minute)
		requireSameLog(t, log1, log2, tpA)
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

// A lagging follower applied the old leader's uncommitted tail before it
// read the new epoch's marker; the new leader counted those records as
// applied, deleted its own object of the same offsets, and the follower,
// having truncated, could never catch up. Progress now carries the
// follower's last epoch, and the leader credits only what the follower
// holds of its log.
func TestRegressionProgressOfRecordsToBeTruncatedIsNotCredited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1, log2, log3 := memstore.NewLocalLog(), memstore.NewLocalLog(), memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1, GCInterval: time.Hour})
		n2 := w.start(2, walstore.NodeConfig{Local: log2, GCInterval: time.Hour})

		// Broker 1 leads epoch 1 and publishes 0-69; broker 2 replicated
		// only 0-49 when it is elected at epoch 2 from 50.
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{3}, -1))
		produce(t, n1, log1, tpA, 1, 0, 49)
		produce(t, n1, log1, tpA, 1, 50, 69)
		require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 69))
		require.NoError(t, log2.Append(ctx, tpA, []storage.Batch{clustertest.MakeBatch(tpA, 1, 0, 49)}))
		require.NoError(t, n1.StopReplica(ctx, tpA))
		_, high, err := w.meta.Watermarks(ctx, 3%w.meta.Partitions())
		require.NoError(t, err)
		require.NoError(t, log2.AssignEpoch(tpA, 2, 50))
		require.NoError(t, n2.BecomeLeader(ctx, tpA, 2, []int32{3}, 0))
		produce(t, n2, log2, tpA, 2, 50, 59)
		require.NoError(t, n2.WaitDurable(ctx, tpA, 2, 59))

		// Broker 3 lags: its broker has not heard of epoch 2 yet, and it
		// reads the metadata slowly from epoch 2's first message on. It
		// applies epoch 1's 0-69, and its fetch (the broker's progress
		// path) tells broker 2 so, with its last epoch, 1.
		n3 := w.start(3, walstore.NodeConfig{Local: log3, Log: slowMarkers{w.meta, high}})
		require.NoError(t, n3.BecomeFollower(ctx, tpA, 1, 1))
		// Usually within a few milliseconds; when its metadata reader
		// was already waiting on a slow record as the broker followed
		// tpA, the re-read that Follow asks for waits for that record.
		var end int64
		for range 40 {
			settle(100 * time.Millisecond)
			end, err = log3.EndOffset(tpA)
			require.NoError(t, err)
			if end >= 70 {
				break
			}
		}
		require.Equal(t, int64(70), end, "broker 3 applied epoch 1's 0-69 before learning of epoch 2")
		n2.RecordProgress(walstore.Progress{Partition: tpA, Leader: 2, Follower: 3, EndOffset: end, LastEpoch: 1})
		_, err = n2.CollectGarbage(ctx)
		require.NoError(t, err)

		// Its broker learns of epoch 2: it truncates 50-69 and needs
		// broker 2's objects of 50-59, which must still be there.
		require.NoError(t, n3.BecomeFollower(ctx, tpA, 2, 2))
		settle(time.Minute)
		requireSameLog(t, log2, log3, tpA)
	})
}

// hanging makes a dependency's call hang while on is set: until the call's
// context ends, or, for a dependency that ignores its context, for an hour.
type hanging struct {
	on        atomic.Bool
	ignoreCtx bool
	calls     atomic.Int64
}

func (h *hanging) wait(ctx context.Context) error {
	h.calls.Add(1)
	if !h.on.Load() {
		return nil
	}
	if h.ignoreCtx {
		time.Sleep(time.Hour)
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

type hangingStore struct {
	storage.ObjectStore
	h *hanging
}

func (s hangingStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	if err := s.h.wait(ctx); err != nil {
		return metadata.ObjectRef{}, err
	}
	return s.ObjectStore.Put(ctx, key, body)
}

type hangingLog struct {
	metadata.Log
	h *hanging
}

func (l hangingLog) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	if err := l.h.wait(ctx); err != nil {
		return 0, err
	}
	return l.Log.Append(ctx, partition, value)
}

// A PUT or a metadata append that never answers degrades the leader after
// DegradedAfter, whether or not the call ever returns, with a health error
// that names that dependency: a DependencyError for the call, matching
// storage.ErrUnavailable, and for the metadata log a message that says nothing of
// the object store. An attempt that respects its context is given up after
// RequestTimeout and retried; once the dependency answers again, the
// engine recovers and publishes.
func TestRegressionHangingDependencyDegradedNamesItAndRecovers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		store      bool // the store hangs; otherwise the metadata log
		ignoreCtx  bool
		dependency string
	}{
		{"PUT waits for its context", true, false, "ObjectStore.Put"},
		{"PUT ignores its context for an hour", true, true, "ObjectStore.Put"},
		{"metadata append waits for its context", false, false, "metadata.Log.Append"},
		{"metadata append ignores its context for an hour", false, true, "metadata.Log.Append"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				h := &hanging{ignoreCtx: tc.ignoreCtx}
				log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
				var mu sync.Mutex
				var healths []walstore.Health
				cfg := walstore.NodeConfig{
					Local:         log1,
					DegradedAfter: 5 * time.Second, RequestTimeout: time.Second,
					OnHealth: func(hl walstore.Health) {
						mu.Lock()
						healths = append(healths, hl)
						mu.Unlock()
					},
				}
				if tc.store {
					cfg.Store = hangingStore{w.store(1), h}
				} else {
					cfg.Log = hangingLog{w.meta, h}
				}
				n1 := w.start(1, cfg)
				n2 := w.start(2, walstore.NodeConfig{Local: log2})
				require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
				h.on.Store(true)
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
				produce(t, n1, log1, tpA, 1, 0, 9)

				settle(30 * time.Second)
				health := n1.Health()
				require.True(t, health.Degraded)
				requireDependencyError(t, health.Err, tc.dependency, storage.ErrUnavailable)
				if !tc.store {
					assert.NotContains(t, health.Err.Error(), "object store", "the store answered: %v", health.Err)
				}
				mu.Lock()
				require.NotEmpty(t, healths)
				assert.True(t, healths[len(healths)-1].Degraded)
				requireDependencyError(t, healths[len(healths)-1].Err, tc.dependency, storage.ErrUnavailable)
				mu.Unlock()
				if !tc.ignoreCtx {
					assert.Greater(t, h.calls.Load(), int64(5), "attempts are given up after RequestTimeout and retried")
				}
				assert.Equal(t, int64(0), n1.DurableOffset(tpA))

				h.on.Store(false)
				settle(2 * time.Hour)
				require.Equal(t, int64(10), n1.DurableOffset(tpA))
				assert.False(t, n1.Health().Degraded)
				mu.Lock()
				assert.False(t, healths[len(healths)-1].Degraded, "the last report is the recovery")
				mu.Unlock()
				requireSameLog(t, log1, log2, tpA)
			})
		})
	}
}
