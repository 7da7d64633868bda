package metering_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metadata/metadatatest"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/walstore"
	"github.com/activetier/activetier/walstore/walstoretest"
)

func newMeter(t testing.TB) *metering.Meter {
	m, err := metering.New(metering.Config{Prices: costmodel.S3Express2025()})
	require.NoError(t, err)
	return m
}

// The wrappers keep the contracts they wrap: the conformance suites pass
// through them, and what the suites did is counted.
func TestStoreConformance(t *testing.T) {
	m := newMeter(t)
	walstoretest.Run(t, walstoretest.HarnessFunc(func(_ context.Context, t *testing.T) (walstore.ObjectStore, walstore.ObjectStore) {
		c, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1", "az2": "b2"}, Seed: 1})
		require.NoError(t, err)
		local, err := c.Store("az1")
		require.NoError(t, err)
		peer, err := c.Store("az2")
		require.NoError(t, err)
		return m.Store(local), m.Store(peer)
	}), walstoretest.ManyKeys(50))
	s := m.Snapshot()
	for _, op := range s.Store {
		require.NotZero(t, op.Requests, "%s requests", op.Op)
	}
}

func TestLogConformance(t *testing.T) {
	m := newMeter(t)
	metadatatest.Run(t, func(t *testing.T, partitions int32) metadata.Log {
		l, err := memstore.NewLog(partitions)
		require.NoError(t, err)
		return m.Log(l)
	})
	s := m.Snapshot()
	require.NotZero(t, s.Log[0].Requests)
	require.NotZero(t, s.MetadataAppendedBytes)
}
