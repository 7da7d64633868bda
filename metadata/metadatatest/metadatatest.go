package metadatatest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

const (
	// partitions is the partition count of the logs most subtests use: more
	// than one, so that a log that ignores the partition argument fails.
	partitions = 3
	// waitTimeout bounds every loop that waits for something the suite
	// knows will happen; reaching it is a failure, never a pass.
	waitTimeout = 10 * time.Second
	// pollTimeout is the context given to a Read that is expected to find
	// nothing: long enough for a long poll to start, short enough to keep
	// the suite fast.
	pollTimeout = 100 * time.Millisecond
	// settle is how long the suite sleeps before an action it wants a
	// blocked reader to observe. The subtests pass whether or not the
	// reader was already blocked; the pause only makes the interesting
	// interleaving likely.
	settle = 50 * time.Millisecond
)

// Run checks that the logs newLog creates behave as [metadata.Log] promises.
// newLog returns a fresh, empty log with the given number of partitions;
// each subtest calls it once and closes the log when it ends.
func Run(t *testing.T, newLog func(t *testing.T, partitions int32) metadata.Log) {
	t.Helper()
	h := harness{newLog: newLog}
	t.Run("AppendAndReadBackInOrder", h.appendAndReadBackInOrder)
	t.Run("ReadFromMiddleOffset", h.readFromMiddleOffset)
	t.Run("ReadRespectsMax", h.readRespectsMax)
	t.Run("ReadAtHighWatermarkIsEmpty", h.readAtHighWatermarkIsEmpty)
	t.Run("WatermarksFollowAppendsAndTrims", h.watermarksFollowAppendsAndTrims)
	t.Run("TrimAtOrBelowLowWatermarkIsNoOp", h.trimAtOrBelowLowWatermarkIsNoOp)
	t.Run("TrimPastHighWatermarkFails", h.trimPastHighWatermarkFails)
	t.Run("ReadBelowTrimPointFails", h.readBelowTrimPointFails)
	t.Run("PartitionsAreIndependent", h.partitionsAreIndependent)
	t.Run("UnknownPartition", h.unknownPartition)
	t.Run("ConcurrentAppenders", h.concurrentAppenders)
	t.Run("BlockedReadWakesOnAppend", h.blockedReadWakesOnAppend)
	t.Run("CancelledContext", h.cancelledContext)
	t.Run("MethodsAfterClose", h.methodsAfterClose)
	t.Run("CloseWakesBlockedRead", h.closeWakesBlockedRead)
	t.Run("AppendDoesNotRetainValue", h.appendDoesNotRetainValue)
}

type harness struct {
	newLog func(t *testing.T, partitions int32) metadata.Log
}

// open creates a log through the implementation's constructor and closes it
// when the subtest ends. Subtests that close the log themselves make the
// cleanup's Close return ErrClosed, which is expected.
func (h harness) open(t *testing.T, n int32) metadata.Log {
	t.Helper()
	log := h.newLog(t, n)
	require.NotNil(t, log, "newLog returned a nil log")
	require.Equal(t, n, log.Partitions(), "Partitions() of a log created with %d partitions", n)
	t.Cleanup(func() {
		if err := log.Close(); err != nil && !errors.Is(err, metadata.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return log
}

// testContext bounds a subtest's calls so that an implementation that hangs
// fails the subtest instead of the whole test binary.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// value returns a distinct payload for record i of partition p. Payloads
// differ in length and contain zero and 0xff bytes, so that an implementation
// that truncates, pads or treats values as text is caught.
func value(p int32, i int) []byte {
	v := fmt.Appendf(nil, "p%d/r%d:", p, i)
	for j := 0; j < i%7; j++ {
		v = append(v, 0x00, 0xff, byte(j))
	}
	return v
}

// appendValues appends n values to partition p and checks that they got the
// dense offsets starting at the partition's high watermark.
func appendValues(t *testing.T, ctx context.Context, log metadata.Log, p int32, n int) [][]byte {
	t.Helper()
	_, high, err := log.Watermarks(ctx, p)
	require.NoError(t, err, "Watermarks(partition %d)", p)
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = value(p, int(high)+i)
		off, err := log.Append(ctx, p, vals[i])
		require.NoError(t, err, "Append(partition %d, record %d)", p, i)
		require.Equal(t, high+int64(i), off, "offset of record %d appended to partition %d", i, p)
	}
	return vals
}

// readN reads exactly n records of partition p starting at from, calling Read
// with at most max records per call, and checks that each call respects max
// and that the records carry the partition and dense offsets. Read may
// return fewer records than available, so readN loops until it has n.
func readN(t *testing.T, ctx context.Context, log metadata.Log, p int32, from int64, n, max int) []metadata.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	out := make([]metadata.Record, 0, n)
	for len(out) < n {
		require.NoError(t, ctx.Err(), "reading %d records of partition %d from %d: got %d", n, p, from, len(out))
		next := from + int64(len(out))
		recs, err := log.Read(ctx, p, next, max)
		require.NoError(t, err, "Read(partition %d, from %d, max %d) with %d of %d records read", p, next, max, len(out), n)
		require.LessOrEqual(t, len(recs), max, "Read(partition %d, from %d, max %d) returned too many records", p, next, max)
		for i, r := range recs {
			require.Equal(t, p, r.Partition, "partition of record %d returned by Read(partition %d, from %d)", i, p, next)
			require.Equal(t, next+int64(i), r.Offset, "offset of record %d returned by Read(partition %d, from %d)", i, p, next)
		}
		out = append(out, recs...)
	}
	require.Len(t, out, n, "records read from partition %d starting at %d", p, from)
	return out
}

// values extracts the payloads of recs.
func values(recs []metadata.Record) [][]byte {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		out[i] = r.Value
	}
	return out
}

// requireNothingToRead checks the outcome of a Read at the high watermark
// made with a context that expires after pollTimeout: either the
// implementation gave up waiting by itself (empty, nil error) or it waited
// until the context expired.
func requireNothingToRead(t *testing.T, log metadata.Log, p int32, from int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	recs, err := log.Read(ctx, p, from, 10)
	if err != nil {
		require.ErrorIs(t, err, context.DeadlineExceeded,
			"Read(partition %d, from %d) at the high watermark: want an empty result or the context's error", p, from)
		return
	}
	require.Empty(t, recs, "Read(partition %d, from %d) at the high watermark", p, from)
}

func requireWatermarks(t *testing.T, ctx context.Context, log metadata.Log, p int32, wantLow, wantHigh int64) {
	t.Helper()
	low, high, err := log.Watermarks(ctx, p)
	require.NoError(t, err, "Watermarks(partition %d)", p)
	require.Equal(t, wantLow, low, "low watermark of partition %d", p)
	require.Equal(t, wantHigh, high, "high watermark of partition %d", p)
}

func (h harness) appendAndReadBackInOrder(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	const n = 20
	// Interleave the partitions so that a log sharing one offset counter
	// across partitions gives non-dense offsets.
	want := make([][][]byte, partitions)
	for i := range n {
		for p := range int32(partitions) {
			want[p] = append(want[p], appendValues(t, ctx, log, p, 1)...)
			require.Len(t, want[p], i+1)
		}
	}
	for p := range int32(partitions) {
		got := readN(t, ctx, log, p, 0, n, 100)
		require.Equal(t, want[p], values(got), "values of partition %d", p)
	}
}

func (h harness) readFromMiddleOffset(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	want := appendValues(t, ctx, log, 1, 10)
	got := readN(t, ctx, log, 1, 4, 6, 100)
	require.Equal(t, want[4:], values(got))
	got = readN(t, ctx, log, 1, 9, 1, 100)
	require.Equal(t, want[9:], values(got))
}

func (h harness) readRespectsMax(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	want := appendValues(t, ctx, log, 0, 10)
	for _, max := range []int{1, 3, 10, 11} {
		// readN fails if any single Read returns more than max records.
		got := readN(t, ctx, log, 0, 0, 10, max)
		require.Equal(t, want, values(got), "values read with max %d", max)
	}
	recs, err := log.Read(ctx, 0, 2, 1)
	require.NoError(t, err)
	require.Len(t, recs, 1, "Read(max 1) with records available")
	require.Equal(t, want[2], recs[0].Value)
}

func (h harness) readAtHighWatermarkIsEmpty(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	requireNothingToRead(t, log, 0, 0)
	appendValues(t, ctx, log, 0, 5)
	requireNothingToRead(t, log, 0, 5)
}

func (h harness) watermarksFollowAppendsAndTrims(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	requireWatermarks(t, ctx, log, 2, 0, 0)
	appendValues(t, ctx, log, 2, 5)
	requireWatermarks(t, ctx, log, 2, 0, 5)
	require.NoError(t, log.Trim(ctx, 2, 2))
	requireWatermarks(t, ctx, log, 2, 2, 5)
	// Trimming at the high watermark empties the partition but keeps its
	// offsets: the next record still gets the next offset.
	require.NoError(t, log.Trim(ctx, 2, 5))
	requireWatermarks(t, ctx, log, 2, 5, 5)
	requireNothingToRead(t, log, 2, 5)
	want := appendValues(t, ctx, log, 2, 1)
	requireWatermarks(t, ctx, log, 2, 5, 6)
	got := readN(t, ctx, log, 2, 5, 1, 10)
	require.Equal(t, want, values(got))
}

func (h harness) trimAtOrBelowLowWatermarkIsNoOp(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	want := appendValues(t, ctx, log, 0, 5)
	require.NoError(t, log.Trim(ctx, 0, 3))
	for _, before := range []int64{3, 2, 0, -1, math.MinInt64} {
		require.NoError(t, log.Trim(ctx, 0, before), "Trim(before %d) with low watermark 3", before)
		requireWatermarks(t, ctx, log, 0, 3, 5)
	}
	got := readN(t, ctx, log, 0, 3, 2, 10)
	require.Equal(t, want[3:], values(got))
}

func (h harness) trimPastHighWatermarkFails(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	err := log.Trim(ctx, 1, 1)
	require.ErrorIs(t, err, metadata.ErrOffsetOutOfRange, "Trim(before 1) of an empty partition")
	requireWatermarks(t, ctx, log, 1, 0, 0)

	want := appendValues(t, ctx, log, 1, 3)
	for _, before := range []int64{4, 100, math.MaxInt64} {
		err := log.Trim(ctx, 1, before)
		require.ErrorIs(t, err, metadata.ErrOffsetOutOfRange, "Trim(before %d) with high watermark 3", before)
		requireWatermarks(t, ctx, log, 1, 0, 3)
	}
	got := readN(t, ctx, log, 1, 0, 3, 10)
	require.Equal(t, want, values(got), "records after a failed Trim")
}

func (h harness) readBelowTrimPointFails(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	want := appendValues(t, ctx, log, 2, 5)
	require.NoError(t, log.Trim(ctx, 2, 3))
	for _, from := range []int64{0, 2, -1} {
		recs, err := log.Read(ctx, 2, from, 10)
		require.ErrorIs(t, err, metadata.ErrOffsetOutOfRange, "Read(from %d) with low watermark 3", from)
		require.Empty(t, recs, "records returned with an error")
	}
	got := readN(t, ctx, log, 2, 3, 2, 10)
	require.Equal(t, want[3:], values(got))
}

func (h harness) partitionsAreIndependent(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	want0 := appendValues(t, ctx, log, 0, 5)
	want1 := appendValues(t, ctx, log, 1, 2)
	require.NoError(t, log.Trim(ctx, 0, 4))

	requireWatermarks(t, ctx, log, 0, 4, 5)
	requireWatermarks(t, ctx, log, 1, 0, 2)
	requireWatermarks(t, ctx, log, 2, 0, 0)
	require.Equal(t, want0[4:], values(readN(t, ctx, log, 0, 4, 1, 10)))
	require.Equal(t, want1, values(readN(t, ctx, log, 1, 0, 2, 10)))
	requireNothingToRead(t, log, 2, 0)
	// Partition 1 has offset 2 as its high watermark even though
	// partition 0 holds records beyond it.
	requireNothingToRead(t, log, 1, 2)
}

func (h harness) unknownPartition(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	appendValues(t, ctx, log, 0, 1)
	for _, p := range []int32{-1, partitions, partitions + 7, math.MinInt32, math.MaxInt32} {
		_, err := log.Append(ctx, p, []byte("x"))
		assert.ErrorIs(t, err, metadata.ErrUnknownPartition, "Append(partition %d)", p)
		_, err = log.Read(ctx, p, 0, 10)
		assert.ErrorIs(t, err, metadata.ErrUnknownPartition, "Read(partition %d)", p)
		_, _, err = log.Watermarks(ctx, p)
		assert.ErrorIs(t, err, metadata.ErrUnknownPartition, "Watermarks(partition %d)", p)
		err = log.Trim(ctx, p, 0)
		assert.ErrorIs(t, err, metadata.ErrUnknownPartition, "Trim(partition %d)", p)
	}
	requireWatermarks(t, ctx, log, 0, 0, 1)
}

func (h harness) concurrentAppenders(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	const (
		writers   = 8
		perWriter = 50
		p         = 1
	)
	type result struct {
		offsets []int64
		err     error
	}
	results := make([]result, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				off, err := log.Append(ctx, p, fmt.Appendf(nil, "w%d/%d", w, i))
				if err != nil {
					results[w].err = fmt.Errorf("writer %d, record %d: %w", w, i, err)
					return
				}
				results[w].offsets = append(results[w].offsets, off)
			}
		})
	}
	wg.Wait()
	for w, r := range results {
		require.NoError(t, r.err)
		require.Len(t, r.offsets, perWriter, "offsets returned to writer %d", w)
	}
	requireWatermarks(t, ctx, log, p, 0, writers*perWriter)

	recs := readN(t, ctx, log, p, 0, writers*perWriter, 64)
	byValue := make(map[string]int64, len(recs))
	for _, r := range recs {
		prev, dup := byValue[string(r.Value)]
		require.False(t, dup, "value %q stored at offsets %d and %d", r.Value, prev, r.Offset)
		byValue[string(r.Value)] = r.Offset
	}
	for w, r := range results {
		for i, off := range r.offsets {
			v := fmt.Sprintf("w%d/%d", w, i)
			stored, ok := byValue[v]
			require.True(t, ok, "value %q acknowledged at offset %d but not stored", v, off)
			require.Equal(t, off, stored, "offset of value %q: returned by Append vs read back", v)
			if i > 0 {
				require.Greater(t, off, r.offsets[i-1], "writer %d: record %d stored before record %d", w, i, i-1)
			}
		}
	}
	requireWatermarks(t, ctx, log, 0, 0, 0)
}

// readUntilRecord calls Read at from until it returns a record or an error,
// treating empty results as the end of one long poll.
func readUntilRecord(ctx context.Context, log metadata.Log, p int32, from int64) ([]metadata.Record, error) {
	for {
		// Guard against an implementation that ignores ctx and returns
		// empty results at once: the loop would otherwise never end.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		recs, err := log.Read(ctx, p, from, 10)
		if err != nil || len(recs) > 0 {
			return recs, err
		}
	}
}

type readResult struct {
	recs []metadata.Record
	err  error
}

func (h harness) blockedReadWakesOnAppend(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	done := make(chan readResult, 1)
	go func() {
		recs, err := readUntilRecord(ctx, log, 2, 0)
		done <- readResult{recs, err}
	}()
	time.Sleep(settle)
	// A record on another partition must not satisfy the reader.
	appendValues(t, ctx, log, 1, 1)
	time.Sleep(settle)
	want := appendValues(t, ctx, log, 2, 1)

	select {
	case r := <-done:
		require.NoError(t, r.err, "Read waiting on an empty partition")
		require.Len(t, r.recs, 1)
		require.Equal(t, int32(2), r.recs[0].Partition)
		require.Equal(t, int64(0), r.recs[0].Offset)
		require.Equal(t, want[0], r.recs[0].Value)
	case <-time.After(waitTimeout):
		t.Fatalf("Read on partition 2 did not return the appended record within %v", waitTimeout)
	}
}

func (h harness) cancelledContext(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	appendValues(t, ctx, log, 0, 3)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	_, err := log.Append(cancelled, 0, []byte("x"))
	require.ErrorIs(t, err, context.Canceled, "Append")
	_, err = log.Read(cancelled, 0, 0, 10)
	require.ErrorIs(t, err, context.Canceled, "Read with records available")
	_, err = log.Read(cancelled, 0, 3, 10)
	require.ErrorIs(t, err, context.Canceled, "Read at the high watermark")
	_, _, err = log.Watermarks(cancelled, 0)
	require.ErrorIs(t, err, context.Canceled, "Watermarks")
	err = log.Trim(cancelled, 0, 2)
	require.ErrorIs(t, err, context.Canceled, "Trim")

	// A call refused for its context changed nothing.
	requireWatermarks(t, ctx, log, 0, 0, 3)
}

func (h harness) methodsAfterClose(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	appendValues(t, ctx, log, 0, 3)
	require.NoError(t, log.Close())

	_, err := log.Append(ctx, 0, []byte("x"))
	require.ErrorIs(t, err, metadata.ErrClosed, "Append after Close")
	_, err = log.Read(ctx, 0, 0, 10)
	require.ErrorIs(t, err, metadata.ErrClosed, "Read after Close")
	_, _, err = log.Watermarks(ctx, 0)
	require.ErrorIs(t, err, metadata.ErrClosed, "Watermarks after Close")
	err = log.Trim(ctx, 0, 1)
	require.ErrorIs(t, err, metadata.ErrClosed, "Trim after Close")
	require.ErrorIs(t, log.Close(), metadata.ErrClosed, "second Close")
}

func (h harness) closeWakesBlockedRead(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	done := make(chan readResult, 1)
	go func() {
		recs, err := readUntilRecord(ctx, log, 0, 0)
		done <- readResult{recs, err}
	}()
	time.Sleep(settle)
	require.NoError(t, log.Close())

	select {
	case r := <-done:
		require.ErrorIs(t, r.err, metadata.ErrClosed, "Read waiting on an empty partition when the log was closed")
		require.Empty(t, r.recs)
	case <-time.After(waitTimeout):
		t.Fatalf("Read waiting on an empty partition did not return within %v of Close", waitTimeout)
	}
}

func (h harness) appendDoesNotRetainValue(t *testing.T) {
	ctx := testContext(t)
	log := h.open(t, partitions)
	// A caller that reuses one buffer for successive messages, as an
	// encoder with a pooled buffer does.
	buf := []byte("original")
	_, err := log.Append(ctx, 0, buf)
	require.NoError(t, err)
	copy(buf, "mutated!")
	_, err = log.Append(ctx, 0, buf)
	require.NoError(t, err)
	copy(buf, "clobber!")

	got := readN(t, ctx, log, 0, 0, 2, 10)
	require.Equal(t, [][]byte{[]byte("original"), []byte("mutated!")}, values(got))
}
