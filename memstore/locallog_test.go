package memstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
)

func batch(epoch int32, first, last int64) combiner.Batch {
	return combiner.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: []byte{byte(first), byte(last)}}
}

func TestLocalLog(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 1}
	l := memstore.NewLocalLog()

	end, err := l.EndOffset(tp)
	require.NoError(t, err)
	assert.Zero(t, end)

	// An empty log may start anywhere; appends must then continue exactly.
	require.NoError(t, l.Truncate(ctx, tp, 100))
	require.Error(t, l.Append(ctx, tp, []combiner.Batch{batch(1, 0, 9)}), "a gap below the start")
	require.NoError(t, l.Append(ctx, tp, []combiner.Batch{batch(1, 100, 109), batch(1, 110, 119), batch(2, 120, 129)}))
	require.ErrorContains(t, l.Append(ctx, tp, []combiner.Batch{batch(2, 131, 140)}), "want it to start at 130")
	epochs, err := l.Epochs(tp)
	require.NoError(t, err)
	assert.Equal(t, []fencing.EpochEntry{{Epoch: 1, StartOffset: 100}, {Epoch: 2, StartOffset: 120}}, epochs)

	// Reads return whole batches from the one holding the offset.
	got, err := l.Read(ctx, tp, 115, 1)
	require.NoError(t, err)
	require.Len(t, got, 1, "at least one batch, even past maxBytes")
	assert.Equal(t, int64(110), got[0].FirstOffset)
	got[0].Data[0] = 0xff
	again, err := l.Read(ctx, tp, 110, 1<<20)
	require.NoError(t, err)
	assert.Len(t, again, 2)
	assert.NotEqual(t, byte(0xff), again[0].Data[0], "reads return copies")

	// Truncation keeps batch boundaries and the epoch cache in step.
	require.ErrorContains(t, l.Truncate(ctx, tp, 115), "not a batch boundary")
	require.ErrorContains(t, l.Truncate(ctx, tp, 50), "below the log start")
	require.NoError(t, l.Truncate(ctx, tp, 120))
	epochs, err = l.Epochs(tp)
	require.NoError(t, err)
	assert.Equal(t, []fencing.EpochEntry{{Epoch: 1, StartOffset: 100}}, epochs)
	end, err = l.EndOffset(tp)
	require.NoError(t, err)
	assert.Equal(t, int64(120), end)
	assert.Len(t, l.Batches(tp), 2)
}
