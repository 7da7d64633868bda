package clustertest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// The brokers' fault-injecting store keeps the optional interfaces of the
// backend's store (a follower reads into pooled buffers, as it would
// without the wrapper) and, with no fault set, the whole contract.
func TestFaultyStoreConformance(t *testing.T) {
	c := &Cluster{gets: make(map[string]int64)}
	storagetest.RunWrapper(t, memtest.Harness(), c.brokerStore, storagetest.ManyKeys(50))
}

// A ReadRange meets the faults a GetRange does: an error instead of the
// request, a changed byte in what it returns, a count per bucket.
func TestFaultyReadRange(t *testing.T) {
	ctx := context.Background()
	objects, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1"}, Seed: 1})
	require.NoError(t, err)
	inner, err := objects.Store("az1")
	require.NoError(t, err)
	c := &Cluster{gets: make(map[string]int64)}
	s := c.brokerStore(inner)
	rr, ok := s.(storage.RangeReader)
	require.True(t, ok)
	body := []byte("0123456789")
	ref, err := s.Put(ctx, "k", body)
	require.NoError(t, err)

	c.SetFault(faults.On(func(r faults.Request) bool { return r.Op.IsGet() }, faults.Always(faults.Effect{Corrupt: 5})))
	dst := make([]byte, len(body))
	n, err := rr.ReadRange(ctx, ref, 0, dst)
	require.NoError(t, err)
	require.Equal(t, len(body), n)
	require.NotEqual(t, body, dst, "corrupted")
	got, err := s.GetRange(ctx, ref, 0, int64(len(body)))
	require.NoError(t, err)
	require.Equal(t, dst, got, "the same byte as GetRange's")

	c.SetFault(faults.Fail(storage.ErrUnavailable))
	_, err = rr.ReadRange(ctx, ref, 0, dst)
	require.ErrorIs(t, err, storage.ErrUnavailable)
	require.Equal(t, int64(3), c.Gets("b1"))
}
