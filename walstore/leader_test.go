package walstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

func tpN(i int) metadata.TopicPartition { return metadata.TopicPartition{Topic: "events", Partition: int32(i)} }

func TestLeaderBackpressureBoundsMemoryAndLosesNothing(t *testing.T) {
	for _, overflow := range []walstore.Overflow{walstore.Reject, walstore.Block} {
		t.Run(map[walstore.Overflow]string{walstore.Reject: "reject", walstore.Block: "block"}[overflow], func(t *testing.T) {
			ctx := context.Background()
			c := newCluster(t, 4)
			r1 := c.addBroker(1, "az1")
			c.addBroker(2, "az2")
			c.setReplicas(testTP, 1, 2)
			c.setLeader(testTP, 1, 1)

			// The store is down for writes: every PUT fails.
			removeFault, err := c.objects.AddFault(memstore.Fault{
				Match: func(r memstore.Request) bool { return r.Op == memstore.OpPut },
				Err:   walstore.ErrUnavailable,
			})
			require.NoError(t, err)
			var mu sync.Mutex
			var healths []walstore.Health
			const bound = 10_000
			r1.startLeader(walstore.LeaderConfig{
				BufferBytes: bound, ObjectBytes: 4_000, Overflow: overflow,
				DegradedAfter: 20 * time.Millisecond,
				OnHealth: func(h walstore.Health) {
					mu.Lock()
					healths = append(healths, h)
					mu.Unlock()
				},
			})
			r1.becomeLeader(ctx, testTP, 1, -1)

			// Append 1 KiB batches until the engine pushes back.
			var accepted int64
			var pushback error
			for off := int64(0); off < 100; off++ {
				b := makeBatch(testTP, 1, off, off)
				b.Data = make([]byte, 1000)
				actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				err := r1.leader.Append(actx, testTP, b)
				cancel()
				if err != nil {
					pushback = err
					break
				}
				require.NoError(t, r1.local.Append(ctx, testTP, []combinerBatch{b}))
				accepted++
				require.LessOrEqual(t, r1.leader.Stats().BufferedBytes, bound)
			}
			require.Error(t, pushback, "Append never pushed back")
			if overflow == walstore.Reject {
				assert.ErrorIs(t, pushback, walstore.ErrBufferFull)
			} else {
				assert.ErrorIs(t, pushback, context.DeadlineExceeded)
			}
			assert.Equal(t, int64(bound/1000), accepted)
			assert.LessOrEqual(t, r1.leader.Stats().BufferedBytes, bound)
			require.Eventually(t, func() bool { return r1.leader.Health().Degraded }, 10*time.Second, time.Millisecond)
			assert.Positive(t, r1.leader.Stats().UploadRetries)

			// The store recovers: everything accepted becomes durable.
			removeFault()
			require.NoError(t, r1.leader.WaitDurable(ctx, testTP, accepted-1))
			assert.Zero(t, r1.leader.Stats().BufferedBytes)
			require.Eventually(t, func() bool { return !r1.leader.Health().Degraded }, 10*time.Second, time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, healths, 2, "OnHealth reports degrading and recovering once each")
			assert.True(t, healths[0].Degraded)
			assert.ErrorIs(t, healths[0].Err, walstore.ErrUnavailable)
			assert.False(t, healths[1].Degraded)
		})
	}
}

func TestLeaderPublishesInOffsetOrderWhenUploadsFinishOutOfOrder(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 1)
	r1 := c.addBroker(1, "az1")
	c.addBroker(2, "az2")
	a, b := tpN(0), tpN(1)
	c.setReplicas(a, 1, 2)
	c.setReplicas(b, 1, 2)
	c.setLeader(a, 1, 1)
	c.setLeader(b, 1, 1)

	// The first object's PUT is slow; later ones are not.
	var puts atomic.Int64
	_, err := c.objects.AddFault(memstore.Fault{
		Match: func(r memstore.Request) bool { return r.Op == memstore.OpPut && puts.Add(1) == 1 },
		Delay: time.Second,
	})
	require.NoError(t, err)
	r1.startLeader(walstore.LeaderConfig{Interval: time.Millisecond})
	r1.becomeLeader(ctx, a, 1, -1)
	r1.becomeLeader(ctx, b, 1, -1)

	r1.produce(ctx, a, 1, 0, 9, 10)
	require.Eventually(t, func() bool { return r1.leader.Stats().UploadsInFlight == 1 }, 10*time.Second, time.Millisecond)
	r1.produce(ctx, a, 1, 10, 19, 10)
	require.Eventually(t, func() bool { return r1.leader.Stats().Objects == 1 }, 10*time.Second, time.Millisecond,
		"the second object of a is stored while the first is still uploading")
	r1.produce(ctx, b, 1, 0, 9, 10)
	require.NoError(t, r1.leader.WaitDurable(ctx, b, 9), "b's object does not wait for a's slow one")
	assert.Equal(t, int64(-1), r1.leader.DurableOffset(a), "a's second object waits for its first")
	require.NoError(t, r1.leader.WaitDurable(ctx, a, 19))

	// In the metadata log: b first, then a's entries in offset order.
	var order []string
	recs, err := c.meta.Read(ctx, 0, 0, 100)
	require.NoError(t, err)
	for _, r := range recs {
		m, err := metadata.DecodeMessage(r.Value)
		require.NoError(t, err)
		for _, e := range m.Entries {
			order = append(order, e.Partition.String()+"@"+itoa(e.FirstOffset))
		}
	}
	assert.Equal(t, []string{"events-1@0", "events-0@0", "events-0@10"}, order)
}

func TestLeaderRejectsInvalidConfig(t *testing.T) {
	c := newCluster(t, 1)
	b := c.addBroker(1, "az1")
	base := func() walstore.LeaderConfig {
		return walstore.LeaderConfig{Store: b.store, Log: c.meta, Local: b.local, Followers: c.followers}
	}
	tests := []struct {
		field string
		mod   func(*walstore.LeaderConfig)
	}{
		{"Store", func(c *walstore.LeaderConfig) { c.Store = nil }},
		{"Log", func(c *walstore.LeaderConfig) { c.Log = nil }},
		{"Followers", func(c *walstore.LeaderConfig) { c.Followers = nil }},
		{"Local", func(c *walstore.LeaderConfig) { c.Local = nil }},
		{"BrokerID", func(c *walstore.LeaderConfig) { c.BrokerID = -1 }},
		{"Codec", func(c *walstore.LeaderConfig) { c.Codec = 7 }},
		{"Interval", func(c *walstore.LeaderConfig) { c.Interval = -time.Second }},
		{"BufferBytes", func(c *walstore.LeaderConfig) { c.BufferBytes = -1 }},
		{"ObjectBytes", func(c *walstore.LeaderConfig) { c.ObjectBytes, c.BufferBytes = 2<<20, 1<<20 }},
		{"MaxInflight", func(c *walstore.LeaderConfig) { c.MaxInflight = -3 }},
		{"Overflow", func(c *walstore.LeaderConfig) { c.Overflow = 9 }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			cfg := base()
			tt.mod(&cfg)
			_, err := walstore.NewLeader(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
	_, err := walstore.NewLeader(base())
	require.NoError(t, err)
}

func TestLeaderAppendErrors(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 1)
	r1 := c.addBroker(1, "az1")
	c.setReplicas(testTP, 1)
	l := r1.startLeader(walstore.LeaderConfig{BufferBytes: 1000, ObjectBytes: 1000})
	err := l.Append(ctx, testTP, makeBatch(testTP, 1, 0, 0))
	assert.ErrorIs(t, err, walstore.ErrNotLeader)
	r1.becomeLeader(ctx, testTP, 1, -1)
	err = l.Append(ctx, testTP, makeBatch(testTP, 2, 0, 0))
	assert.ErrorContains(t, err, "newer than leader epoch")
	big := makeBatch(testTP, 1, 0, 0)
	big.Data = make([]byte, 1001)
	assert.ErrorIs(t, l.Append(ctx, testTP, big), walstore.ErrBufferFull)
	r1.stop()
	assert.ErrorIs(t, l.Append(ctx, testTP, makeBatch(testTP, 1, 0, 0)), walstore.ErrStopped)
	assert.True(t, errors.Is(l.WaitDurable(ctx, testTP, 0), walstore.ErrStopped))
}
