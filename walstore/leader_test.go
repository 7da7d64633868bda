package walstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

func tpN(i int) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: "events", Partition: int32(i)}
}

func TestLeaderBackpressureBoundsMemoryAndLosesNothing(t *testing.T) {
	for _, overflow := range []walstore.Overflow{walstore.Reject, walstore.Block} {
		t.Run(map[walstore.Overflow]string{walstore.Reject: "reject", walstore.Block: "block"}[overflow], func(t *testing.T) {
			ctx := context.Background()
			c := clustertest.New(t, clustertest.Mem(), 4)
			r1 := c.AddBroker(1, "az1")
			c.AddBroker(2, "az2")
			c.SetReplicas(clustertest.TP, 1, 2)
			c.SetLeader(clustertest.TP, 1, 1)

			// The store is down for writes: every PUT fails.
			c.SetFault(faults.On(faults.IsOp(faults.OpPut), faults.Fail(storage.ErrUnavailable)))
			var mu sync.Mutex
			var healths []walstore.Health
			const bound = 10_000
			r1.Start(walstore.NodeConfig{
				BufferBytes: bound, ObjectBytes: 4_000, Overflow: overflow,
				DegradedAfter: 20 * time.Millisecond,
				OnHealth: func(h walstore.Health) {
					mu.Lock()
					healths = append(healths, h)
					mu.Unlock()
				},
			})
			r1.BecomeLeader(ctx, clustertest.TP, 1, -1)

			// Append 1 KiB batches until the engine pushes back.
			var accepted int64
			var pushback error
			for off := int64(0); off < 100; off++ {
				b := clustertest.MakeBatch(clustertest.TP, 1, off, off)
				b.Data = make([]byte, 1000)
				actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				err := r1.Node.Append(actx, clustertest.TP, b)
				cancel()
				if err != nil {
					pushback = err
					break
				}
				require.NoError(t, r1.Local.Append(ctx, clustertest.TP, []storage.Batch{b}))
				accepted++
				require.LessOrEqual(t, r1.Node.Stats().Leader.BufferedBytes, bound)
			}
			require.Error(t, pushback, "Append never pushed back")
			if overflow == walstore.Reject {
				assert.ErrorIs(t, pushback, walstore.ErrBufferFull)
			} else {
				assert.ErrorIs(t, pushback, context.DeadlineExceeded)
			}
			assert.Equal(t, int64(bound/1000), accepted)
			assert.LessOrEqual(t, r1.Node.Stats().Leader.BufferedBytes, bound)
			require.Eventually(t, func() bool { return r1.Node.Health().Degraded }, 10*time.Second, time.Millisecond)
			assert.Positive(t, r1.Node.Stats().Leader.UploadRetries)

			// The store recovers: everything accepted becomes durable.
			c.SetFault(nil)
			require.NoError(t, r1.Node.WaitDurable(ctx, clustertest.TP, 1, accepted-1))
			assert.Zero(t, r1.Node.Stats().Leader.BufferedBytes)
			require.Eventually(t, func() bool { return !r1.Node.Health().Degraded }, 10*time.Second, time.Millisecond)
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(healths) >= 2
			}, 10*time.Second, time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, healths, 2, "OnHealth reports degrading and recovering once each")
			assert.True(t, healths[0].Degraded)
			assert.ErrorIs(t, healths[0].Err, storage.ErrUnavailable)
			assert.False(t, healths[1].Degraded)
		})
	}
}

func TestLeaderPublishesInOffsetOrderWhenUploadsFinishOutOfOrder(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 1)
	r1 := c.AddBroker(1, "az1")
	c.AddBroker(2, "az2")
	a, b := tpN(0), tpN(1)
	c.SetReplicas(a, 1, 2)
	c.SetReplicas(b, 1, 2)
	c.SetLeader(a, 1, 1)
	c.SetLeader(b, 1, 1)

	// The first object's PUT is slow; later ones are not.
	c.SetFault(faults.Once(faults.On(faults.IsOp(faults.OpPut), faults.Delay(time.Second))))
	r1.StartLeader(walstore.NodeConfig{Interval: time.Millisecond})
	r1.BecomeLeader(ctx, a, 1, -1)
	r1.BecomeLeader(ctx, b, 1, -1)

	r1.Produce(ctx, a, 1, 0, 9, 10)
	require.Eventually(t, func() bool { return r1.Node.Stats().Leader.UploadsInFlight == 1 }, 10*time.Second, time.Millisecond)
	r1.Produce(ctx, a, 1, 10, 19, 10)
	require.Eventually(t, func() bool { return r1.Node.Stats().Leader.Objects == 1 }, 10*time.Second, time.Millisecond,
		"the second object of a is stored while the first is still uploading")
	r1.Produce(ctx, b, 1, 0, 9, 10)
	require.NoError(t, r1.Node.WaitDurable(ctx, b, 1, 9), "b's object does not wait for a's slow one")
	assert.Equal(t, int64(0), r1.Node.DurableOffset(a), "a's second object waits for its first")
	require.NoError(t, r1.Node.WaitDurable(ctx, a, 1, 19))

	// In the metadata log: b first, then a's entries in offset order.
	var order []string
	recs, err := c.Meta.Read(ctx, 0, 0, 100)
	require.NoError(t, err)
	for _, r := range recs {
		m, err := metadata.DecodeMessage(r.Value)
		require.NoError(t, err)
		for _, e := range m.Entries {
			order = append(order, e.Partition.String()+"@"+strconv.FormatInt(e.FirstOffset, 10))
		}
	}
	assert.Equal(t, []string{"events-1@0", "events-0@0", "events-0@10"}, order)
}

func TestLeaderRejectsInvalidConfig(t *testing.T) {
	c := clustertest.New(t, clustertest.Mem(), 1)
	b := c.AddBroker(1, "az1")
	base := func() walstore.NodeConfig {
		return walstore.NodeConfig{Store: b.Store, Log: c.Meta, Local: b.Local}
	}
	tests := []struct {
		field string
		mod   func(*walstore.NodeConfig)
	}{
		{"Store", func(c *walstore.NodeConfig) { c.Store = nil }},
		{"Log", func(c *walstore.NodeConfig) { c.Log = nil }},
		{"Local", func(c *walstore.NodeConfig) { c.Local = nil }},
		{"BrokerID", func(c *walstore.NodeConfig) { c.BrokerID = -1 }},
		{"Codec", func(c *walstore.NodeConfig) { c.Codec = 7 }},
		{"Interval", func(c *walstore.NodeConfig) { c.Interval = -time.Second }},
		{"BufferBytes", func(c *walstore.NodeConfig) { c.BufferBytes = -1 }},
		{"ObjectBytes", func(c *walstore.NodeConfig) { c.ObjectBytes, c.BufferBytes = 2<<20, 1<<20 }},
		{"MaxInflight", func(c *walstore.NodeConfig) { c.MaxInflight = -3 }},
		{"Overflow", func(c *walstore.NodeConfig) { c.Overflow = 9 }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			cfg := base()
			tt.mod(&cfg)
			_, err := walstore.NewNode(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
	_, err := walstore.NewNode(base())
	require.NoError(t, err)
}

func TestLeaderAppendErrors(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 1)
	r1 := c.AddBroker(1, "az1")
	c.SetReplicas(clustertest.TP, 1)
	l := r1.StartLeader(walstore.NodeConfig{BufferBytes: 1000, ObjectBytes: 1000})
	err := l.Append(ctx, clustertest.TP, clustertest.MakeBatch(clustertest.TP, 1, 0, 0))
	assert.ErrorIs(t, err, walstore.ErrNotLeader)
	r1.BecomeLeader(ctx, clustertest.TP, 1, -1)
	err = l.Append(ctx, clustertest.TP, clustertest.MakeBatch(clustertest.TP, 2, 0, 0))
	assert.ErrorIs(t, err, storage.ErrInvalidBatch, "an epoch other than the leadership's")
	big := clustertest.MakeBatch(clustertest.TP, 1, 0, 0)
	big.Data = make([]byte, 1001)
	assert.ErrorIs(t, l.Append(ctx, clustertest.TP, big), walstore.ErrBufferFull)
	r1.Stop()
	assert.ErrorIs(t, l.Append(ctx, clustertest.TP, clustertest.MakeBatch(clustertest.TP, 1, 0, 0)), walstore.ErrStopped)
	assert.True(t, errors.Is(l.WaitDurable(ctx, clustertest.TP, 1, 0), walstore.ErrStopped))
}

// flakyLog fails every Append while down is set.
type flakyLog struct {
	metadata.Log
	down atomic.Bool
}

var errMetadataDown = errors.New("metadata log unreachable")

func (f *flakyLog) Append(ctx context.Context, p int32, v []byte) (int64, error) {
	if f.down.Load() {
		return 0, errMetadataDown
	}
	return f.Log.Append(ctx, p, v)
}

func TestLeaderDegradesWhilePublishingFails(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 1)
	r1 := c.AddBroker(1, "az1")
	c.SetReplicas(clustertest.TP, 1, 2)
	c.SetLeader(clustertest.TP, 1, 1)
	log := &flakyLog{Log: c.Meta}
	l, err := walstore.NewNode(walstore.NodeConfig{
		BrokerID: 1, Store: r1.Store, Log: log, Local: r1.Local, Logger: discard(),
		Interval: time.Millisecond, DegradedAfter: 10 * time.Millisecond,
		Backoff: walstore.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond},
	})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	require.NoError(t, l.BecomeLeader(ctx, clustertest.TP, 1, []int32{2}, -1))

	log.down.Store(true)
	require.NoError(t, l.Append(ctx, clustertest.TP, clustertest.MakeBatch(clustertest.TP, 1, 0, 9)))
	require.Eventually(t, func() bool { return l.Health().Degraded }, 10*time.Second, time.Millisecond)
	assert.ErrorIs(t, l.Health().Err, errMetadataDown)
	assert.Equal(t, int64(0), l.DurableOffset(clustertest.TP), "stored but unpublished data is not durable")

	log.down.Store(false)
	require.NoError(t, l.WaitDurable(ctx, clustertest.TP, 1, 9))
	require.Eventually(t, func() bool { return !l.Health().Degraded }, 10*time.Second, time.Millisecond)
}

func TestLeaderWithholdsEntriesOnceItsBrokerNoLongerLeads(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 4)
	r1, r2 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2")
	tp := clustertest.TP
	c.SetReplicas(tp, 1, 2)
	c.SetLeader(tp, 1, 1)
	release := make(chan struct{})
	c.SetFault(faults.Func(func(_ context.Context, r faults.Request) faults.Effect {
		if r.Op == faults.OpPut {
			<-release // the upload is in flight when leadership is lost
		}
		return faults.Effect{}
	}))
	l := r1.StartLeader(walstore.NodeConfig{})
	r1.BecomeLeader(ctx, tp, 1, -1)
	r1.Produce(ctx, tp, 1, 0, 9, 10)
	require.Eventually(t, func() bool { return l.Stats().Leader.UploadsInFlight == 1 }, 10*time.Second, time.Millisecond)

	// The controller makes R2 the leader at epoch 2; R1 becomes its follower.
	require.NoError(t, l.BecomeFollower(ctx, tp, 2, r2.ID))
	close(release)
	require.Eventually(t, func() bool { return l.Stats().Leader.Fenced == 1 }, 10*time.Second, time.Millisecond)
	assert.Empty(t, clustertest.ReadEntries(t, c, r2.ID, tp), "nothing published after the broker lost leadership")
	assert.Equal(t, int64(-1), l.DurableOffset(tp))
}

// TestLeaderHedgesAnOverstayingPUT: the first PUT hangs; with
// RequestTimeout and DegradedAfter an hour away, only its hedge lets the
// batch become durable. Exactly one object is published for it.
func TestLeaderHedgesAnOverstayingPUT(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 4)
	r1, r2 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2")
	tp := clustertest.TP
	c.SetReplicas(tp, 1, 2)
	c.SetLeader(tp, 1, 1)
	c.SetFault(faults.Once(faults.On(faults.IsOp(faults.OpPut), faults.Delay(time.Hour))))
	r1.StartLeader(walstore.NodeConfig{RequestTimeout: time.Hour, DegradedAfter: time.Hour, UploadHedge: walstore.HedgeConfig{Max: 10 * time.Millisecond}})
	r1.BecomeLeader(ctx, tp, 1, -1)
	r1.Produce(ctx, tp, 1, 0, 9, 10)
	require.NoError(t, r1.Node.WaitDurable(ctx, tp, 1, 9))
	st := r1.Node.Stats().Leader
	// Later uploads may be hedged too on a busy machine; the hung one was.
	assert.GreaterOrEqual(t, st.UploadHedges, uint64(1))
	assert.GreaterOrEqual(t, st.UploadHedgeWins, uint64(1))
	assert.Zero(t, st.UploadRetries, "the hung PUT was cancelled, not retried")
	r2.StartFollower(tp)
	clustertest.RequireConverges(t, r2, r1, tp)
}
