package memstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/walstore"
	"github.com/activetier/activetier/walstore/walstoretest"
)

func TestObjectStoreConformance(t *testing.T) {
	walstoretest.Run(t, walstoretest.HarnessFunc(func(_ context.Context, t *testing.T) (walstore.ObjectStore, walstore.ObjectStore) {
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
