package directread_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/directread"
	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// batchHolding returns the index in log of the batch holding off, or -1.
func batchHolding(log []storage.Batch, off int64) int {
	for i, b := range log {
		if b.FirstOffset <= off && off <= b.LastOffset {
			return i
		}
	}
	return -1
}

// stalledCluster returns a cluster of two partitions holding records
// 0-199, retained for an hour, the first with its commit stalled at 20
// (broker 4 joins its in-sync set and never applies), the second
// committed to 200.
func stalledCluster(t *testing.T) (*clustertest.Cluster, []metadata.TopicPartition, *clustertest.Broker) {
	c, tps, leader := clusterWith(t, 2, walstore.NodeConfig{RetainFor: time.Hour})
	ctx := context.Background()
	produce := func(first, last int64) {
		for _, tp := range tps {
			leader.Produce(ctx, tp, 1, first, last, 10)
		}
		for _, tp := range tps {
			require.NoError(t, leader.Node.WaitDurable(ctx, tp, 1, last))
		}
	}
	produce(0, 19)
	for _, tp := range tps {
		require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 19))
	}
	c.SetReplicas(tps[0], 1, 2, 3, 4)
	require.NoError(t, leader.Node.BecomeLeader(ctx, tps[0], 1, []int32{2, 3, 4}, -1))
	for first := int64(20); first < 200; first += 10 {
		produce(first, first+9)
	}
	require.NoError(t, leader.Node.WaitReplicated(ctx, tps[1], 1, 199))
	return c, tps, leader
}

// Random Seeks (back to yielded records whose entries were forgotten,
// forward past what is held, to the current position, beyond the end)
// interleaved with Polls, with MaxHeld 1 and 3, one partition's commit
// stalled for the first half and released in the middle: every batch
// yielded is the leader's batch holding the partition's expected next
// offset, byte for byte, never past the commit, never skipped nor
// repeated; the reader holds no more than its bound (or the partitions'
// next entries); and a final Seek to 0 reads both logs whole.
func TestAdversaryRandomSeeksAtTheBound(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, maxHeld := range []int{1, 3} {
		t.Run(fmt.Sprint(maxHeld), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(maxHeld)))
			c, tps, leader := stalledCluster(t)
			logs := map[metadata.TopicPartition][]storage.Batch{tps[0]: leader.Local.Batches(tps[0]), tps[1]: leader.Local.Batches(tps[1])}
			r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(),
				Partitions: map[metadata.TopicPartition]int64{tps[0]: 0, tps[1]: 0}, MaxHeld: maxHeld})
			require.NoError(t, err)
			defer r.Close()
			next := map[metadata.TopicPartition]int64{tps[0]: 0, tps[1]: 0}
			stalled := true
			const ops = 50
			for op := range ops {
				if op == ops/2 {
					require.NoError(t, leader.Node.SetInSync(tps[0], []int32{2, 3}))
					stalled = false
				}
				if rng.IntN(10) < 4 {
					tp := tps[rng.IntN(2)]
					to := rng.Int64N(215)
					if rng.IntN(5) == 0 {
						to = next[tp] // to where it is
					}
					t.Logf("op %d: Seek(%s, %d)", op, tp, to)
					require.NoError(t, r.Seek(tp, to))
					next[tp] = to
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
				f, err := r.Poll(ctx)
				cancel()
				if err != nil {
					require.ErrorIs(t, err, context.DeadlineExceeded)
				}
				require.Empty(t, f.Errors, "records retained for an hour are never gone")
				for _, b := range f.Batches {
					want := batchHolding(logs[b.Partition], next[b.Partition])
					require.GreaterOrEqual(t, want, 0, "op %d: %s yielded %d-%d where nothing holds %d", op, b.Partition, b.FirstOffset, b.LastOffset, next[b.Partition])
					clustertest.RequireSameLog(t, logs[b.Partition][want:want+1], []storage.Batch{b.Batch})
					if stalled && b.Partition == tps[0] {
						require.Less(t, b.LastOffset, int64(20), "yielded past the stalled commit")
					}
					next[b.Partition] = b.LastOffset + 1
				}
				require.LessOrEqual(t, r.Stats().Held, max(maxHeld, len(tps)))
			}
			for _, tp := range tps {
				require.NoError(t, r.Seek(tp, 0))
			}
			got := poll(t, r, tps, 200)
			for _, tp := range tps {
				clustertest.RequireSameLog(t, logs[tp], got[tp])
			}
			quiet(t, r)
			st := r.Stats()
			t.Logf("held %d, evicted %d, rewinds %d", st.Held, st.Evicted, st.MetadataRewinds)
		})
	}
}

// Seek, Poll, Position, Stats and Close from several goroutines at once,
// with a commit stalled and MaxHeld 2: no race, no panic, and every Poll
// ends (ErrClosed once closed).
func TestAdversaryConcurrentSeekPollClose(t *testing.T) {
	c, tps, _ := stalledCluster(t)
	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(),
		Partitions: map[metadata.TopicPartition]int64{tps[0]: 0, tps[1]: 0}, MaxHeld: 2})
	require.NoError(t, err)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var polls atomic.Int64
	for g := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch rng.IntN(3) {
				case 0:
					_ = r.Seek(tps[rng.IntN(2)], rng.Int64N(220))
				case 1:
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
					_, err := r.Poll(ctx)
					cancel()
					if errors.Is(err, directread.ErrClosed) {
						return
					}
					if err != nil {
						require.ErrorIs(t, err, context.DeadlineExceeded)
					}
					polls.Add(1)
				default:
					r.Position(tps[rng.IntN(2)])
					_ = r.Stats()
				}
			}
		})
	}
	for polls.Load() < 30 {
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, r.Close())
	close(stop)
	wg.Wait()
	_, err = r.Poll(context.Background())
	require.ErrorIs(t, err, directread.ErrClosed)
}

// Metadata that breaks its contract: every record of the metadata log
// appended again, in reverse order, after the originals (entries
// duplicated, and out of order), then more records produced. The reader
// yields each batch once, in order, exactly the leader's log.
func TestAdversaryDuplicatedReversedMetadata(t *testing.T) {
	c, tps, leader := cluster(t, 2)
	ctx := context.Background()
	produce := func(first, last int64) {
		for _, tp := range tps {
			leader.Produce(ctx, tp, 1, first, last, 10)
		}
		for _, tp := range tps {
			require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, last))
		}
	}
	produce(0, 99)
	for p := range c.Meta.Partitions() {
		_, high, err := c.Meta.Watermarks(ctx, p)
		require.NoError(t, err)
		if high == 0 {
			continue
		}
		recs, err := c.Meta.Read(ctx, p, 0, int(high))
		require.NoError(t, err)
		for i := len(recs) - 1; i >= 0; i-- {
			_, err := c.Meta.Append(ctx, p, recs[i].Value)
			require.NoError(t, err)
		}
	}
	produce(100, 149)
	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tps[0]: 0, tps[1]: 0}, MaxHeld: 4})
	require.NoError(t, err)
	defer r.Close()
	got := poll(t, r, tps, 150)
	for _, tp := range tps {
		clustertest.RequireSameLog(t, leader.Local.Batches(tp), got[tp])
	}
	quiet(t, r)
}

// hostileStore answers GetRange of the objects bad names with other
// bytes than the object holds (those of the same length further on,
// wrapping), or with ErrNotFound where missing says.
type hostileStore struct {
	storage.ObjectStore
	mu      sync.Mutex
	bad     map[string]bool
	missing map[string]bool
}

func (s *hostileStore) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	s.mu.Lock()
	bad, missing := s.bad[ref.Key], s.missing[ref.Key]
	s.mu.Unlock()
	if missing {
		return nil, fmt.Errorf("hostile: %s: %w", ref, storage.ErrNotFound)
	}
	if !bad {
		return s.ObjectStore.GetRange(ctx, ref, offset, length)
	}
	b, err := s.ObjectStore.GetRange(ctx, ref, 0, offset+2*length)
	if err != nil || int64(len(b)) < offset+2*length {
		b, err = s.ObjectStore.GetRange(ctx, ref, 0, offset+length)
		if err != nil {
			return nil, err
		}
		out := make([]byte, length)
		copy(out, b[:length]) // the object's first bytes instead
		if offset == 0 {
			for i := range out {
				out[i] ^= 0xff
			}
		}
		return out, nil
	}
	return b[offset+length:], nil
}

// An object store that answers an object's ranges with wrong bytes, or
// says a object the metadata names is missing: the reader never yields a
// wrong byte (it yields the log up to that object, then nothing of it),
// and a missing object is a GoneError matching storage.ErrNotFound that
// names the first offset it held.
func TestAdversaryStoreAnswersWrongBytesOrNothing(t *testing.T) {
	c, tps, leader := clusterWith(t, 1, walstore.NodeConfig{RetainFor: time.Hour})
	tp := tps[0]
	ctx := context.Background()
	for first := int64(0); first < 50; first += 10 {
		leader.Produce(ctx, tp, 1, first, first+9, 10)
		require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, first+9))
	}
	entries := clustertest.ReadEntries(t, c, 2, tp)
	keyAt := func(off int64) string {
		for _, e := range entries {
			if e.FirstOffset <= off && off <= e.LastOffset {
				return e.Object.Key
			}
		}
		t.Fatalf("no entry holds %d", off)
		return ""
	}
	log := leader.Local.Batches(tp)
	for _, tc := range []struct {
		name    string
		missing bool
		seek    int64 // after the GoneError, once the object is back
	}{{"wrong bytes", false, 0}, {"missing", true, 20}, {"missing, seek inside it", true, 25}} {
		t.Run(tc.name, func(t *testing.T) {
			stores := make(map[string]storage.ObjectStore)
			var hs []*hostileStore
			for az, s := range c.Stores() {
				h := &hostileStore{ObjectStore: s, bad: map[string]bool{}, missing: map[string]bool{}}
				if tc.missing {
					h.missing[keyAt(20)] = true
				} else {
					h.bad[keyAt(20)] = true
				}
				hs = append(hs, h)
				stores[az] = h
			}
			r, err := directread.New(directread.Config{Log: c.Meta, Stores: stores, Partitions: map[metadata.TopicPartition]int64{tp: 0}})
			require.NoError(t, err)
			defer r.Close()
			got := poll(t, r, tps, 20)
			clustertest.RequireSameLog(t, log[:2], got[tp])
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			for {
				f, err := r.Poll(pctx)
				if !tc.missing {
					require.Empty(t, f.Batches, "wrong bytes were yielded")
					require.Empty(t, f.Errors, "a verification failure is retried for a while first")
					require.ErrorIs(t, err, context.DeadlineExceeded)
					break
				}
				require.NoError(t, err)
				require.Empty(t, f.Batches)
				if len(f.Errors) == 0 {
					continue
				}
				var gone *directread.GoneError
				require.ErrorAs(t, f.Errors[0], &gone)
				require.ErrorIs(t, gone, storage.ErrNotFound)
				require.Equal(t, int64(20), gone.Offset)
				break
			}
			// The store answers right again: the reader goes on from 20.
			for _, h := range hs {
				h.mu.Lock()
				clear(h.bad)
				clear(h.missing)
				h.mu.Unlock()
			}
			if tc.missing {
				require.NoError(t, r.Seek(tp, tc.seek))
			}
			got = poll(t, r, tps, 50)
			clustertest.RequireSameLog(t, log[2:], got[tp])
		})
	}
}

// A forged entry describing partition 0's records 50-59 with partition
// 1's section of the same offsets (its position, length and checksum),
// and a forged commit past it: the section's checksum covers its
// identity, so the reader never yields partition 1's bytes as partition
// 0's.
func TestAdversaryForgedEntryForAnotherPartitionsSection(t *testing.T) {
	c, tps, leader := clusterWith(t, 2, walstore.NodeConfig{RetainFor: time.Hour})
	ctx := context.Background()
	for _, tp := range tps {
		leader.Produce(ctx, tp, 1, 0, 49, 10)
	}
	for _, tp := range tps {
		require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 49))
	}
	leader.Produce(ctx, tps[1], 1, 50, 59, 10)
	require.NoError(t, leader.Node.WaitReplicated(ctx, tps[1], 1, 59))
	var victim metadata.Entry
	for _, e := range clustertest.ReadEntries(t, c, 2, tps[1]) {
		if e.FirstOffset == 50 {
			victim = e
		}
	}
	require.Equal(t, int64(50), victim.FirstOffset)
	forged := victim
	forged.Partition = tps[0]
	msg := &metadata.Message{WriterBrokerID: 1, Object: forged.Object, Entries: []metadata.Entry{forged},
		Commits: []metadata.Commit{{Partition: tps[0], Epoch: 1, Offset: 60}}}
	b, err := metadata.AppendMessage(nil, msg)
	require.NoError(t, err)
	for p := range c.Meta.Partitions() {
		_, err := c.Meta.Append(ctx, p, b)
		require.NoError(t, err)
	}
	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tps[0]: 0}})
	require.NoError(t, err)
	defer r.Close()
	got := poll(t, r, tps[:1], 50)
	clustertest.RequireSameLog(t, leader.Local.Batches(tps[0]), got[tps[0]])
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	f, err := r.Poll(pctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Empty(t, f.Batches, "another partition's section was yielded")
}

// MaxHeld 1 under a stalled commit: 100,000 entries learned, one held
// (the partition's next), the heap barely grows, and nothing is yielded
// past the commit.
func TestAdversaryMaxHeldOneHeap(t *testing.T) {
	const entries = 100_000
	tp := metadata.TopicPartition{Topic: "orders", Partition: 0}
	log := stalledLog(t, tp, entries, 1000)
	objects, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "bucket-az1"}})
	require.NoError(t, err)
	store, err := objects.Store("az1")
	require.NoError(t, err)
	before := heapInuse()
	r, err := directread.New(directread.Config{Log: log, Stores: map[string]storage.ObjectStore{"az1": store},
		Partitions: map[metadata.TopicPartition]int64{tp: 10}, MaxHeld: 1})
	require.NoError(t, err)
	defer r.Close()
	readAll(t, r, uint64(1+entries/1000))
	after := heapInuse()
	runtime.KeepAlive(r)
	st := r.Stats()
	grew := int64(after) - int64(before)
	t.Logf("MaxHeld 1: %d entries learned: heap %+.2f MB; held %d, forgotten %d", entries, float64(grew)/1e6, st.Held, st.Evicted)
	require.LessOrEqual(t, st.Held, 1)
	require.Equal(t, uint64(entries-st.Held), st.Evicted)
	require.Less(t, grew, int64(8<<20))
	next, committed := r.Position(tp)
	require.Equal(t, [2]int64{10, 10}, [2]int64{next, committed})
}

// disorderedLog is a metadata log whose Read, while bad is set, answers
// as mode says: records reversed (offsets going back), a record
// repeated, or records past a gap with the first left out.
type disorderedLog struct {
	metadata.Log
	mode atomic.Value // string
	bad  atomic.Int64 // answers left to spoil
}

func (l *disorderedLog) Read(ctx context.Context, p int32, from int64, max int) ([]metadata.Record, error) {
	recs, err := l.Log.Read(ctx, p, from, max)
	if err != nil || len(recs) < 2 || l.bad.Add(-1) < 0 {
		return recs, err
	}
	out := slices.Clone(recs)
	switch l.mode.Load().(string) {
	case "reversed":
		slices.Reverse(out)
	case "repeated":
		out = append(out[:1:1], out...)
	}
	return out, nil
}

// A metadata log whose Read answers records out of order or repeated:
// Poll returns a *walstore.DependencyError naming metadata.Log.Read and
// matching walstore.ErrContractViolation, yields nothing on it, and once
// the log answers right reads on to exactly the leader's log.
func TestAdversaryMetadataReadOutOfOrder(t *testing.T) {
	for _, mode := range []string{"reversed", "repeated"} {
		t.Run(mode, func(t *testing.T) {
			c, tps, leader := clusterWith(t, 1, walstore.NodeConfig{RetainFor: time.Hour})
			tp := tps[0]
			ctx := context.Background()
			for first := int64(0); first < 50; first += 10 {
				leader.Produce(ctx, tp, 1, first, first+9, 10)
				require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, first+9))
			}
			log := &disorderedLog{Log: c.Meta}
			log.mode.Store(mode)
			log.bad.Store(1)
			r, err := directread.New(directread.Config{Log: log, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: 0}})
			require.NoError(t, err)
			defer r.Close()
			var got []storage.Batch
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			violations := 0
			for next, _ := r.Position(tp); next < 50; next, _ = r.Position(tp) {
				f, err := r.Poll(pctx)
				if err != nil {
					var de *walstore.DependencyError
					require.ErrorAs(t, err, &de)
					require.ErrorIs(t, err, walstore.ErrContractViolation)
					require.Equal(t, "metadata.Log.Read", de.Dependency)
					require.Empty(t, f.Batches)
					violations++
					continue
				}
				require.Empty(t, f.Errors)
				for _, b := range f.Batches {
					got = append(got, b.Batch)
				}
			}
			require.Equal(t, 1, violations)
			clustertest.RequireSameLog(t, leader.Local.Batches(tp), got)
		})
	}
}
