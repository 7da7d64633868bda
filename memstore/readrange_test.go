package memstore_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

func newStores(t *testing.T) (*memstore.Cluster, *memstore.Store, *memstore.Store) {
	t.Helper()
	c, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1", "az2": "b2"}, Seed: 1})
	require.NoError(t, err)
	local, err := c.Store("az1")
	require.NoError(t, err)
	peer, err := c.Store("az2")
	require.NoError(t, err)
	return c, local, peer
}

// TestReadRange: ReadRange reads what GetRange returns for the same range,
// into the caller's buffer, and fails as GetRange does.
func TestReadRange(t *testing.T) {
	ctx := context.Background()
	_, local, peer := newStores(t)
	body := bytes.Repeat([]byte("0123456789"), 100)
	ref, err := local.Put(ctx, "k", body)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		ref    metadata.ObjectRef
		offset int64
		n      int
		err    error
	}{
		{"whole object", ref, 0, len(body), nil},
		{"inside", ref, 17, 333, nil},
		{"last byte", ref, int64(len(body) - 1), 1, nil},
		{"past the end", ref, int64(len(body) - 1), 2, storage.ErrInvalidRange},
		{"empty", ref, 0, 0, storage.ErrInvalidRange},
		{"negative offset", ref, -1, 5, storage.ErrInvalidRange},
		{"missing object", metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: "nope"}, 0, 5, storage.ErrNotFound},
		{"unknown bucket", metadata.ObjectRef{AZ: "az9", Bucket: "b9", Key: "k"}, 0, 5, storage.ErrUnknownBucket},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := bytes.Repeat([]byte{0xee}, tc.n)
			n, err := peer.ReadRange(ctx, tc.ref, tc.offset, dst)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Zero(t, n)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.n, n)
			want, err := peer.GetRange(ctx, tc.ref, tc.offset, int64(tc.n))
			require.NoError(t, err)
			require.Equal(t, want, dst)
		})
	}
}

// TestDeletedMemoryReuse: a Put reuses a deleted object's memory, and that
// changes nothing that was read before, nor any object still stored,
// including one whose Put failed after it took effect.
func TestDeletedMemoryReuse(t *testing.T) {
	ctx := context.Background()
	c, local, _ := newStores(t)
	a := bytes.Repeat([]byte{'a'}, 100_000)
	refA, err := local.Put(ctx, "a", a)
	require.NoError(t, err)
	readA, err := local.GetRange(ctx, refA, 0, int64(len(a)))
	require.NoError(t, err)
	remove := c.AddFault(faults.On(faults.IsOp(faults.OpPut), faults.FailAfter(storage.ErrUnavailable)))
	kept := bytes.Repeat([]byte{'k'}, 100_000)
	_, err = local.Put(ctx, "kept", kept)
	require.ErrorIs(t, err, storage.ErrUnavailable, "the Put took effect, then failed")
	remove()
	require.NoError(t, local.Delete(ctx, []metadata.ObjectRef{refA}))
	for _, key := range []string{"b", "c"} {
		body := bytes.Repeat([]byte(key), 100_000)
		ref, err := local.Put(ctx, key, body)
		require.NoError(t, err)
		got, err := local.GetRange(ctx, ref, 0, int64(len(body)))
		require.NoError(t, err)
		require.Equal(t, body, got)
	}
	require.Equal(t, a, readA, "what was read before the delete changed")
	got, err := local.GetRange(ctx, metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: "kept"}, 0, int64(len(kept)))
	require.NoError(t, err)
	require.Equal(t, kept, got, "an object stored by a Put that failed afterwards was overwritten")
	_, err = local.GetRange(ctx, refA, 0, 1)
	require.ErrorIs(t, err, storage.ErrNotFound)
}
