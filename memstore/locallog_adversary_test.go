package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// These tests attack LocalLog's shared blocks and uncopied visits through
// its exported API: callers reusing buffers, batches kept across Truncate,
// visits racing appends, and a long cycle's memory.

// advBatch is a one-record-per-byte batch whose Data is a pattern of its
// first offset and gen, so that any byte overwritten later shows.
func advBatch(epoch int32, first int64, n int, gen int64) storage.Batch {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(first*131 + gen*7 + int64(i))
	}
	return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: first + int64(max(n, 1)) - 1, MaxTimestamp: gen, Data: data}
}

// advCheck fails unless b's Data is still the pattern advBatch wrote.
func advCheck(b storage.Batch) error {
	want := advBatch(b.Epoch, b.FirstOffset, len(b.Data), b.MaxTimestamp)
	if b.LastOffset != want.LastOffset || !slices.Equal(b.Data, want.Data) {
		return fmt.Errorf("batch %d-%d gen %d: bytes changed", b.FirstOffset, b.LastOffset, b.MaxTimestamp)
	}
	return nil
}

func cloneBatches(bs []storage.Batch) []storage.Batch {
	out := make([]storage.Batch, len(bs))
	for i, b := range bs {
		b.Data = slices.Clone(b.Data)
		out[i] = b
	}
	return out
}

func eachAll(t *testing.T, l *memstore.LocalLog, tp metadata.TopicPartition, from int64) []storage.Batch {
	t.Helper()
	var got []storage.Batch
	require.NoError(t, l.EachBatch(tp, from, func(b storage.Batch) error {
		got = append(got, b)
		return nil
	}))
	return got
}

// The sizes around the blocks' edges: the first block, the size from which
// a batch gets its own allocation, and the last block.
var advSizes = []int{0, 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, 256<<10 - 1, 256 << 10, 256<<10 + 1, 1<<20 - 1, 1 << 20, 1<<20 + 1}

func TestLocalLogAdversaryCallerBufferReuse(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	l := memstore.NewLocalLog()
	buf := make([]byte, 1<<20+1)
	var want []storage.Batch
	next := int64(0)
	for round := range 3 {
		for i, n := range advSizes {
			b := advBatch(1, next, n, int64(round*100+i))
			want = append(want, cloneBatches([]storage.Batch{b})...)
			// The caller's buffer is reused for every batch and scribbled
			// over after each call.
			copy(buf, b.Data)
			b.Data = buf[:n]
			if i%2 == 0 {
				require.NoError(t, l.Append(ctx, tp, []storage.Batch{b}))
			} else {
				_, err := l.AppendOne(ctx, tp, b)
				require.NoError(t, err)
			}
			for j := range buf[:n] {
				buf[j] = 0xAA
			}
			next = b.LastOffset + 1
		}
	}
	assert.Equal(t, want, l.Batches(tp))
	assert.Equal(t, want, eachAll(t, l, tp, 0))
	for _, b := range l.Batches(tp) {
		require.NoError(t, advCheck(b))
	}
}

// A batch kept from EachBatch, AppendOne or Batches keeps its bytes when
// the log is truncated under it and new batches are appended over the same
// offsets, whether truncation empties the log or clips it.
func TestLocalLogAdversaryKeptSurvivesTruncate(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	for _, to := range []string{"start", "middle"} {
		t.Run(to, func(t *testing.T) {
			l := memstore.NewLocalLog()
			var kept []storage.Batch
			next := int64(0)
			for i, n := range advSizes {
				b, err := l.AppendOne(ctx, tp, advBatch(1, next, n, int64(i)))
				require.NoError(t, err)
				kept = append(kept, b)
				next = b.LastOffset + 1
			}
			want := cloneBatches(kept)
			visited := eachAll(t, l, tp, 0)
			copies := l.Batches(tp)
			cut := int64(0)
			keep := 0
			if to == "middle" {
				keep = len(kept) / 2
				cut = kept[keep].FirstOffset
			}
			for gen := int64(1000); gen < 1003; gen++ {
				require.NoError(t, l.Truncate(ctx, tp, cut))
				next := cut
				for _, n := range advSizes {
					b := advBatch(2, next, n, gen)
					require.NoError(t, l.Append(ctx, tp, []storage.Batch{b}))
					next = b.LastOffset + 1
				}
			}
			assert.Equal(t, want, kept, "AppendOne's batches")
			assert.Equal(t, want, visited, "EachBatch's batches")
			assert.Equal(t, want, copies, "Batches' copies")
			got := l.Batches(tp)
			require.Len(t, got, keep+len(advSizes))
			assert.Equal(t, want[:keep], got[:keep], "what Truncate kept")
			for _, b := range got {
				require.NoError(t, advCheck(b))
			}
		})
	}
}

// Two holders of the same stored batch (AppendOne's and EachBatch's) that
// each append to its Data must not see each other's bytes, whatever the
// batch's size: the log hands out Data without spare capacity.
func TestLocalLogAdversaryKeptDataHasNoSpareCapacity(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	l := memstore.NewLocalLog()
	next := int64(0)
	for i, n := range append(slices.Clone(advSizes), 300<<10+3, 2<<20+5) {
		kept, err := l.AppendOne(ctx, tp, advBatch(1, next, n, int64(i)))
		require.NoError(t, err)
		next = kept.LastOffset + 1
		var visited storage.Batch
		errOne := errors.New("one")
		require.ErrorIs(t, l.EachBatch(tp, kept.FirstOffset, func(b storage.Batch) error {
			visited = b
			return errOne
		}), errOne)
		mine := append(kept.Data, 1)
		theirs := append(visited.Data, 2)
		assert.Equal(t, byte(1), mine[n], "size %d: an append to one holder's Data reached the other's", n)
		assert.Equal(t, byte(2), theirs[n], "size %d", n)
		assert.Equal(t, len(kept.Data), cap(kept.Data), "size %d", n)
	}
}

// EachBatch runs while other goroutines append to and truncate the same
// partition and others; every batch it sees, then and after, keeps its
// bytes. Run with -race.
func TestLocalLogAdversaryEachBatchConcurrent(t *testing.T) {
	ctx := context.Background()
	l := memstore.NewLocalLog()
	tps := []metadata.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "u", Partition: 0}}
	const rounds = 300
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w, tp := range tps {
		wg.Go(func() {
			next := int64(0)
			for r := range rounds {
				n := 1 + (r*7919+w*31)%(20<<10)
				if r%50 == 49 {
					n = 256<<10 + r // own allocations too
				}
				b := advBatch(1, next, n, int64(r))
				if err := l.Append(ctx, tp, []storage.Batch{b}); err != nil {
					errs <- err
					return
				}
				next = b.LastOffset + 1
				if r%5 == 4 {
					// Back to the start of some earlier batch.
					var firsts []int64
					_ = l.EachBatch(tp, 0, func(b storage.Batch) error {
						firsts = append(firsts, b.FirstOffset)
						return nil
					})
					cut := firsts[r%len(firsts)]
					if err := l.Truncate(ctx, tp, cut); err != nil {
						errs <- err
						return
					}
					next = cut
				}
			}
		})
	}
	var kept []storage.Batch
	var keptMu sync.Mutex
	for _, tp := range tps {
		wg.Go(func() {
			for r := range rounds {
				err := l.EachBatch(tp, int64(r*100), func(b storage.Batch) error {
					if r%10 == 0 {
						keptMu.Lock()
						kept = append(kept, b)
						keptMu.Unlock()
					}
					return advCheck(b)
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, b := range kept {
		require.NoError(t, advCheck(b))
	}
	for _, tp := range tps {
		for _, b := range l.Batches(tp) {
			require.NoError(t, advCheck(b))
		}
	}
}

// fn's error stops the visit midway and is returned as it is.
func TestLocalLogAdversaryEachBatchError(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	l := memstore.NewLocalLog()
	for i := range 10 {
		require.NoError(t, l.Append(ctx, tp, []storage.Batch{advBatch(1, int64(i*10), 10, 0)}))
	}
	errStop := fmt.Errorf("wrapped: %w", errors.New("stop"))
	calls := 0
	err := l.EachBatch(tp, 0, func(b storage.Batch) error {
		calls++
		if b.FirstOffset == 40 {
			return errStop
		}
		return nil
	})
	assert.Same(t, errStop, err)
	assert.Equal(t, 5, calls, "no call after the error")
}

// fn may call back into the log — Append, AppendOne, Truncate, EachBatch,
// Read, Batches of the same partition — without deadlock, and the visit
// goes on over the batches as they were when it began.
func TestLocalLogAdversaryEachBatchReentrant(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	other := metadata.TopicPartition{Topic: "t", Partition: 1}
	l := memstore.NewLocalLog()
	for i := range 6 {
		require.NoError(t, l.Append(ctx, tp, []storage.Batch{advBatch(1, int64(i*10), 10, 0)}))
	}
	want := cloneBatches(l.Batches(tp))
	var seen []storage.Batch
	err := l.EachBatch(tp, 0, func(b storage.Batch) error {
		seen = append(seen, b)
		end, err := l.EndOffset(tp)
		if err != nil {
			return err
		}
		switch b.FirstOffset {
		case 0:
			if err := l.Append(ctx, tp, []storage.Batch{advBatch(1, end, 10, 1)}); err != nil {
				return err
			}
		case 10:
			if err := l.Truncate(ctx, tp, 20); err != nil {
				return err
			}
			if _, err := l.AppendOne(ctx, tp, advBatch(2, 20, 5, 2)); err != nil {
				return err
			}
		case 20:
			inner := 0
			if err := l.EachBatch(tp, 0, func(storage.Batch) error { inner++; return nil }); err != nil {
				return err
			}
			if inner != 3 {
				return fmt.Errorf("inner visit saw %d batches, want 3", inner)
			}
			if _, err := l.Read(ctx, tp, 0, 1); err != nil {
				return err
			}
			_ = l.Batches(tp)
			if err := l.Append(ctx, other, []storage.Batch{advBatch(1, 0, 3, 3)}); err != nil {
				return err
			}
		case 30:
			if err := l.Truncate(ctx, tp, 0); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, want, seen, "the visit's batches are those of when it began, unchanged")
	assert.Empty(t, l.Batches(tp))
	assert.Len(t, l.Batches(other), 1)
}

// from below the first offset, inside a batch, on its last offset, at and
// past the end, and negative.
func TestLocalLogAdversaryEachBatchFrom(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	l := memstore.NewLocalLog()
	require.NoError(t, l.Truncate(ctx, tp, 100)) // the log starts over at 100
	assert.Empty(t, eachAll(t, l, tp, 100), "empty log")
	assert.Empty(t, eachAll(t, l, tp, -1), "empty log, negative from")
	for i := range 3 {
		require.NoError(t, l.Append(ctx, tp, []storage.Batch{advBatch(1, int64(100+i*10), 10, 0)}))
	}
	firsts := func(bs []storage.Batch) []int64 {
		var out []int64
		for _, b := range bs {
			out = append(out, b.FirstOffset)
		}
		return out
	}
	for _, c := range []struct {
		from int64
		want []int64
	}{
		{-1 << 62, []int64{100, 110, 120}},
		{-1, []int64{100, 110, 120}},
		{0, []int64{100, 110, 120}},
		{99, []int64{100, 110, 120}},
		{100, []int64{100, 110, 120}},
		{105, []int64{100, 110, 120}},
		{109, []int64{100, 110, 120}},
		{110, []int64{110, 120}},
		{129, []int64{120}},
		{130, nil},
		{131, nil},
		{1 << 62, nil},
	} {
		assert.Equal(t, c.want, firsts(eachAll(t, l, tp, c.from)), "from %d", c.from)
	}
	assert.Empty(t, eachAll(t, l, metadata.TopicPartition{Topic: "none"}, 0), "unknown partition")
}

// A failed Append — a later batch not contiguous, of a lower epoch or
// invalid — leaves the log as it was, and uses no block space that a later
// batch then shares with it.
func TestLocalLogAdversaryFailedAppendAllOrNone(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	l := memstore.NewLocalLog()
	require.NoError(t, l.Append(ctx, tp, []storage.Batch{advBatch(2, 0, 100, 0)}))
	good := advBatch(3, 100, 60<<10, 1)
	bad := []struct {
		name  string
		later storage.Batch
		want  error
		alone bool // later fails on its own too
	}{
		{"gap", advBatch(3, 100+60<<10+1, 10, 2), storage.ErrNotContiguous, true},
		{"overlap", advBatch(3, 100, 10, 2), storage.ErrNotContiguous, false},
		{"lower epoch", advBatch(2, 100+60<<10, 10, 2), storage.ErrNotContiguous, false},
		{"negative epoch", advBatch(-1, 100+60<<10, 10, 2), storage.ErrInvalidBatch, true},
		{"last before first", storage.Batch{Epoch: 3, FirstOffset: 100 + 60<<10, LastOffset: 99 + 60<<10}, storage.ErrInvalidBatch, true},
		{"below the log's epoch", advBatch(1, 100, 10, 2), storage.ErrNotContiguous, true},
	}
	for _, c := range bad {
		before := l.Batches(tp)
		epochs, err := l.Epochs(tp)
		require.NoError(t, err)
		end, err := l.EndOffset(tp)
		require.NoError(t, err)

		require.ErrorIs(t, l.Append(ctx, tp, []storage.Batch{good, c.later}), c.want, c.name)
		if c.alone {
			_, err = l.AppendOne(ctx, tp, c.later)
			require.ErrorIs(t, err, c.want, c.name)
		}

		assert.Equal(t, before, l.Batches(tp), c.name)
		gotEpochs, err := l.Epochs(tp)
		require.NoError(t, err)
		assert.Equal(t, epochs, gotEpochs, c.name)
		gotEnd, err := l.EndOffset(tp)
		require.NoError(t, err)
		assert.Equal(t, end, gotEnd, c.name)
	}
	// What follows the failures fills the blocks as if they never were.
	kept, err := l.AppendOne(ctx, tp, good)
	require.NoError(t, err)
	next := kept.LastOffset + 1
	for i := range 20 {
		b := advBatch(3, next, 30<<10, int64(10+i))
		require.NoError(t, l.Append(ctx, tp, []storage.Batch{b}))
		next = b.LastOffset + 1
	}
	require.NoError(t, advCheck(kept))
	for _, b := range l.Batches(tp) {
		require.NoError(t, advCheck(b))
	}
}

// Batches of many partitions interleave in the same blocks; truncating
// and rewriting one partition leaves every other's bytes as they were.
func TestLocalLogAdversaryInterleavedPartitions(t *testing.T) {
	ctx := context.Background()
	l := memstore.NewLocalLog()
	const parts = 17
	tp := func(i int) metadata.TopicPartition { return metadata.TopicPartition{Topic: "t", Partition: int32(i)} }
	next := make([]int64, parts)
	model := make([][]storage.Batch, parts)
	for r := range 40 {
		for i := range parts {
			n := []int{1, 100, 3000, 64<<10 - 1, 17}[(r+i)%5]
			b := advBatch(1, next[i], n, int64(r))
			require.NoError(t, l.Append(ctx, tp(i), []storage.Batch{b}))
			model[i] = append(model[i], b)
			next[i] = b.LastOffset + 1
		}
	}
	visited := make([][]storage.Batch, parts)
	for i := range parts {
		visited[i] = eachAll(t, l, tp(i), 0)
	}
	for round := range 5 {
		victim := (round * 5) % parts
		cut := model[victim][len(model[victim])/2]
		require.NoError(t, l.Truncate(ctx, tp(victim), cut.FirstOffset))
		model[victim] = model[victim][:len(model[victim])/2]
		next[victim] = cut.FirstOffset
		for r := range 30 {
			b := advBatch(2, next[victim], 1+r*1000, int64(500+round*100+r))
			require.NoError(t, l.Append(ctx, tp(victim), []storage.Batch{b}))
			model[victim] = append(model[victim], b)
			next[victim] = b.LastOffset + 1
		}
		for i := range parts {
			assert.Equal(t, model[i], l.Batches(tp(i)), "partition %d after truncating %d", i, victim)
		}
	}
	for i := range parts {
		for _, b := range visited[i] {
			require.NoError(t, advCheck(b))
		}
	}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A long cycle of appends and truncations on one partition holds what the
// partition holds, plus a block or two, not what it was ever given.
func TestLocalLogAdversaryMemoryBounded(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	l := memstore.NewLocalLog()
	base := heapInUse()
	buf := advBatch(1, 0, 40<<10, 0).Data
	next := int64(0)
	start := int64(0)
	for c := range 10000 {
		// 3 batches of 1 B to 40 KiB (10k cycles append ~600 MB in all),
		// then back to the start of the log or of its second batch.
		var firsts []int64
		for k := range 3 {
			n := 1 + (c*7919+k*104729)%(40<<10)
			b := storage.Batch{Epoch: 1, FirstOffset: next, LastOffset: next + int64(n) - 1, Data: buf[:n]}
			require.NoError(t, l.Append(ctx, tp, []storage.Batch{b}))
			firsts = append(firsts, next)
			next = b.LastOffset + 1
		}
		cut := start
		if c%2 == 1 {
			cut = firsts[1]
		}
		require.NoError(t, l.Truncate(ctx, tp, cut))
		next = cut
		if c%100 == 99 {
			// Now and then start over at the end, as a new replica
			// does: empty the log, then start it at next.
			require.NoError(t, l.Truncate(ctx, tp, start))
			require.NoError(t, l.Truncate(ctx, tp, next))
			start = next
		}
	}
	grown := int64(heapInUse()) - int64(base)
	t.Logf("heap grew by %d KiB", grown>>10)
	assert.Less(t, grown, int64(4<<20), "heap after 10k append/truncate cycles")
	runtime.KeepAlive(l)
}

// A batch the log keeps holds its whole block: a small batch kept between
// truncated ones pins a block of up to 1 MiB. This bounds that cost (one
// block per batch kept, at worst) and logs it against the bytes kept.
func TestLocalLogAdversaryKeptBatchesPinBlocks(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	l := memstore.NewLocalLog()
	base := heapInUse()
	buf := make([]byte, 200<<10)
	const kept = 50
	next := int64(0)
	for range kept {
		// One small batch stays; 1 MiB after it is appended and truncated.
		require.NoError(t, l.Append(ctx, tp, []storage.Batch{{Epoch: 1, FirstOffset: next, LastOffset: next, Data: buf[:100]}}))
		next++
		cut := next
		for range 5 {
			require.NoError(t, l.Append(ctx, tp, []storage.Batch{{Epoch: 1, FirstOffset: next, LastOffset: next, Data: buf}}))
			next++
		}
		require.NoError(t, l.Truncate(ctx, tp, cut))
		next = cut
	}
	grown := int64(heapInUse()) - int64(base)
	t.Logf("%d batches of 100 B kept; heap grew by %d KiB", kept, grown>>10)
	assert.LessOrEqual(t, grown, int64(kept+2)<<20)
	runtime.KeepAlive(l)
}
