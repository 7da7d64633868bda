package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
)

func TestNewLogValidates(t *testing.T) {
	_, err := memstore.NewLog(0)
	assert.ErrorContains(t, err, "partitions")
	_, err = memstore.NewLog(-3)
	assert.ErrorContains(t, err, "partitions")
	_, err = memstore.NewLog(1, memstore.WithMaxPollWait(-time.Second))
	assert.ErrorContains(t, err, "WithMaxPollWait")
	_, err = memstore.NewLog(1, memstore.WithLogClock(nil))
	assert.ErrorContains(t, err, "WithLogClock")
}

// newLog returns a log on a fake clock that only moves when told to.
func newLog(t *testing.T, partitions int32, opts ...memstore.LogOption) (*memstore.Log, *fakeClock) {
	t.Helper()
	clock := newFakeClock(false)
	l, err := memstore.NewLog(partitions, append([]memstore.LogOption{memstore.WithLogClock(clock)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l, clock
}

type readResult struct {
	recs []metadata.Record
	err  error
}

func readAsync(ctx context.Context, l *memstore.Log, partition int32, from int64) <-chan readResult {
	done := make(chan readResult, 1)
	go func() {
		recs, err := l.Read(ctx, partition, from, 10)
		done <- readResult{recs, err}
	}()
	return done
}

func TestLogZeroPollWaitReturnsAtOnce(t *testing.T) {
	l, clock := newLog(t, 1, memstore.WithMaxPollWait(0))
	recs, err := l.Read(t.Context(), 0, 0, 10)
	require.NoError(t, err)
	assert.Empty(t, recs)
	assert.Empty(t, clock.Waits(), "a zero poll wait must not wait at all")
}

func TestLogLongPollEndsOnTheClock(t *testing.T) {
	l, clock := newLog(t, 2, memstore.WithMaxPollWait(time.Second))
	done := readAsync(t.Context(), l, 0, 0)
	require.Equal(t, time.Second, <-clock.asked, "the reader waits the maximum poll wait")
	clock.Advance(999 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("Read returned %v, %v before the poll wait elapsed", r.recs, r.err)
	default:
	}
	clock.Advance(time.Millisecond)
	r := <-done
	require.NoError(t, r.err)
	assert.Empty(t, r.recs)
}

func TestLogLongPollWakesOnAppend(t *testing.T) {
	l, clock := newLog(t, 2)
	done := readAsync(t.Context(), l, 1, 0)
	assert.Equal(t, memstore.DefaultMaxPollWait, <-clock.asked)
	_, err := l.Append(t.Context(), 0, []byte("other partition"))
	require.NoError(t, err)
	_, err = l.Append(t.Context(), 1, []byte("mine"))
	require.NoError(t, err)
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, []metadata.Record{{Partition: 1, Offset: 0, Value: []byte("mine")}}, r.recs)
}

func TestLogLongPollEndsWithContextAndClose(t *testing.T) {
	l, clock := newLog(t, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := readAsync(ctx, l, 0, 0)
	<-clock.asked
	cancel()
	assert.ErrorIs(t, (<-done).err, context.Canceled)

	done = readAsync(t.Context(), l, 0, 0)
	<-clock.asked
	require.NoError(t, l.Close())
	assert.ErrorIs(t, (<-done).err, metadata.ErrClosed)
}

func TestLogOffsets(t *testing.T) {
	l, _ := newLog(t, 1, memstore.WithMaxPollWait(0))
	ctx := t.Context()
	for i := range 5 {
		off, err := l.Append(ctx, 0, []byte{byte(i)})
		require.NoError(t, err)
		require.Equal(t, int64(i), off)
	}
	_, err := l.Read(ctx, 0, 6, 10)
	assert.ErrorIs(t, err, metadata.ErrOffsetOutOfRange, "reading above the high watermark")
	_, err = l.Read(ctx, 0, 0, 0)
	assert.ErrorContains(t, err, "max is 0")
	_, err = l.Read(ctx, 1, 0, 1)
	assert.ErrorIs(t, err, metadata.ErrUnknownPartition)

	require.NoError(t, l.Trim(ctx, 0, 3))
	low, high, err := l.Watermarks(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{3, 5}, [2]int64{low, high})
	_, err = l.Read(ctx, 0, 2, 10)
	assert.ErrorIs(t, err, metadata.ErrOffsetOutOfRange)
	assert.ErrorContains(t, err, "offset 2")
	recs, err := l.Read(ctx, 0, 3, 10)
	require.NoError(t, err)
	assert.Equal(t, []metadata.Record{{Offset: 3, Value: []byte{3}}, {Offset: 4, Value: []byte{4}}}, recs)

	// Returned values are copies.
	recs[0].Value[0] = 99
	again, err := l.Read(ctx, 0, 3, 1)
	require.NoError(t, err)
	assert.Equal(t, []byte{3}, again[0].Value)

	require.NoError(t, l.Trim(ctx, 0, 5), "trimming everything")
	off, err := l.Append(ctx, 0, []byte("after"))
	require.NoError(t, err)
	assert.Equal(t, int64(5), off, "offsets continue after a trim")
	assert.ErrorIs(t, l.Trim(ctx, 0, 7), metadata.ErrOffsetOutOfRange)
}

func TestLogAccounting(t *testing.T) {
	l, _ := newLog(t, 2, memstore.WithMaxPollWait(0))
	ctx := t.Context()
	for _, v := range []string{"a", "bb", "ccc"} {
		_, err := l.Append(ctx, 0, []byte(v))
		require.NoError(t, err)
	}
	_, err := l.Append(ctx, 1, []byte("dddd"))
	require.NoError(t, err)
	_, err = l.Read(ctx, 0, 0, 2) // a, bb
	require.NoError(t, err)
	_, err = l.Read(ctx, 0, 2, 10) // ccc
	require.NoError(t, err)
	_, err = l.Read(ctx, 0, 3, 10) // nothing: not counted
	require.NoError(t, err)

	want := memstore.LogStats{
		Partitions: []memstore.LogCounters{
			{Appends: 3, AppendedBytes: 6, Reads: 2, RecordsRead: 3, BytesRead: 6},
			{Appends: 1, AppendedBytes: 4},
		},
		Total: memstore.LogCounters{Appends: 4, AppendedBytes: 10, Reads: 2, RecordsRead: 3, BytesRead: 6},
	}
	assert.Equal(t, want, l.Stats())
	require.NoError(t, l.Close())
	assert.Equal(t, want, l.Stats(), "counters stay readable after Close")
	l.ResetStats()
	assert.Equal(t, memstore.LogCounters{}, l.Stats().Total)
}
