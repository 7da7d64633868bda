package cluster_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/cluster"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
)

// Compare finds a follower that differs from its leader, and only it,
// reading the logs as they are (no Node needs to run).
func TestCompareFindsDivergedFollower(t *testing.T) {
	meta, err := memstore.NewLog(1)
	require.NoError(t, err)
	c := cluster.New(meta)
	defer func() { require.NoError(t, c.Close()) }()
	logs := []*memstore.LocalLog{memstore.NewLocalLog(), memstore.NewLocalLog(), memstore.NewLocalLog()}
	for i, l := range logs {
		c.AddBroker(int32(i+1), "az1", nil, l)
	}
	c.SetReplicas(tpA, 1, 2, 3)
	c.SetLeader(tpA, 1, 0)
	ctx := context.Background()
	a := storage.Batch{FirstOffset: 0, LastOffset: 9, Data: []byte("a")}
	b := storage.Batch{FirstOffset: 10, LastOffset: 19, Data: []byte("b")}
	require.NoError(t, logs[0].Append(ctx, tpA, []storage.Batch{a, b}))
	require.NoError(t, logs[1].Append(ctx, tpA, []storage.Batch{a, b}))
	b.Data = []byte("c")
	require.NoError(t, logs[2].Append(ctx, tpA, []storage.Batch{a, b}))

	compared, diffs := c.Compare()
	assert.Equal(t, 2, compared)
	assert.Equal(t, []string{tpA.String() + ": broker 3 differs from leader 1: batch 1 (offsets 10-19) has different bytes"}, diffs)
}

// DiffDigests is DiffLogs on digests, and with prefix accepts a log that
// ends early but not one that runs on or differs.
func TestDiffDigests(t *testing.T) {
	a := cluster.Digest(storage.Batch{FirstOffset: 0, LastOffset: 9, Data: []byte("a")})
	b := cluster.Digest(storage.Batch{FirstOffset: 10, LastOffset: 19, Data: []byte("b")})
	c := cluster.Digest(storage.Batch{FirstOffset: 10, LastOffset: 19, Data: []byte("c")})
	want := []cluster.BatchDigest{a, b}
	for _, prefix := range []bool{false, true} {
		assert.Empty(t, cluster.DiffDigests(want, want, prefix))
		assert.Equal(t, "2 batches, the leader has 1", cluster.DiffDigests(want[:1], want, prefix))
		assert.Equal(t, "batch 1 (offsets 10-19) has different bytes", cluster.DiffDigests(want, []cluster.BatchDigest{a, c}, prefix))
	}
	assert.Equal(t, "1 batches, the leader has 2", cluster.DiffDigests(want, want[:1], false))
	assert.Empty(t, cluster.DiffDigests(want, want[:1], true))
	assert.Empty(t, cluster.DiffDigests(want, nil, true))
}
