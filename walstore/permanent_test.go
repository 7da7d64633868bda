package walstore_test

import (
	"context"
	"errors"
	"fmt"
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

// refusingStore refuses every Put for good while refuse is set, as a
// server without the feature a request needs does (S3's 501).
type refusingStore struct {
	storage.ObjectStore
	refuse atomic.Bool
}

func (s *refusingStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	if s.refuse.Load() {
		return metadata.ObjectRef{}, fmt.Errorf("PUT %s: 501 NotImplemented: %w", key, storage.ErrPermanent)
	}
	return s.ObjectStore.Put(ctx, key, body)
}

// TestPermanentRefusalDegradesAtOnce: a store that refuses uploads for
// good degrades the Node at once, naming the refusal, rather than after
// DegradedAfter as for a transient failure; it recovers when the store
// accepts again (an operator fixed it), and nothing is lost.
func TestPermanentRefusalDegradesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		tp := tpA
		w := newWorld(t)
		store := &refusingStore{ObjectStore: w.store(1)}
		store.refuse.Store(true)
		local := memstore.NewLocalLog()
		n := w.start(1, walstore.NodeConfig{Store: store, Local: local,
			Interval: time.Millisecond, DegradedAfter: time.Hour})
		require.NoError(t, local.AssignEpoch(tp, 1, 0))
		require.NoError(t, n.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
		b := storage.Batch{Epoch: 1, FirstOffset: 0, LastOffset: 0, MaxTimestamp: 1, Data: []byte("x")}
		require.NoError(t, local.Append(ctx, tp, []storage.Batch{b}))
		require.NoError(t, n.Append(ctx, tp, b))
		time.Sleep(time.Second)
		synctest.Wait()
		h := n.Health()
		require.True(t, h.Degraded, "degraded within a second although DegradedAfter is an hour")
		require.True(t, errors.Is(h.Err, storage.ErrPermanent), "the cause is named: %v", h.Err)

		store.refuse.Store(false)
		require.NoError(t, n.WaitDurable(ctx, tp, 1, 0))
		synctest.Wait()
		require.False(t, n.Health().Degraded)
	})
}
