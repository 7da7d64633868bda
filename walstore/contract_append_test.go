package walstore_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// An Append blocked on a full buffer ends with the leadership it waited
// in: ErrNotLeader once the partition's leadership ends (resigned, or
// ended and begun again), ErrStopped once Run ends. It once waited on
// until buffer space freed, which, with the bucket unreachable or with
// another partition's data filling the buffer, never came: for ever with
// a background context.
func TestContractBlockedAppendEndsWithItsLeadership(t *testing.T) {
	// Each batch has size bytes: four fit in the buffer, not five, nor
	// one object of the filler's.
	const size, buffer = 1000, 4096
	batch := func(tp metadata.TopicPartition, epoch int32, off int64) storage.Batch {
		return storage.Batch{Epoch: epoch, FirstOffset: off, LastOffset: off, MaxTimestamp: 1, Data: bytes.Repeat([]byte{byte(off)}, size)}
	}
	type ending func(t *testing.T, n *walstore.Node, stop func())
	for _, tc := range []struct {
		name string
		// fill: the batches that fill the buffer are another partition's,
		// buffered (the bucket answers); otherwise tpA's own, cut and
		// uploading to an unreachable bucket.
		fill bool
		end  ending
		is   error
	}{
		{name: "own data uploading, BecomeFollower", is: walstore.ErrNotLeader, end: func(t *testing.T, n *walstore.Node, _ func()) {
			require.NoError(t, n.BecomeFollower(t.Context(), tpA, 2, 2))
		}},
		{name: "own data uploading, StopReplica", is: walstore.ErrNotLeader, end: func(t *testing.T, n *walstore.Node, _ func()) {
			require.NoError(t, n.StopReplica(t.Context(), tpA))
		}},
		{name: "own data uploading, resigned and led again", is: walstore.ErrNotLeader, end: func(t *testing.T, n *walstore.Node, _ func()) {
			require.NoError(t, n.BecomeFollower(t.Context(), tpA, 2, 2))
			require.NoError(t, n.BecomeLeader(t.Context(), tpA, 3, []int32{2}, -1))
		}},
		{name: "own data uploading, Run ends", is: walstore.ErrStopped, end: func(_ *testing.T, _ *walstore.Node, stop func()) {
			stop()
		}},
		{name: "another partition's data, BecomeFollower", fill: true, is: walstore.ErrNotLeader, end: func(t *testing.T, n *walstore.Node, _ func()) {
			require.NoError(t, n.BecomeFollower(t.Context(), tpA, 2, 2))
		}},
		{name: "another partition's data, Run ends", fill: true, is: walstore.ErrStopped, end: func(_ *testing.T, _ *walstore.Node, stop func()) {
			stop()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				var down atomic.Bool
				down.Store(!tc.fill)
				log1 := memstore.NewLocalLog()
				cfg := walstore.NodeConfig{BrokerID: 1, Store: switchStore{ObjectStore: w.store(1), down: &down}, Log: w.meta, Local: log1, Logger: discard()}
				cfg.BufferBytes, cfg.ObjectBytes, cfg.MaxInflight = buffer, size, 4
				if tc.fill {
					cfg.Interval = time.Hour // what fills the buffer stays in it
					cfg.ObjectBytes = buffer
				}
				n, err := walstore.NewNode(cfg)
				require.NoError(t, err)
				runCtx, stop := context.WithCancel(ctx)
				defer stop()
				ran := make(chan error, 1)
				go func() { ran <- n.Run(runCtx) }()
				for _, tp := range []metadata.TopicPartition{tpA, tpB} {
					require.NoError(t, log1.AssignEpoch(tp, 1, 0))
					require.NoError(t, n.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
				}
				filler := tpA
				if tc.fill {
					filler = tpB
				}
				for off := range int64(4) {
					require.NoError(t, n.Append(ctx, filler, batch(filler, 1, off)))
					settle(time.Millisecond) // cut alone, unless it is the filler's
				}
				settle(time.Second)
				next := int64(0)
				if !tc.fill {
					next = 4
					require.Equal(t, 4, n.Stats().Leader.UploadsInFlight, "tpA's batches are all uploading")
				}

				// The Append blocks, with a context that does not end
				// before the test does.
				appended := make(chan error, 1)
				go func() { appended <- n.Append(ctx, tpA, batch(tpA, 1, next)) }()
				settle(time.Minute)
				select {
				case err := <-appended:
					require.FailNow(t, "Append did not wait for buffer space", "%v", err)
				default:
				}

				tc.end(t, n, stop)
				settle(time.Minute)
				select {
				case err := <-appended:
					require.ErrorIs(t, err, tc.is)
				default:
					require.FailNow(t, "Append outlived the leadership it waited in")
				}
				stop()
				require.NoError(t, <-ran)
			})
		})
	}
}
