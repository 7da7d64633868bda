package sim

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// A broker's store is a storage.RangeReader, as memstore's is, and its
// ReadRange meets the chaos its GetRange does: memstore.Store's own,
// promoted, would read around the simulated faults.
func TestSimStoreReadRangeMeetsTheChaos(t *testing.T) {
	ctx := context.Background()
	c, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{azName(0): bucketName(0)}, Seed: 1})
	require.NoError(t, err)
	st, err := c.Store(azName(0))
	require.NoError(t, err)
	w := &world{chaos: newChaos(1, memstore.Profile{}), objects: make(map[metadata.ObjectRef]*object)}
	s := newSimStore(st, w, &broker{w: w, id: 1})
	var rr storage.RangeReader = s
	body := []byte("0123456789abcdef")
	ref, err := st.Put(ctx, "k", body)
	require.NoError(t, err)

	dst := make([]byte, len(body))
	n, err := rr.ReadRange(ctx, ref, 0, dst)
	require.NoError(t, err)
	require.Equal(t, body, dst[:n])
	_, err = rr.ReadRange(ctx, ref, 0, nil)
	require.ErrorIs(t, err, storage.ErrInvalidRange)

	remove := w.chaos.add(&fault{op: faults.OpGetRange, rate: 1, err: true})
	_, err = rr.ReadRange(ctx, ref, 0, dst)
	require.ErrorIs(t, err, storage.ErrUnavailable, "the injected fault")
	remove()

	w.chaos.add(&fault{op: faults.OpGetRange, rate: 1, corrupt: true})
	n, err = rr.ReadRange(ctx, ref, 0, dst)
	require.NoError(t, err)
	require.Equal(t, len(body), n)
	require.NotEqual(t, body, dst, "the corrupting fault")
	require.Len(t, s.lat, 3, "every GET's latency is kept; the empty read made none")
}
