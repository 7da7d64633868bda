package storagetest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// LocalLogHarness makes the logs RunLocalLog checks.
type LocalLogHarness struct {
	// New returns a new log in which every partition is empty. It is
	// called once per subtest, with that subtest's t: it fails t if the
	// log cannot be made and registers any cleanup with t.Cleanup.
	// Required.
	New func(ctx context.Context, t *testing.T) storage.LocalLog
	// Reopen simulates a broker restart: it shuts down l, which New or an
	// earlier Reopen returned, cleanly, and opens the same storage again
	// as a restarted broker would. No call on l is in flight when Reopen is
	// called, and the suite does not use l afterwards. Required unless
	// InMemoryOnly is set.
	Reopen func(ctx context.Context, t *testing.T, l storage.LocalLog) storage.LocalLog
	// InMemoryOnly says the log keeps nothing across a restart, as
	// memstore's, so there is nothing to reopen: the suite leaves out the
	// cases that check what survives a restart, and says so in the test
	// log. A broker's own log must not set it: a restarted follower
	// rebuilds its fencing state from the log's end offset and epochs.
	InMemoryOnly bool
	// MakeBatch returns the batch of records first to last at epoch as the
	// log stores it, for logs that parse their batches (a Kafka broker's
	// expects record batches in Kafka's format). Batches with different
	// arguments must differ in Data, and their sizes should vary. Default:
	// opaque bytes, 40 to 160 long.
	MakeBatch func(epoch int32, first, last int64) storage.Batch
}

// RunLocalLog runs the conformance suite for storage.LocalLog against the
// logs h makes, one subtest per behaviour of the contract.
func RunLocalLog(t *testing.T, h LocalLogHarness) {
	t.Helper()
	require.NotNil(t, h.New, "storagetest: LocalLogHarness.New is required")
	require.True(t, h.InMemoryOnly != (h.Reopen != nil), "storagetest: set exactly one of LocalLogHarness.Reopen and InMemoryOnly")
	if h.MakeBatch == nil {
		h.MakeBatch = opaqueBatch
	}
	cases := []struct {
		name string
		fn   func(t *testing.T, e *logEnv)
	}{
		{"Empty", testLogEmpty},
		{"AppendAndRead", testLogAppendAndRead},
		{"AppendNotContiguous", testLogAppendNotContiguous},
		{"AppendInvalidBatch", testLogAppendInvalidBatch},
		{"AppendEpochBackwards", testLogAppendEpochBackwards},
		{"AppendNothing", testLogAppendNothing},
		{"AppendDoesNotRetainData", testLogAppendDoesNotRetainData},
		{"ReadFromInsideBatch", testLogReadFromInsideBatch},
		{"ReadMaxBytes", testLogReadMaxBytes},
		{"ReadAtOrAfterEnd", testLogReadAtOrAfterEnd},
		{"ReadBelowStart", testLogReadBelowStart},
		{"ReadResultNotAliased", testLogReadResultNotAliased},
		{"Epochs", testLogEpochs},
		{"TruncateAtBatchBoundary", testLogTruncateAtBatchBoundary},
		{"TruncateInsideBatch", testLogTruncateInsideBatch},
		{"TruncatePastEnd", testLogTruncatePastEnd},
		{"TruncateToStart", testLogTruncateToStart},
		{"TruncateBelowStart", testLogTruncateBelowStart},
		{"TruncateNegative", testLogTruncateNegative},
		{"TruncateEmptyStartsOver", testLogTruncateEmptyStartsOver},
		{"PartitionsIndependent", testLogPartitionsIndependent},
		{"Concurrent", testLogConcurrent},
		{"ContextCanceled", testLogContextCanceled},
	}
	if h.InMemoryOnly {
		t.Log("storagetest: InMemoryOnly: not checking what the log keeps across a restart")
	} else {
		cases = append(cases, []struct {
			name string
			fn   func(t *testing.T, e *logEnv)
		}{
			{"ReopenKeepsLog", testLogReopenKeepsLog},
			{"ReopenKeepsTruncation", testLogReopenKeepsTruncation},
			{"ReopenKeepsStartOffset", testLogReopenKeepsStartOffset},
		}...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &logEnv{ctx: t.Context(), h: h}
			e.log = h.New(e.ctx, t)
			require.NotNil(t, e.log, "harness returned a nil log")
			c.fn(t, e)
		})
	}
}

// The partitions the suite uses. A broker's log must treat them as
// partitions it hosts, empty until written.
var (
	tpA = metadata.TopicPartition{Topic: "storagetest-a", Partition: 0}
	tpB = metadata.TopicPartition{Topic: "storagetest-a", Partition: 1}
	tpC = metadata.TopicPartition{Topic: "storagetest-b", Partition: 0}
)

// logEnv is one subtest's log.
type logEnv struct {
	ctx context.Context
	h   LocalLogHarness
	log storage.LocalLog
}

// opaqueBatch is the default MakeBatch: deterministic bytes whose content
// and length depend on all three arguments.
func opaqueBatch(epoch int32, first, last int64) storage.Batch {
	seed := uint64(epoch)<<48 ^ uint64(first)<<24 ^ uint64(last)
	return storage.Batch{
		Epoch: epoch, FirstOffset: first, LastOffset: last,
		MaxTimestamp: 1_700_000_000_000 + last,
		Data:         body(seed, 40+int(seed%121)),
	}
}

// b makes the batch of records first to last at epoch.
func (e *logEnv) b(epoch int32, first, last int64) storage.Batch {
	return e.h.MakeBatch(epoch, first, last)
}

// append appends batches to tp and fails the test if the log refuses.
func (e *logEnv) append(t *testing.T, tp metadata.TopicPartition, batches ...storage.Batch) {
	t.Helper()
	require.NoError(t, e.log.Append(e.ctx, tp, batches), "Append to %s of %s", tp, spans(batches))
}

// reopen restarts the log.
func (e *logEnv) reopen(t *testing.T) {
	t.Helper()
	e.log = e.h.Reopen(e.ctx, t, e.log)
	require.NotNil(t, e.log, "Reopen returned a nil log")
}

// logState is what the contract makes observable about one partition.
type logState struct {
	End     int64
	Epochs  []storage.EpochEntry
	Batches []storage.Batch
}

// state reads tp's end offset, epochs and every batch from offset from on,
// checking on the way that Read returns consecutive whole batches that
// continue from where the previous read stopped.
func (e *logEnv) state(t *testing.T, tp metadata.TopicPartition, from int64) logState {
	t.Helper()
	var s logState
	var err error
	s.End, err = e.log.EndOffset(tp)
	require.NoError(t, err, "EndOffset of %s", tp)
	s.Epochs, err = e.log.Epochs(tp)
	require.NoError(t, err, "Epochs of %s", tp)
	if len(s.Epochs) == 0 {
		s.Epochs = nil
	}
	for at := from; at < s.End; {
		got, err := e.log.Read(e.ctx, tp, at, 1<<20)
		require.NoError(t, err, "Read %s from %d", tp, at)
		require.NotEmpty(t, got, "Read %s from %d, below its end offset %d, returned no batches", tp, at, s.End)
		requireConsecutive(t, got, "Read %s from %d", tp, at)
		require.Equal(t, at, got[0].FirstOffset, "Read %s from %d, where the previous batch ended, returned %s", tp, at, spans(got))
		s.Batches = append(s.Batches, got...)
		at = got[len(got)-1].LastOffset + 1
	}
	if n := len(s.Batches); n > 0 {
		require.Equal(t, s.End, s.Batches[n-1].LastOffset+1, "%s: the last batch read does not end at the end offset", tp)
	}
	return s
}

// requireLog checks that tp holds exactly batches, ends at end and has
// epochs.
func (e *logEnv) requireLog(t *testing.T, tp metadata.TopicPartition, end int64, epochs []storage.EpochEntry, batches ...storage.Batch) {
	t.Helper()
	from := end
	if len(batches) > 0 {
		from = batches[0].FirstOffset
	}
	if len(epochs) == 0 {
		epochs = nil
	}
	got := e.state(t, tp, from)
	require.Equal(t, end, got.End, "EndOffset of %s", tp)
	require.Equal(t, epochs, got.Epochs, "Epochs of %s", tp)
	requireSameBatches(t, batches, got.Batches, tp.String())
}

// requireUnchanged checks that tp is still as before was read from from.
func (e *logEnv) requireUnchanged(t *testing.T, tp metadata.TopicPartition, from int64, before logState, what string) {
	t.Helper()
	after := e.state(t, tp, from)
	require.Equal(t, before.End, after.End, "%s changed the end offset", what)
	require.Equal(t, before.Epochs, after.Epochs, "%s changed the epochs", what)
	requireSameBatches(t, before.Batches, after.Batches, what+" changed the batches")
}

// requireSameBatches compares batches, naming the first that differs.
func requireSameBatches(t *testing.T, want, got []storage.Batch, what string) {
	t.Helper()
	require.Equal(t, spans(want), spans(got), "%s: batches", what)
	for i := range want {
		require.Equal(t, want[i], got[i], "%s: batch %d (offsets %d-%d) differs from what was appended", what, i, want[i].FirstOffset, want[i].LastOffset)
	}
}

// requireConsecutive checks that batches follow each other without gaps.
func requireConsecutive(t *testing.T, batches []storage.Batch, msg string, args ...any) {
	t.Helper()
	for i := 1; i < len(batches); i++ {
		require.Equal(t, batches[i-1].LastOffset+1, batches[i].FirstOffset, "%s: batches not consecutive: %s", fmt.Sprintf(msg, args...), spans(batches))
	}
}

// spans formats batches as epoch:first-last, for messages.
func spans(batches []storage.Batch) string {
	s := "["
	for i, b := range batches {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("e%d:%d-%d", b.Epoch, b.FirstOffset, b.LastOffset)
	}
	return s + "]"
}

func epochs(pairs ...int64) []storage.EpochEntry {
	var out []storage.EpochEntry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, storage.EpochEntry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

func sizeOf(batches []storage.Batch) int {
	n := 0
	for _, b := range batches {
		n += len(b.Data)
	}
	return n
}

func testLogEmpty(t *testing.T, e *logEnv) {
	for _, tp := range []metadata.TopicPartition{tpA, tpB, tpC} {
		e.requireLog(t, tp, 0, nil)
		got, err := e.log.Read(e.ctx, tp, 0, 1<<20)
		require.NoError(t, err, "Read of an empty partition")
		assert.Empty(t, got, "Read of an empty partition")
	}
}

func testLogAppendAndRead(t *testing.T, e *logEnv) {
	var all []storage.Batch
	for _, call := range []struct {
		batches []storage.Batch
		epochs  []storage.EpochEntry
	}{
		{[]storage.Batch{e.b(1, 0, 0)}, epochs(1, 0)},
		{[]storage.Batch{e.b(1, 1, 9), e.b(1, 10, 10)}, epochs(1, 0)},
		{[]storage.Batch{e.b(1, 11, 99), e.b(2, 100, 149), e.b(2, 150, 151)}, epochs(1, 0, 2, 100)},
	} {
		e.append(t, tpA, call.batches...)
		all = append(all, call.batches...)
		e.requireLog(t, tpA, all[len(all)-1].LastOffset+1, call.epochs, all...)
	}
}

// base appends e1:0-9 e1:10-19 to tpA and returns them.
func (e *logEnv) base(t *testing.T) []storage.Batch {
	bs := []storage.Batch{e.b(1, 0, 9), e.b(1, 10, 19)}
	e.append(t, tpA, bs...)
	return bs
}

func testLogAppendNotContiguous(t *testing.T, e *logEnv) {
	e.base(t)
	before := e.state(t, tpA, 0)
	for _, c := range []struct {
		name    string
		batches []storage.Batch
	}{
		{"gap before the first batch", []storage.Batch{e.b(1, 21, 29)}},
		{"first batch overlaps the last record", []storage.Batch{e.b(1, 19, 29)}},
		{"first batch repeats the last batch", []storage.Batch{e.b(1, 10, 19)}},
		{"first batch starts at the log start", []storage.Batch{e.b(1, 0, 29)}},
		{"gap between batches", []storage.Batch{e.b(1, 20, 29), e.b(1, 31, 39)}},
		{"batches overlap", []storage.Batch{e.b(1, 20, 29), e.b(1, 29, 39)}},
		{"batch repeated", []storage.Batch{e.b(1, 20, 29), e.b(1, 20, 29)}},
		{"batches out of order", []storage.Batch{e.b(1, 30, 39), e.b(1, 20, 29)}},
	} {
		err := e.log.Append(e.ctx, tpA, c.batches)
		require.ErrorIs(t, err, storage.ErrNotContiguous, "%s: Append of %s to a log ending at 20", c.name, spans(c.batches))
		e.requireUnchanged(t, tpA, 0, before, c.name+": a rejected Append")
	}
	err := e.log.Append(e.ctx, tpB, []storage.Batch{e.b(1, 5, 9)})
	require.ErrorIs(t, err, storage.ErrNotContiguous, "Append at 5 to an empty partition, which ends at 0")
	e.requireLog(t, tpB, 0, nil)
}

func testLogAppendInvalidBatch(t *testing.T, e *logEnv) {
	e.base(t)
	before := e.state(t, tpA, 0)
	ends := e.b(1, 20, 29)
	ends.LastOffset = 19
	negative := e.b(1, 20, 29)
	negative.Epoch = -1
	for _, c := range []struct {
		name    string
		batches []storage.Batch
	}{
		{"last offset below first offset", []storage.Batch{ends}},
		{"negative epoch", []storage.Batch{negative}},
		{"valid batch, then one ending before it starts", []storage.Batch{e.b(1, 20, 29), func() storage.Batch { b := e.b(1, 30, 39); b.LastOffset = 29; return b }()}},
	} {
		err := e.log.Append(e.ctx, tpA, c.batches)
		require.ErrorIs(t, err, storage.ErrInvalidBatch, "%s: Append of %s", c.name, spans(c.batches))
		e.requireUnchanged(t, tpA, 0, before, c.name+": a rejected Append")
	}
}

func testLogAppendEpochBackwards(t *testing.T, e *logEnv) {
	e.append(t, tpA, e.b(1, 0, 9), e.b(3, 10, 19))
	before := e.state(t, tpA, 0)
	for _, c := range []struct {
		name    string
		batches []storage.Batch
	}{
		{"below the log's latest epoch", []storage.Batch{e.b(2, 20, 29)}},
		{"within one append", []storage.Batch{e.b(5, 20, 29), e.b(4, 30, 39)}},
		{"within one append, back below the log's epoch", []storage.Batch{e.b(3, 20, 29), e.b(1, 30, 39)}},
	} {
		err := e.log.Append(e.ctx, tpA, c.batches)
		require.ErrorIs(t, err, storage.ErrNotContiguous, "%s: Append of %s to a log whose latest epoch is 3", c.name, spans(c.batches))
		e.requireUnchanged(t, tpA, 0, before, c.name+": a rejected Append")
	}
}

func testLogAppendNothing(t *testing.T, e *logEnv) {
	e.base(t)
	before := e.state(t, tpA, 0)
	require.NoError(t, e.log.Append(e.ctx, tpA, nil), "Append of nil")
	require.NoError(t, e.log.Append(e.ctx, tpA, []storage.Batch{}), "Append of no batches")
	e.requireUnchanged(t, tpA, 0, before, "an Append of no batches")
	require.NoError(t, e.log.Append(e.ctx, tpB, nil), "Append of nil to an empty partition")
	e.requireLog(t, tpB, 0, nil)
}

func testLogAppendDoesNotRetainData(t *testing.T, e *logEnv) {
	want := []storage.Batch{e.b(1, 0, 9), e.b(1, 10, 19)}
	given := make([]storage.Batch, len(want))
	for i, b := range want {
		b.Data = append([]byte(nil), b.Data...)
		given[i] = b
	}
	e.append(t, tpA, given...)
	for _, b := range given {
		for i := range b.Data {
			b.Data[i] ^= 0xff
		}
	}
	e.requireLog(t, tpA, 20, epochs(1, 0), want...)
}

func testLogReadFromInsideBatch(t *testing.T, e *logEnv) {
	all := []storage.Batch{e.b(1, 0, 0), e.b(1, 1, 9), e.b(2, 10, 19), e.b(2, 20, 21)}
	e.append(t, tpA, all...)
	for _, b := range all {
		for from := b.FirstOffset; from <= b.LastOffset; from++ {
			got, err := e.log.Read(e.ctx, tpA, from, 1)
			require.NoError(t, err, "Read from %d", from)
			require.Len(t, got, 1, "Read from %d with maxBytes 1: exactly the batch holding it (%s)", from, spans(got))
			require.Equal(t, b, got[0], "Read from %d must return the whole batch %d-%d", from, b.FirstOffset, b.LastOffset)
		}
	}
}

func testLogReadMaxBytes(t *testing.T, e *logEnv) {
	var all []storage.Batch
	for i := range int64(12) {
		all = append(all, e.b(1, i*10, i*10+9))
	}
	e.append(t, tpA, all...)
	two := sizeOf(all[:2])
	for _, maxBytes := range []int{math.MinInt, -1, 0, 1, len(all[0].Data), two - 1, two, two + 1, sizeOf(all[:5]), sizeOf(all), math.MaxInt} {
		for _, from := range []int64{0, 5, 30, 115} {
			got, err := e.log.Read(e.ctx, tpA, from, maxBytes)
			require.NoError(t, err, "Read from %d, maxBytes %d", from, maxBytes)
			require.NotEmpty(t, got, "Read from %d, maxBytes %d: at least one batch", from, maxBytes)
			requireConsecutive(t, got, "Read from %d, maxBytes %d", from, maxBytes)
			first := int(from / 10)
			require.LessOrEqual(t, first+len(got), len(all), "Read from %d, maxBytes %d returned %s", from, maxBytes, spans(got))
			requireSameBatches(t, all[first:first+len(got)], got, fmt.Sprintf("Read from %d, maxBytes %d", from, maxBytes))
			if len(got) > 1 {
				require.LessOrEqual(t, sizeOf(got), maxBytes, "Read from %d, maxBytes %d returned %s", from, maxBytes, spans(got))
			}
		}
	}
	got, err := e.log.Read(e.ctx, tpA, 0, two-1)
	require.NoError(t, err)
	require.Len(t, got, 1, "Read with maxBytes one short of two batches")
}

func testLogReadAtOrAfterEnd(t *testing.T, e *logEnv) {
	e.base(t)
	for _, tp := range []metadata.TopicPartition{tpA, tpB} {
		end, err := e.log.EndOffset(tp)
		require.NoError(t, err)
		for _, from := range []int64{end, end + 1, end + 1000, math.MaxInt64} {
			got, err := e.log.Read(e.ctx, tp, from, 1<<20)
			require.NoError(t, err, "Read %s from %d, at or after its end %d", tp, from, end)
			require.Empty(t, got, "Read %s from %d, at or after its end %d", tp, from, end)
		}
	}
}

func testLogReadBelowStart(t *testing.T, e *logEnv) {
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 100), "Truncate of an empty partition to 100")
	bs := []storage.Batch{e.b(1, 100, 109), e.b(1, 110, 119)}
	e.append(t, tpA, bs...)
	for _, from := range []int64{99, 50, 0, -1, math.MinInt64} {
		got, err := e.log.Read(e.ctx, tpA, from, 1)
		require.NoError(t, err, "Read from %d, below the first record at 100", from)
		require.Len(t, got, 1, "Read from %d, maxBytes 1", from)
		require.Equal(t, bs[0], got[0], "Read from %d must start with the first batch the log holds", from)
	}
}

func testLogReadResultNotAliased(t *testing.T, e *logEnv) {
	want := e.base(t)
	got, err := e.log.Read(e.ctx, tpA, 0, 1<<20)
	require.NoError(t, err)
	for _, b := range got {
		for i := range b.Data {
			b.Data[i] ^= 0xff
		}
	}
	e.requireLog(t, tpA, 20, epochs(1, 0), want...)
}

func testLogEpochs(t *testing.T, e *logEnv) {
	e.append(t, tpA, e.b(1, 0, 9))
	e.requireLog(t, tpA, 10, epochs(1, 0), e.b(1, 0, 9))
	steps := []struct {
		batches []storage.Batch
		want    []storage.EpochEntry
	}{
		{[]storage.Batch{e.b(1, 10, 19)}, epochs(1, 0)},
		{[]storage.Batch{e.b(3, 20, 29), e.b(3, 30, 39), e.b(4, 40, 49)}, epochs(1, 0, 3, 20, 4, 40)},
		{[]storage.Batch{e.b(4, 50, 59)}, epochs(1, 0, 3, 20, 4, 40)},
		{[]storage.Batch{e.b(9, 60, 60)}, epochs(1, 0, 3, 20, 4, 40, 9, 60)},
	}
	all := []storage.Batch{e.b(1, 0, 9)}
	for _, s := range steps {
		e.append(t, tpA, s.batches...)
		all = append(all, s.batches...)
		e.requireLog(t, tpA, all[len(all)-1].LastOffset+1, s.want, all...)
	}
	got, err := e.log.Epochs(tpA)
	require.NoError(t, err)
	got[0].Epoch, got[0].StartOffset = 99, 99
	e.requireLog(t, tpA, 61, epochs(1, 0, 3, 20, 4, 40, 9, 60), all...)
}

// multiEpoch appends e1:0-9 e1:10-19 e2:20-29 e2:30-39 e3:40-49 to tpA.
func (e *logEnv) multiEpoch(t *testing.T) []storage.Batch {
	bs := []storage.Batch{e.b(1, 0, 9), e.b(1, 10, 19), e.b(2, 20, 29), e.b(2, 30, 39), e.b(3, 40, 49)}
	e.append(t, tpA, bs...)
	return bs
}

func testLogTruncateAtBatchBoundary(t *testing.T, e *logEnv) {
	bs := e.multiEpoch(t)
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 40))
	e.requireLog(t, tpA, 40, epochs(1, 0, 2, 20), bs[:4]...)
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 30))
	e.requireLog(t, tpA, 30, epochs(1, 0, 2, 20), bs[:3]...)
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 20))
	e.requireLog(t, tpA, 20, epochs(1, 0), bs[:2]...)
	// The truncated offsets are written again, at a newer epoch.
	again := []storage.Batch{e.b(4, 20, 24), e.b(4, 25, 44)}
	e.append(t, tpA, again...)
	e.requireLog(t, tpA, 45, epochs(1, 0, 4, 20), append(bs[:2:2], again...)...)
}

func testLogTruncateInsideBatch(t *testing.T, e *logEnv) {
	e.multiEpoch(t)
	before := e.state(t, tpA, 0)
	for _, off := range []int64{1, 9, 15, 21, 49} {
		err := e.log.Truncate(e.ctx, tpA, off)
		require.ErrorIs(t, err, storage.ErrNotBatchBoundary, "Truncate to %d, inside a batch", off)
		e.requireUnchanged(t, tpA, 0, before, fmt.Sprintf("a rejected Truncate to %d", off))
	}
}

func testLogTruncatePastEnd(t *testing.T, e *logEnv) {
	e.multiEpoch(t)
	before := e.state(t, tpA, 0)
	for _, off := range []int64{50, 51, 1000, math.MaxInt64} {
		require.NoError(t, e.log.Truncate(e.ctx, tpA, off), "Truncate to %d, at or past the end 50", off)
		e.requireUnchanged(t, tpA, 0, before, fmt.Sprintf("Truncate to %d, at or past the end", off))
	}
}

func testLogTruncateToStart(t *testing.T, e *logEnv) {
	for _, start := range []int64{0, 100} {
		tp := tpA
		if start > 0 {
			tp = tpB
			require.NoError(t, e.log.Truncate(e.ctx, tp, start), "Truncate of an empty partition to %d", start)
		}
		e.append(t, tp, e.b(1, start, start+9), e.b(2, start+10, start+19))
		require.NoError(t, e.log.Truncate(e.ctx, tp, start), "Truncate to the first record, %d", start)
		e.requireLog(t, tp, start, nil)
		if start > 0 {
			err := e.log.Append(e.ctx, tp, []storage.Batch{e.b(3, 0, 9)})
			require.ErrorIs(t, err, storage.ErrNotContiguous, "Append at 0 to a log truncated to %d", start)
		}
		again := e.b(3, start, start+4)
		e.append(t, tp, again)
		e.requireLog(t, tp, start+5, epochs(3, start), again)
	}
}

func testLogTruncateBelowStart(t *testing.T, e *logEnv) {
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 100), "Truncate of an empty partition to 100")
	e.append(t, tpA, e.b(1, 100, 109), e.b(2, 110, 119))
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 40), "Truncate to 40, below the first record at 100")
	e.requireLog(t, tpA, 40, nil)
	again := e.b(3, 40, 49)
	e.append(t, tpA, again)
	e.requireLog(t, tpA, 50, epochs(3, 40), again)
}

func testLogTruncateNegative(t *testing.T, e *logEnv) {
	e.base(t)
	before := e.state(t, tpA, 0)
	for _, tp := range []metadata.TopicPartition{tpA, tpB} {
		err := e.log.Truncate(e.ctx, tp, -1)
		require.ErrorIs(t, err, storage.ErrInvalidOffset, "Truncate %s to -1", tp)
	}
	e.requireUnchanged(t, tpA, 0, before, "a Truncate to -1")
	e.requireLog(t, tpB, 0, nil)
}

func testLogTruncateEmptyStartsOver(t *testing.T, e *logEnv) {
	// A new replica starts where the leader's lineage starts.
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 1000), "Truncate of an empty partition to 1000")
	e.requireLog(t, tpA, 1000, nil)
	got, err := e.log.Read(e.ctx, tpA, 0, 1<<20)
	require.NoError(t, err)
	require.Empty(t, got, "Read from 0 of a log started at 1000 with no records")
	err = e.log.Append(e.ctx, tpA, []storage.Batch{e.b(5, 0, 9)})
	require.ErrorIs(t, err, storage.ErrNotContiguous, "Append at 0 to a log started at 1000")

	// With no records, it starts over anywhere, lower too.
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 500), "Truncate of a log with no records, from 1000 to 500")
	e.requireLog(t, tpA, 500, nil)
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 2000), "Truncate of a log with no records, from 500 to 2000")
	e.requireLog(t, tpA, 2000, nil)

	b := e.b(5, 2000, 2009)
	e.append(t, tpA, b)
	e.requireLog(t, tpA, 2010, epochs(5, 2000), b)
}

func testLogPartitionsIndependent(t *testing.T, e *logEnv) {
	a := []storage.Batch{e.b(1, 0, 9), e.b(2, 10, 19)}
	b := []storage.Batch{e.b(7, 0, 4)}
	e.append(t, tpA, a...)
	e.append(t, tpB, b...)
	require.NoError(t, e.log.Truncate(e.ctx, tpC, 300))
	e.requireLog(t, tpA, 20, epochs(1, 0, 2, 10), a...)
	e.requireLog(t, tpB, 5, epochs(7, 0), b...)
	e.requireLog(t, tpC, 300, nil)

	// The same offsets in another partition are not a conflict, and a
	// rejected append to one partition leaves the others alone.
	c := []storage.Batch{e.b(3, 300, 309)}
	e.append(t, tpC, c...)
	require.ErrorIs(t, e.log.Append(e.ctx, tpB, []storage.Batch{e.b(7, 10, 19)}), storage.ErrNotContiguous)
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 10))
	e.requireLog(t, tpA, 10, epochs(1, 0), a[0])
	e.requireLog(t, tpB, 5, epochs(7, 0), b...)
	e.requireLog(t, tpC, 310, epochs(3, 300), c...)
}

// testLogConcurrent appends to several partitions at once while other
// goroutines read them: run it with -race. Every read must return whole
// batches exactly as appended, and at least one below the end offset read
// before it.
func testLogConcurrent(t *testing.T, e *logEnv) {
	const parts, batches, readers = 6, 60, 2
	want := make([][]storage.Batch, parts)
	for p := range want {
		for i := range int64(batches) {
			want[p] = append(want[p], e.b(int32(1+i/20), i*5, i*5+4))
		}
	}
	tp := func(p int) metadata.TopicPartition {
		return metadata.TopicPartition{Topic: "storagetest-concurrent", Partition: int32(p)}
	}
	var wg sync.WaitGroup
	for p := range parts {
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			for i := 0; i < batches; {
				n := min(1+i%3, batches-i)
				if !assert.NoError(t, e.log.Append(e.ctx, tp(p), want[p][i:i+n]), "Append to %s", tp(p)) {
					return
				}
				i += n
			}
		})
		for r := range readers {
			wg.Go(func() {
				for k := 0; ; k++ {
					finished := false
					select {
					case <-done:
						finished = true
					default:
					}
					if err := readConsistent(e, tp(p), want[p], int64(k*(r+3)%(batches*5)), 1+k%400); err != nil {
						assert.NoError(t, err)
						return
					}
					if finished {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for p := range parts {
		e.requireLog(t, tp(p), batches*5, epochs(1, 0, 2, 100, 3, 200), want[p]...)
	}
}

// readConsistent reads tp from from and checks the result against the
// batches the writer appends, in order, while it may be appending.
func readConsistent(e *logEnv, tp metadata.TopicPartition, want []storage.Batch, from int64, maxBytes int) error {
	end, err := e.log.EndOffset(tp)
	if err != nil {
		return fmt.Errorf("EndOffset of %s: %w", tp, err)
	}
	if _, err := e.log.Epochs(tp); err != nil {
		return fmt.Errorf("Epochs of %s: %w", tp, err)
	}
	got, err := e.log.Read(e.ctx, tp, from, maxBytes)
	if err != nil {
		return fmt.Errorf("Read %s from %d: %w", tp, from, err)
	}
	if len(got) == 0 {
		if from < end {
			return fmt.Errorf("Read %s from %d returned nothing, though EndOffset said %d before it", tp, from, end)
		}
		return nil
	}
	if len(got) > 1 && sizeOf(got) > maxBytes {
		return fmt.Errorf("Read %s from %d, maxBytes %d, returned %d bytes in %s", tp, from, maxBytes, sizeOf(got), spans(got))
	}
	// The writer's batches are five offsets each, from 0.
	i := int(from / 5)
	for k, b := range got {
		if i+k >= len(want) {
			return fmt.Errorf("Read %s from %d returned %s, past what was appended", tp, from, spans(got))
		}
		if w := want[i+k]; w.FirstOffset != b.FirstOffset || w.LastOffset != b.LastOffset || w.Epoch != b.Epoch || w.MaxTimestamp != b.MaxTimestamp || string(w.Data) != string(b.Data) {
			return fmt.Errorf("Read %s from %d returned %s; batch %d differs from the one appended at %d", tp, from, spans(got), k, w.FirstOffset)
		}
	}
	return nil
}

// testLogContextCanceled: a log may ignore a cancelled context (one that
// never blocks) or refuse the call; a refused call changes nothing.
func testLogContextCanceled(t *testing.T, e *logEnv) {
	bs := e.base(t)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()

	next := e.b(1, 20, 29)
	err := e.log.Append(ctx, tpA, []storage.Batch{next})
	if err != nil {
		require.ErrorIs(t, err, context.Canceled, "Append with a cancelled context failed otherwise")
		e.requireLog(t, tpA, 20, epochs(1, 0), bs...)
	} else {
		bs = append(bs, next)
		e.requireLog(t, tpA, 30, epochs(1, 0), bs...)
	}
	end := bs[len(bs)-1].LastOffset + 1

	got, err := e.log.Read(ctx, tpA, 0, 1<<20)
	if err != nil {
		require.ErrorIs(t, err, context.Canceled, "Read with a cancelled context failed otherwise")
	} else {
		require.NotEmpty(t, got, "Read with a cancelled context that succeeds must return what is there")
		require.LessOrEqual(t, len(got), len(bs), "Read with a cancelled context returned %s", spans(got))
		requireSameBatches(t, bs[:len(got)], got, "Read with a cancelled context")
	}

	err = e.log.Truncate(ctx, tpA, 10)
	if err != nil {
		require.ErrorIs(t, err, context.Canceled, "Truncate with a cancelled context failed otherwise")
		e.requireLog(t, tpA, end, epochs(1, 0), bs...)
	} else {
		e.requireLog(t, tpA, 10, epochs(1, 0), bs[0])
	}
}

func testLogReopenKeepsLog(t *testing.T, e *logEnv) {
	a := e.multiEpoch(t)
	b := []storage.Batch{e.b(6, 0, 0)}
	e.append(t, tpB, b...)
	e.reopen(t)
	e.requireLog(t, tpA, 50, epochs(1, 0, 2, 20, 3, 40), a...)
	e.requireLog(t, tpB, 1, epochs(6, 0), b...)
	e.requireLog(t, tpC, 0, nil)

	// It goes on where it stopped, and that survives a restart too.
	more := []storage.Batch{e.b(3, 50, 59), e.b(4, 60, 69)}
	e.append(t, tpA, more...)
	e.reopen(t)
	e.requireLog(t, tpA, 70, epochs(1, 0, 2, 20, 3, 40, 4, 60), append(a, more...)...)
	err := e.log.Append(e.ctx, tpA, []storage.Batch{e.b(4, 50, 59)})
	require.ErrorIs(t, err, storage.ErrNotContiguous, "Append after a restart at an offset the log already holds")
}

func testLogReopenKeepsTruncation(t *testing.T, e *logEnv) {
	a := e.multiEpoch(t)
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 20))
	e.reopen(t)
	e.requireLog(t, tpA, 20, epochs(1, 0), a[:2]...)

	again := e.b(7, 20, 29)
	e.append(t, tpA, again)
	e.reopen(t)
	e.requireLog(t, tpA, 30, epochs(1, 0, 7, 20), a[0], a[1], again)
}

func testLogReopenKeepsStartOffset(t *testing.T, e *logEnv) {
	// A new replica started at the leader's earliest offset, and one
	// emptied by truncating below its first record, restart where they
	// were.
	require.NoError(t, e.log.Truncate(e.ctx, tpA, 1000))
	require.NoError(t, e.log.Truncate(e.ctx, tpB, 100))
	e.append(t, tpB, e.b(1, 100, 109))
	require.NoError(t, e.log.Truncate(e.ctx, tpB, 40))
	e.reopen(t)
	e.requireLog(t, tpA, 1000, nil)
	e.requireLog(t, tpB, 40, nil)
	e.requireLog(t, tpC, 0, nil)
	b := e.b(2, 1000, 1009)
	e.append(t, tpA, b)
	e.reopen(t)
	e.requireLog(t, tpA, 1010, epochs(2, 1000), b)
}
