package memtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// Stores returns the stores of AZ az1 (bucket b1) and AZ az2 (bucket b2)
// of a new memstore cluster with no latency and a fixed seed: a broker's
// local store and a peer's, each seeing both buckets. It fails t if the
// cluster cannot be made.
func Stores(t testing.TB) (local, peer *memstore.Store) {
	t.Helper()
	c, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1", "az2": "b2"}, Seed: 1})
	require.NoError(t, err)
	local, err = c.Store("az1")
	require.NoError(t, err)
	peer, err = c.Store("az2")
	require.NoError(t, err)
	return local, peer
}

// Harness is a storagetest.Harness whose MakeStores returns new Stores
// for each test.
func Harness() storagetest.Harness {
	return storagetest.HarnessFunc(func(_ context.Context, t *testing.T) (storage.ObjectStore, storage.ObjectStore) {
		return Stores(t)
	})
}
