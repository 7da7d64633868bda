package walstore_test

import (
	"context"
	"errors"
	"slices"
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

// lateWriter is a store that keeps every buffer ReadRange was given and,
// while on, writes into one again when it is handed out anew, after
// reading into it: as a request abandoned on an earlier read would, still
// copying its body into the buffer once the follower reused it. The write
// lands before ReadRange returns, so before the follower verifies the
// section: the window the section checksum covers.
type lateWriter struct {
	storage.ObjectStore
	on *atomic.Bool

	mu   sync.Mutex
	kept map[*byte]bool
	late int // late writes made
}

func (s *lateWriter) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	n, err := s.ObjectStore.(storage.RangeReader).ReadRange(ctx, ref, offset, dst)
	if len(dst) == 0 {
		return n, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on.Load() && s.kept[&dst[0]] {
		for i := range dst {
			dst[i] ^= 0x5a
		}
		s.late++
	}
	s.kept[&dst[0]] = true
	return n, err
}

// A follower whose store writes into buffers it handed back (breaking
// storage.RangeReader's contract) appends nothing wrong: a section so
// overwritten fails its checksum, is not applied, and is fetched again;
// once the store behaves the follower catches up. The other partition,
// in the same objects, is held to the same rule.
func TestFollowerSurvivesAStoreThatWritesLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		var on atomic.Bool
		log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
		store := &lateWriter{ObjectStore: w.store(2), on: &on, kept: map[*byte]bool{}}
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, log1.AssignEpoch(tpB, 1, 0))

		on.Store(true)
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		n2 := w.start(2, walstore.NodeConfig{Local: log2, Store: store})
		for _, tp := range []metadata.TopicPartition{tpA, tpB} {
			require.NoError(t, n1.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
			require.NoError(t, n2.BecomeFollower(ctx, tp, 1, 1))
		}
		for i := range int64(10) {
			produce(t, n1, log1, tpA, 1, 10*i, 10*i+9)
			produce(t, n1, log1, tpB, 1, 10*i, 10*i+9)
			settle(time.Second)
		}
		settle(time.Minute)
		store.mu.Lock()
		late := store.late
		store.mu.Unlock()
		require.Positive(t, late, "the follower reused no buffer, so the store never wrote late")
		for _, tp := range []metadata.TopicPartition{tpA, tpB} {
			for _, b := range log2.Batches(tp) {
				assert.Contains(t, log1.Batches(tp), b, "%s: a batch the leader never wrote", tp)
			}
		}
		assert.Positive(t, n2.Stats().Follower.Corrupt, "the overwritten sections failed verification")

		on.Store(false)
		produce(t, n1, log1, tpA, 1, 100, 109)
		produce(t, n1, log1, tpB, 1, 100, 109)
		settle(time.Minute)
		requireSameLog(t, log1, log2, tpA)
		requireSameLog(t, log1, log2, tpB)
	})
}

// abandonsReads is a store that breaks storage.RangeReader's contract
// the way a store that gives up on a request but leaves it reading
// would: the first read of late fails at once, and the request it left
// behind writes into dst half a second later. The first read of slow
// takes two seconds: the follower retries late at once, and its retry,
// verified, waits for slow's section, the one before it, to be appended
// first.
type abandonsReads struct {
	storage.ObjectStore
	slow, late string // object keys

	mu    sync.Mutex
	read  map[string]bool
	wrote atomic.Bool
}

func (s *abandonsReads) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	s.mu.Lock()
	first := !s.read[ref.Key]
	s.read[ref.Key] = true
	s.mu.Unlock()
	switch {
	case first && ref.Key == s.slow:
		time.Sleep(2 * time.Second)
	case first && ref.Key == s.late:
		go func() {
			time.Sleep(500 * time.Millisecond)
			for i := range dst {
				dst[i] ^= 0x5a
			}
			s.wrote.Store(true)
		}()
		return 0, errors.New("request abandoned: the connection was reset")
	}
	return s.ObjectStore.(storage.RangeReader).ReadRange(ctx, ref, offset, dst)
}

// keys returns the keys of the objects in bucket.
func keys(t *testing.T, s storage.ObjectStore, bucket string) map[string]bool {
	objs, err := s.List(context.Background(), bucket, "")
	require.NoError(t, err)
	out := make(map[string]bool)
	for _, o := range objs {
		out[o.Ref.Key] = true
	}
	return out
}

// A read that failed but left a request writing into its buffer, as an
// abandoned request does, writes nothing that is appended: the follower
// never hands such a buffer to another read, so the write cannot land in
// a section verified since (here, the retry's, held for its turn).
func TestFollowerAppendsNothingAnAbandonedReadWrote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		settle(time.Second)
		first := keys(t, w.store(1), "bucket-az1")
		require.Len(t, first, 1)
		produce(t, n1, log1, tpA, 1, 10, 19)
		settle(time.Second)
		store := &abandonsReads{ObjectStore: w.store(2), read: map[string]bool{}}
		for k := range keys(t, w.store(1), "bucket-az1") {
			if first[k] {
				store.slow = k
			} else {
				store.late = k
			}
		}
		require.NotEmpty(t, store.late)

		n2 := w.start(2, walstore.NodeConfig{Local: log2, Store: store})
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		settle(time.Minute)
		require.True(t, store.wrote.Load(), "the abandoned request wrote")
		for _, b := range log2.Batches(tpA) {
			assert.True(t, slices.ContainsFunc(log1.Batches(tpA), func(l storage.Batch) bool { return clustertest.SameBatches([]storage.Batch{l}, []storage.Batch{b}) }),
				"a batch the leader never wrote: %s", clustertest.Describe([]storage.Batch{b}))
		}
		requireSameLog(t, log1, log2, tpA)
	})
}
