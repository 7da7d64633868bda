package walstore_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// With WaitCutDelay, a WaitDurable call has the records it waits for cut
// at once, not at Interval: with an Interval of an hour, the waits return
// within a minute's context, and waits on two partitions share one
// object. Without it, the interval holds and the same waits run out of
// time with nothing stored.
func TestWaitCutDelayCutsForWaiters(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delay   time.Duration
		err     error
		objects uint64
	}{
		{name: "off", delay: 0, err: context.DeadlineExceeded, objects: 0},
		{name: "2ms", delay: 2 * time.Millisecond, objects: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				local := memstore.NewLocalLog()
				n, err := walstore.NewNode(walstore.NodeConfig{
					BrokerID: 1, Store: w.store(1), Log: w.meta, Local: local, Logger: discard(),
					Interval: time.Hour, WaitCutDelay: tc.delay,
				})
				require.NoError(t, err)
				runCtx, stop := context.WithCancel(ctx)
				ran := make(chan error, 1)
				go func() { ran <- n.Run(runCtx) }()
				tps := []metadata.TopicPartition{tpA, tpB}
				for _, tp := range tps {
					require.NoError(t, local.AssignEpoch(tp, 1, 0))
					require.NoError(t, n.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
					require.NoError(t, n.Append(ctx, tp, storage.Batch{Epoch: 1, FirstOffset: 0, LastOffset: 9, MaxTimestamp: 1, Data: []byte("records")}))
				}
				settle(time.Second) // the markers published: nothing else is due for an hour

				waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				errs := make([]error, len(tps))
				var wg sync.WaitGroup
				for i, tp := range tps {
					wg.Go(func() { errs[i] = n.WaitDurable(waitCtx, tp, 1, 9) })
				}
				wg.Wait()
				for i, tp := range tps {
					if tc.err == nil {
						require.NoError(t, errs[i], "%s", tp)
						require.Equal(t, int64(10), n.DurableOffset(tp), "%s", tp)
					} else {
						require.ErrorIs(t, errs[i], tc.err, "%s", tp)
						require.Zero(t, n.DurableOffset(tp), "%s", tp)
					}
				}
				require.Equal(t, tc.objects, n.Stats().Leader.Objects, "objects stored")
				stop()
				require.NoError(t, <-ran)
			})
		})
	}
}

// A WaitCutDelay that is negative, or longer than the Interval that would
// cut first, is refused.
func TestWaitCutDelayValidated(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		interval, delay time.Duration
		err             string
	}{
		{0, -time.Millisecond, "WaitCutDelay -1000000 is negative"},
		{0, 101 * time.Millisecond, "WaitCutDelay 101ms exceeds Interval 100ms"},
		{10 * time.Millisecond, 20 * time.Millisecond, "WaitCutDelay 20ms exceeds Interval 10ms"},
		{0, 100 * time.Millisecond, ""},
	} {
		_, err := walstore.NewNode(walstore.NodeConfig{BrokerID: 1, Store: w.store(1), Log: w.meta, Local: memstore.NewLocalLog(),
			Logger: discard(), Interval: tc.interval, WaitCutDelay: tc.delay})
		if tc.err == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, tc.err)
	}
}
