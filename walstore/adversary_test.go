package walstore_test

import (
	"context"
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

// Tests of a broker, or a dependency, that does what the documentation
// allows but no well-behaved cluster would do often: role changes while
// background work is under way, forged or extreme reports, answers that
// break a contract. Each checks the Node's promises: nothing acknowledged
// is lost, no silent stop.

// seedLog gives log the batches [0, n) at epoch, as a replica that
// replicated them the ordinary way holds them.
func seedLog(t *testing.T, log *memstore.LocalLog, tp metadata.TopicPartition, epoch int32, n int64) {
	t.Helper()
	require.NoError(t, log.AssignEpoch(tp, epoch, 0))
	for first := int64(0); first < n; first += 5 {
		require.NoError(t, log.Append(context.Background(), tp, []storage.Batch{clustertest.MakeBatch(tp, epoch, first, first+4)}))
	}
}

// A leader re-elected while the republish its first election asked for is
// still under way must finish it: otherwise the followers that lacked the
// log never get it, and the durable offset, held below the republish,
// never advances again (every later WaitDurable hangs).
func TestAdversaryReelectionDuringRepublish(t *testing.T) {
	for _, tc := range []struct {
		name          string
		republishFrom int64 // at the re-election
	}{
		{"without a republish", -1},
		{"with a republish from a later offset", 15},
		{"with a republish from the same offset", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				gate := make(chan struct{})
				log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
				n1 := w.start(1, walstore.NodeConfig{Local: log1, Store: gatedStore{w.store(1), gate}})
				n2 := w.start(2, walstore.NodeConfig{Local: log2})

				// Broker 1 holds 0-19 of epoch 1; broker 2 is a new,
				// empty replica: it needs everything republished.
				seedLog(t, log1, tpA, 1, 20)
				require.NoError(t, log1.AssignEpoch(tpA, 2, 20))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 2, []int32{2}, 0))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 2, 1))
				settle(time.Second) // the republish's first PUT waits at the gate

				require.NoError(t, log1.AssignEpoch(tpA, 3, 20))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 3, []int32{2}, tc.republishFrom))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 3, 1))
				close(gate)
				produce(t, n1, log1, tpA, 3, 20, 24)

				wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
				defer cancel()
				require.NoError(t, n1.WaitDurable(wctx, tpA, 3, 24), "the durable offset must get past the republish")
				settle(time.Minute)
				requireSameLog(t, log1, log2, tpA)
			})
		})
	}
}

// A follower added at the same epoch (a reassignment that does not bump
// the leader epoch), with republishFrom saying it lacks the log, gets the
// log republished; until then the durable offset does not claim it.
func TestAdversarySameEpochNewFollowerGetsRepublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1, log2, log3 := memstore.NewLocalLog(), memstore.NewLocalLog(), memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		n2 := w.start(2, walstore.NodeConfig{Local: log2})

		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 9))
		settle(time.Minute) // broker 2 applies it and the objects are collected
		requireSameLog(t, log1, log2, tpA)

		n3 := w.start(3, walstore.NodeConfig{Local: log3})
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2, 3}, 0))
		require.NoError(t, n3.BecomeFollower(ctx, tpA, 1, 1))
		produce(t, n1, log1, tpA, 1, 10, 14)
		require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 14))
		settle(time.Minute)
		requireSameLog(t, log1, log3, tpA)
		requireSameLog(t, log1, log2, tpA)
	})
}

// Progress that claims more than the leader's log holds is not believed
// past it: a follower that reported an end offset of MaxInt64 once must
// not make every later object look applied by it.
func TestAdversaryForgedProgressDoesNotCollectLaterObjects(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    walstore.Progress
	}{
		{"end offset MaxInt64", walstore.Progress{EndOffset: math.MaxInt64, LastEpoch: 1}},
		{"end offset past the log", walstore.Progress{EndOffset: 1000, LastEpoch: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
				cfg := walstore.NodeConfig{Local: log1}
				cfg.GCInterval = time.Hour
				n1 := w.start(1, cfg)
				n2 := w.start(2, walstore.NodeConfig{Local: log2})
				// Broker 3 follows too, but is down: it applies nothing.
				require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2, 3}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
				produce(t, n1, log1, tpA, 1, 0, 9)
				require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 9))

				p := tc.p
				p.Partition, p.Leader, p.Follower = tpA, 1, 3
				n1.RecordProgress(p)

				produce(t, n1, log1, tpA, 1, 10, 19)
				require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 19))
				settle(time.Minute)
				requireSameLog(t, log1, log2, tpA)
				_, err := n1.CollectGarbage(ctx)
				require.NoError(t, err)
				infos, err := w.store(1).List(ctx, "bucket-az1", "")
				require.NoError(t, err)
				assert.NotEmpty(t, infos, "broker 3 never reported offsets 10-19: their object must stay")
			})
		})
	}
}

// A store whose List answers with objects outside the prefix asked for
// (another broker's, or anything else in the bucket) must not make Sweep
// delete them.
func TestAdversarySweepKeepsObjectsOutsideItsPrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		real := w.store(1)
		on := &atomic.Bool{}
		on.Store(true)
		store := &badStore{ObjectStore: real, on: on, list: func(infos []storage.ObjectInfo, err error) ([]storage.ObjectInfo, error) {
			// Everything in the bucket, whatever the prefix.
			return real.List(ctx, "bucket-az1", "")
		}}
		n1 := w.start(1, walstore.NodeConfig{Store: store})
		for _, key := range []string{"10/theirs.wal", "2/theirs.wal", "unrelated"} {
			_, err := real.Put(ctx, key, []byte("not broker 1's"))
			require.NoError(t, err)
		}
		time.Sleep(time.Hour)
		_, err := n1.Sweep(ctx, time.Minute)
		requireDependencyError(t, err, "ObjectStore.List", walstore.ErrContractViolation)
		infos, err := real.List(ctx, "bucket-az1", "")
		require.NoError(t, err)
		assert.Len(t, infos, 3, "objects outside broker 1's prefix are not its to sweep")
	})
}

// blockingLocal's Append for tpA waits until its context ends, as a log on
// a disk that stopped answering does.
type blockingLocal struct{ *memstore.LocalLog }

func (l blockingLocal) Append(ctx context.Context, tp metadata.TopicPartition, bs []storage.Batch) error {
	if tp == tpA {
		<-ctx.Done()
		return ctx.Err()
	}
	return l.LocalLog.Append(ctx, tp, bs)
}

// A transition of one partition that waits (for an append its local log
// does not finish) holds up no transition of another partition: that one
// takes effect at once, well within its own context.
func TestAdversaryTransitionWaitsOnlyWithItsOwnContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		cfg := walstore.NodeConfig{Local: blockingLocal{memstore.NewLocalLog()}}
		cfg.LocalTimeout = 24 * time.Hour
		n2 := w.start(2, cfg)
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		settle(time.Second) // broker 2's append of tpA hangs

		long, cancelLong := context.WithCancel(ctx)
		defer cancelLong()
		stuck := make(chan error, 1)
		go func() { stuck <- n2.BecomeLeader(long, tpA, 2, nil, -1) }()
		settle(time.Second)

		short, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- n2.BecomeFollower(short, tpB, 1, 1) }()
		settle(2 * time.Minute)
		select {
		case err := <-done:
			require.NoError(t, err, "BecomeFollower of another partition")
		default:
			require.Fail(t, "BecomeFollower of another partition outlived its context")
		}
		cancelLong()
		require.ErrorIs(t, <-stuck, context.Canceled)
	})
}

// A partition whose local log stops answering (an append that never
// returns until its context ends) does not stop the replication of the
// broker's other partitions: each call has LocalTimeout.
func TestAdversaryHungLocalLogHoldsUpOnlyItsPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		cfg := walstore.NodeConfig{Local: blockingLocal{log2}}
		cfg.LocalTimeout = 5 * time.Second
		n2 := w.start(2, cfg)
		for _, tp := range []metadata.TopicPartition{tpA, tpB} {
			require.NoError(t, log1.AssignEpoch(tp, 1, 0))
			require.NoError(t, n1.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
			require.NoError(t, n2.BecomeFollower(ctx, tp, 1, 1))
		}
		produce(t, n1, log1, tpA, 1, 0, 9)
		settle(time.Second) // broker 2's append of tpA hangs
		for first := int64(0); first < 50; first += 10 {
			produce(t, n1, log1, tpB, 1, first, first+9)
			settle(10 * time.Second)
		}
		requireSameLog(t, log1, log2, tpB)
		assert.Empty(t, log2.Batches(tpA))
		assert.Positive(t, n2.Stats().Follower.LocalErrors)
	})
}

// deadlineLocal records how long each Append's context had left when the
// call started; tpA's first Append waits until its context ends.
type deadlineLocal struct {
	*memstore.LocalLog
	mu   sync.Mutex
	left []time.Duration
	hung bool
}

func (l *deadlineLocal) Append(ctx context.Context, tp metadata.TopicPartition, bs []storage.Batch) error {
	l.mu.Lock()
	left := time.Duration(-1) // no deadline
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	l.left = append(l.left, left)
	hang := tp == tpA && !l.hung
	l.hung = l.hung || hang
	l.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return l.LocalLog.Append(ctx, tp, bs)
}

// Every local-log call has at least LocalTimeout, and at most
// LocalTimeout/64 more (calls in quick succession share a deadline): the
// calls right after one that ran out too, and calls spread over several
// times LocalTimeout/64.
func TestAdversaryEveryLocalCallHasLocalTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		local := &deadlineLocal{LocalLog: memstore.NewLocalLog()}
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		const timeout = 64 * time.Second
		cfg := walstore.NodeConfig{Local: local}
		cfg.LocalTimeout = timeout
		n2 := w.start(2, cfg)
		for _, tp := range []metadata.TopicPartition{tpA, tpB} {
			require.NoError(t, log1.AssignEpoch(tp, 1, 0))
			require.NoError(t, n1.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
			require.NoError(t, n2.BecomeFollower(ctx, tp, 1, 1))
		}
		// Appends spread over several shared deadlines' lives (a second).
		for first := int64(0); first < 200; first += 10 {
			produce(t, n1, log1, tpB, 1, first, first+9)
			settle(300 * time.Millisecond)
		}
		// tpA's append runs out; tpB's, waiting behind it, must not.
		produce(t, n1, log1, tpA, 1, 0, 9)
		settle(time.Second)
		produce(t, n1, log1, tpB, 1, 200, 209)
		settle(2 * timeout)
		requireSameLog(t, log1, local.LocalLog, tpA)
		requireSameLog(t, log1, local.LocalLog, tpB)
		assert.Positive(t, n2.Stats().Follower.LocalErrors, "tpA's first append ran out")
		local.mu.Lock()
		defer local.mu.Unlock()
		require.Greater(t, len(local.left), 22)
		for i, left := range local.left {
			require.GreaterOrEqual(t, left, timeout, "call %d", i)
			require.LessOrEqual(t, left, timeout+timeout/64, "call %d", i)
		}
	})
}

// lostStore acknowledges every Put while lose is set, and keeps nothing.
type lostStore struct {
	storage.ObjectStore
	lose *atomic.Bool
}

func (s lostStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	if s.lose.Load() {
		ref := s.Local()
		ref.Key = key
		return ref, nil
	}
	return s.ObjectStore.Put(ctx, key, body)
}

// A store that acknowledges a Put and keeps nothing cannot be caught by
// the leader, which counts the data durable; this is what the library
// does then: the follower counts the missing object, appends nothing it
// does not have, waits at the gap without stopping, and a Republish from
// the leader fills it.
func TestAdversaryStoreThatLosesAcknowledgedPuts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		lose := &atomic.Bool{}
		lose.Store(true)
		log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1, Store: lostStore{w.store(1), lose}})
		n2 := w.start(2, walstore.NodeConfig{Local: log2})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 9), "the leader cannot tell")
		settle(time.Minute)
		assert.Empty(t, log2.Batches(tpA))
		assert.Positive(t, n2.Stats().Follower.NotFound)

		lose.Store(false)
		produce(t, n1, log1, tpA, 1, 10, 19)
		settle(time.Minute)
		assert.Empty(t, log2.Batches(tpA), "later data waits behind the gap")
		require.NoError(t, n1.Republish(ctx, tpA, 0))
		settle(time.Minute)
		requireSameLog(t, log1, log2, tpA)
	})
}
