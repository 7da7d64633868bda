package memstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

func TestObjectStoreConformance(t *testing.T) {
	storagetest.Run(t, storagetest.HarnessFunc(func(_ context.Context, t *testing.T) (storage.ObjectStore, storage.ObjectStore) {
		c, err := memstore.NewCluster(memstore.ClusterConfig{
			Buckets: map[string]string{"use1-az4": "wal--use1-az4--x-s3", "use1-az6": "wal--use1-az6--x-s3"},
			Seed:    1,
		})
		require.NoError(t, err)
		local, err := c.Store("use1-az4")
		require.NoError(t, err)
		peer, err := c.Store("use1-az6")
		require.NoError(t, err)
		return local, peer
	}))
}
