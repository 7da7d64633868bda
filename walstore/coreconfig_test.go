package walstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/walstore"
)

// TestCoreConfigs checks that the cores' configurations are a Node's
// settings with NewNode's defaults, and that a config NewNode refuses is
// refused alike.
func TestCoreConfigs(t *testing.T) {
	_, _, err := walstore.CoreConfigs(walstore.NodeConfig{})
	require.ErrorContains(t, err, "NodeConfig.Store is required")

	objects, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1"}})
	require.NoError(t, err)
	store, err := objects.Store("az1")
	require.NoError(t, err)
	meta, err := memstore.NewLog(3)
	require.NoError(t, err)
	cfg := walstore.NodeConfig{BrokerID: 2, Store: store, Log: meta, Local: memstore.NewLocalLog(), Seed: 7, Readahead: 4, MaxInflight: 2}

	bad := cfg
	bad.Interval = -time.Second
	_, _, err = walstore.CoreConfigs(bad)
	require.ErrorContains(t, err, "NodeConfig.Interval")

	lead, follow, err := walstore.CoreConfigs(cfg)
	require.NoError(t, err)
	assert.Equal(t, int32(2), lead.BrokerID)
	assert.Equal(t, int32(3), lead.MetadataPartitions)
	assert.Equal(t, 2, lead.MaxInflight)
	assert.Equal(t, 100*time.Millisecond, lead.Interval)
	assert.Equal(t, 4<<20, lead.ObjectBytes)
	assert.Equal(t, 64<<20, lead.BufferBytes)
	assert.Equal(t, 5*time.Second, lead.DegradedAfter)
	assert.Equal(t, 10*time.Millisecond, lead.BackoffInitial)
	assert.NotZero(t, lead.Hedge.Quantile, "hedging is on by default")
	assert.Equal(t, int32(2), follow.BrokerID)
	assert.Equal(t, 4, follow.Readahead)
	assert.Equal(t, 100_000, follow.MaxHeld)
	assert.Equal(t, 8, follow.FetchConcurrency)
	assert.Equal(t, time.Second, follow.HedgeAfter)
	assert.Equal(t, time.Second, follow.ReportInterval)
	assert.Equal(t, int64(walstore.DefaultCoalesceGap), follow.CoalesceGap)
	assert.NotEqual(t, lead.Seed, follow.Seed, "the cores draw from different seeds")
	assert.NotNil(t, lead.Logger)
	assert.NotNil(t, follow.Logger)
}
