package walstore_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// The engines reuse the memory of objects once uploaded and of GET
// buffers once their sections are appended. These adversaries hold what
// they are handed for as long as the contract lets them, and check that
// it does not change meanwhile and that it is what the producer sent: a
// buffer given back too early shows as bytes that change under them or
// that are not the producer's.

// violations collects what the adversaries found.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.errs) < 20 {
		v.errs = append(v.errs, fmt.Sprintf(format, args...))
	}
}

func (v *violations) list() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.errs...)
}

// hold lets the engine's other goroutines run for a while, as a slow store
// or disk would: a fetch round or a cut writing into memory it should not
// have been given back shows within it.
func hold() {
	for range 20 {
		time.Sleep(20 * time.Microsecond)
	}
}

// holdingStore is a memstore Store (a RangeReader, so the follower reads
// into its pooled buffers) that holds every Put body and ReadRange buffer
// until it returns, checking that the body stays as it came, and records
// the buffers' addresses to show that they are reused.
type holdingStore struct {
	*memstore.Store
	v *violations

	mu        sync.Mutex
	bodies    map[*byte]int // Put bodies' first byte: how often seen
	dsts      map[*byte]int // ReadRange buffers' first byte: how often seen
	getsFails int
}

func (s *holdingStore) seen(m map[*byte]int, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m[unsafe.SliceData(b)]++
}

func (s *holdingStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	s.seen(s.bodies, body)
	before := bytes.Clone(body)
	hold()
	ref, err := s.Store.Put(ctx, key, body)
	hold()
	if !bytes.Equal(before, body) {
		s.v.add("PUT %s: the body changed while the store held it", key)
	}
	return ref, err
}

func (s *holdingStore) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	s.seen(s.dsts, dst)
	n, err := s.Store.ReadRange(ctx, ref, offset, dst)
	if err != nil {
		s.mu.Lock()
		s.getsFails++
		s.mu.Unlock()
	}
	return n, err
}

// reused reports how many buffers m saw more than once.
// allReused reports whether the leader's store saw an object buffer
// reused and each follower's store a GET buffer.
func allReused(leader *holdingStore, followers []*holdingStore) bool {
	if leader.reused(leader.bodies) == 0 {
		return false
	}
	for _, s := range followers {
		if s.reused(s.dsts) == 0 {
			return false
		}
	}
	return true
}

func (s *holdingStore) reused(m map[*byte]int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range m {
		if c > 1 {
			n++
		}
	}
	return n
}

// holdingLog is a follower's local log that checks every batch appended
// against what the producer sent (clustertest.MakeBatch) when Append is
// called and again when it returns, holding the batches in between.
type holdingLog struct {
	*memstore.LocalLog
	v *violations
}

func (l holdingLog) Append(ctx context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	check := func(when string) {
		for _, b := range batches {
			if want := clustertest.MakeBatch(tp, b.Epoch, b.FirstOffset, b.LastOffset).Data; !bytes.Equal(b.Data, want) {
				l.v.add("%s: batch %d-%d %s is not what was produced", tp, b.FirstOffset, b.LastOffset, when)
			}
		}
	}
	check("as appended")
	hold()
	check("while the log held it")
	return l.LocalLog.Append(ctx, tp, batches)
}

// TestBufferOwnership runs a leader and two followers through uploads and
// GETs that fail now and then, one section in twenty read corrupt, and
// small objects, so that buffers are cut, uploaded, retried, read,
// rejected and reused many times over, and requires that every byte
// appended is the producer's, that nothing the stores and logs held
// changed under them, and that buffers were in fact reused. Again with
// nearly every PUT and GET hedged: a hedge reads the body of an upload
// the other attempt may have won, and a cancelled GET's buffer goes back.
func TestBufferOwnership(t *testing.T) {
	t.Run("default", func(t *testing.T) { bufferOwnership(t, walstore.HedgeConfig{}) })
	t.Run("hedging everything", func(t *testing.T) {
		leader, followers := bufferOwnership(t, walstore.HedgeConfig{Quantile: 0.5, Min: time.Microsecond, Max: 50 * time.Microsecond, Budget: 1, Burst: 100})
		require.Positive(t, leader.Stats().Leader.UploadHedges, "no upload was hedged: the test proves nothing")
		var hedges uint64
		for _, f := range followers {
			hedges += f.Stats().Follower.Hedges
		}
		require.Positive(t, hedges, "no GET was hedged: the test proves nothing")
	})
}

func bufferOwnership(t *testing.T, hedge walstore.HedgeConfig) (leader *walstore.Node, followers []*walstore.Node) {
	const partitions, batches, perBatch = 6, 60, 3
	w := newWorld(t)
	puts, gets := faults.IsOp(faults.OpPut), func(r faults.Request) bool { return r.Op.IsGet() }
	for _, inj := range []faults.Injector{
		faults.On(puts, faults.Rate(0.15, 1, faults.Fail(storage.ErrUnavailable))),
		faults.On(puts, faults.Rate(0.1, 2, faults.FailAfter(storage.ErrUnavailable))),
		faults.On(gets, faults.Rate(0.1, 3, faults.Fail(storage.ErrUnavailable))),
		faults.On(gets, faults.Rate(0.05, 4, faults.Corrupt(5))),
	} {
		w.objects.AddFault(inj)
	}
	v := &violations{}
	store := func(id int32) *holdingStore {
		s, err := w.objects.Store(fmt.Sprintf("az%d", id))
		require.NoError(t, err)
		return &holdingStore{Store: s, v: v, bodies: map[*byte]int{}, dsts: map[*byte]int{}}
	}
	leaderStore := store(1)
	leaderLog := memstore.NewLocalLog()
	leader = w.start(1, walstore.NodeConfig{Store: leaderStore, Local: leaderLog,
		Interval: time.Millisecond, ObjectBytes: 2 << 10, MaxInflight: 3, GCInterval: 5 * time.Millisecond, UploadHedge: hedge})
	var followerStores []*holdingStore
	var followerLogs []*memstore.LocalLog
	for _, id := range []int32{2, 3} {
		s, local := store(id), memstore.NewLocalLog()
		followerStores, followerLogs = append(followerStores, s), append(followerLogs, local)
		n := w.start(id, walstore.NodeConfig{Store: s, Local: holdingLog{LocalLog: local, v: v},
			FetchConcurrency: 3, Readahead: 4, CoalesceGap: 1 << 10, FetchHedge: hedge})
		followers = append(followers, n)
		for p := range partitions {
			require.NoError(t, n.BecomeFollower(t.Context(), metadata.TopicPartition{Topic: "t", Partition: int32(p)}, 1, 1))
		}
	}
	for p := range partitions {
		tp := metadata.TopicPartition{Topic: "t", Partition: int32(p)}
		require.NoError(t, leaderLog.AssignEpoch(tp, 1, 0))
		require.NoError(t, leader.BecomeLeader(t.Context(), tp, 1, []int32{2, 3}, -1))
	}
	round := func(i int) {
		for p := range partitions {
			tp := metadata.TopicPartition{Topic: "t", Partition: int32(p)}
			first := int64(i * perBatch)
			produce(t, leader, leaderLog, tp, 1, first, first+perBatch-1)
		}
	}
	caughtUp := func(rounds int) {
		for p := range partitions {
			tp := metadata.TopicPartition{Topic: "t", Partition: int32(p)}
			for i, local := range followerLogs {
				require.Eventually(t, func() bool {
					end, _ := local.EndOffset(tp)
					return end == int64(rounds*perBatch) || len(v.list()) > 0
				}, 30*time.Second, time.Millisecond, "follower %d of %s: %+v", i+2, tp, v.list())
				require.Empty(t, v.list())
			}
		}
	}
	for i := range batches {
		round(i)
	}
	caughtUp(batches)
	// Produced faster than one upload takes, every object may have been
	// cut before the first was stored, leaving no buffer to reuse. Rounds
	// produced once the followers caught up with the one before cut their
	// objects after earlier ones were stored and read, so a pool that
	// works shows reuse within a few; one that never reuses fails below.
	rounds := batches
	for ; rounds < 2*batches && !allReused(leaderStore, followerStores); rounds++ {
		round(rounds)
		caughtUp(rounds + 1)
	}
	for p := range partitions {
		tp := metadata.TopicPartition{Topic: "t", Partition: int32(p)}
		for _, local := range followerLogs {
			requireSameLog(t, leaderLog, local, tp)
		}
	}
	require.Empty(t, v.list())
	require.Positive(t, leaderStore.reused(leaderStore.bodies), "the leader reused no object buffer: the test proves nothing")
	for i, s := range followerStores {
		require.Positive(t, s.reused(s.dsts), "follower %d reused no GET buffer: the test proves nothing", i+2)
	}
	return leader, followers
}
