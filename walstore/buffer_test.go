package walstore_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// TestBufferHoldsUntilPublished: while the metadata log refuses every
// append, uploads still succeed, but nothing is published; the buffer
// must fill and Append push back (ErrBufferFull with Reject), rather than
// the engine keeping ever more stored, unpublished objects in memory. Once
// the log accepts again, everything is published and durable.
func TestBufferHoldsUntilPublished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		tp := tpA
		w := newWorld(t)
		meta := &flakyLog{Log: w.meta}
		local := memstore.NewLocalLog()
		const bufferBytes = 64 << 10
		n := w.start(1, walstore.NodeConfig{Log: meta, Local: local,
			Interval: time.Millisecond, ObjectBytes: 8 << 10, BufferBytes: bufferBytes, Overflow: walstore.Reject})
		require.NoError(t, local.AssignEpoch(tp, 1, 0))
		require.NoError(t, n.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
		time.Sleep(time.Second) // the markers are out
		meta.down.Store(true)

		var appended int
		next := int64(0)
		for i := 0; ; i++ {
			require.Less(t, i, 10_000, "Append never pushed back while nothing could be published")
			b := storage.Batch{Epoch: 1, FirstOffset: next, LastOffset: next, MaxTimestamp: 1, Data: make([]byte, 1<<10)}
			err := n.Append(ctx, tp, b)
			if err != nil {
				require.ErrorIs(t, err, walstore.ErrBufferFull)
				break
			}
			require.NoError(t, local.Append(ctx, tp, []storage.Batch{b}))
			appended += len(b.Data)
			next++
			time.Sleep(time.Millisecond) // let objects be cut and uploaded
		}
		require.LessOrEqual(t, appended, bufferBytes)
		require.LessOrEqual(t, n.Stats().Leader.BufferedBytes, bufferBytes)
		require.Positive(t, n.Stats().Leader.Objects, "uploads went on while publishing failed")

		meta.down.Store(false)
		require.NoError(t, n.WaitDurable(ctx, tp, 1, next-1))
		require.Zero(t, n.Stats().Leader.BufferedBytes)
	})
}
