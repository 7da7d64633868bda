package memstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

func batch(epoch int32, first, last int64) storage.Batch {
	return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: []byte{byte(first), byte(last)}}
}

// The storage.LocalLog contract is TestLocalLogConformance's; these are
// the parts memstore adds: AssignEpoch, AppendOne, Batches and EachBatch.
func TestLocalLogAssignEpoch(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 1}
	l := memstore.NewLocalLog()
	require.NoError(t, l.Append(ctx, tp, []storage.Batch{batch(1, 0, 9)}))

	// A broker becoming leader at epoch 3 records it at its log end before
	// it has a record of that epoch.
	require.NoError(t, l.AssignEpoch(tp, 3, 10))
	epochs, err := l.Epochs(tp)
	require.NoError(t, err)
	assert.Equal(t, []storage.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 10}}, epochs)

	// Records of an older epoch no longer continue that log ...
	require.ErrorIs(t, l.Append(ctx, tp, []storage.Batch{batch(1, 10, 19)}), storage.ErrNotContiguous)
	// ... until truncating at the end removes the empty epoch.
	require.NoError(t, l.Truncate(ctx, tp, 10))
	require.NoError(t, l.Append(ctx, tp, []storage.Batch{batch(1, 10, 19)}))
	epochs, err = l.Epochs(tp)
	require.NoError(t, err)
	assert.Equal(t, []storage.EpochEntry{{Epoch: 1, StartOffset: 0}}, epochs)

	// Batches of the assigned epoch add no entry of their own.
	require.NoError(t, l.AssignEpoch(tp, 4, 20))
	require.NoError(t, l.Append(ctx, tp, []storage.Batch{batch(4, 20, 29)}))
	epochs, err = l.Epochs(tp)
	require.NoError(t, err)
	assert.Equal(t, []storage.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 4, StartOffset: 20}}, epochs)

	require.ErrorIs(t, l.AssignEpoch(tp, -1, 30), fencing.ErrInvalidEpochEntry)
}

func TestLocalLogBatchesAreCopies(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 1}
	l := memstore.NewLocalLog()
	assert.Empty(t, l.Batches(tp))
	require.NoError(t, l.Append(ctx, tp, []storage.Batch{batch(1, 0, 9), batch(1, 10, 19)}))
	got := l.Batches(tp)
	require.Equal(t, []storage.Batch{batch(1, 0, 9), batch(1, 10, 19)}, got)
	got[0].Data[0] = 0xff
	assert.Equal(t, []storage.Batch{batch(1, 0, 9), batch(1, 10, 19)}, l.Batches(tp), "Batches returns copies")
}

// EachBatch visits the log's own batches from an offset, stops at fn's
// error, and what it visited stays as it was when the log is truncated and
// appended to again.
func TestLocalLogEachBatch(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 1}
	l := memstore.NewLocalLog()
	require.NoError(t, l.Append(ctx, tp, []storage.Batch{batch(1, 0, 9), batch(1, 10, 19), batch(1, 20, 29)}))
	visit := func(from int64, stopAfter int) []storage.Batch {
		var got []storage.Batch
		errStop := errors.New("stop")
		err := l.EachBatch(tp, from, func(b storage.Batch) error {
			got = append(got, b)
			if len(got) == stopAfter {
				return errStop
			}
			return nil
		})
		if stopAfter > 0 && len(got) == stopAfter {
			require.ErrorIs(t, err, errStop)
		} else {
			require.NoError(t, err)
		}
		return got
	}
	assert.Equal(t, []storage.Batch{batch(1, 0, 9), batch(1, 10, 19), batch(1, 20, 29)}, visit(0, 0))
	assert.Equal(t, []storage.Batch{batch(1, 10, 19), batch(1, 20, 29)}, visit(15, 0), "from the batch holding the offset")
	assert.Equal(t, []storage.Batch{batch(1, 10, 19)}, visit(10, 1), "stops at fn's error")
	assert.Empty(t, visit(30, 0))

	kept := visit(0, 0)
	require.NoError(t, l.Truncate(ctx, tp, 10))
	require.NoError(t, l.Append(ctx, tp, []storage.Batch{batch(2, 10, 14)}))
	assert.Equal(t, []storage.Batch{batch(1, 0, 9), batch(1, 10, 19), batch(1, 20, 29)}, kept, "a visit's batches are never written again")
	assert.Equal(t, []storage.Batch{batch(1, 0, 9), batch(2, 10, 14)}, visit(0, 0))
}

// Append copies batches into the log's own memory: what the caller does
// with its buffers afterwards, and appends to a batch AppendOne returned,
// change nothing the log holds, across many blocks of it.
func TestLocalLogKeepsCopies(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 1}
	l := memstore.NewLocalLog()
	buf := make([]byte, 320<<10)
	var want []storage.Batch
	for i := range 40 { // 4 MB, from 1 byte to past the size that gets its own allocation
		data := buf[:1+i*i*200]
		for j := range data {
			data[j] = byte(i + j)
		}
		b := storage.Batch{Epoch: 1, FirstOffset: int64(i), LastOffset: int64(i), Data: data}
		want = append(want, storage.Batch{Epoch: 1, FirstOffset: int64(i), LastOffset: int64(i), Data: slices.Clone(data)})
		kept, err := l.AppendOne(ctx, tp, b)
		require.NoError(t, err)
		require.Equal(t, want[i], kept)
		_ = append(kept.Data, 0xff, 0xff) // capped: cannot reach the next batch's bytes
	}
	clear(buf)
	assert.Equal(t, want, l.Batches(tp))

	_, err := l.AppendOne(ctx, tp, batch(1, 0, 0))
	require.ErrorIs(t, err, storage.ErrNotContiguous)
	assert.Equal(t, want, l.Batches(tp), "a failed AppendOne changes nothing")
}
