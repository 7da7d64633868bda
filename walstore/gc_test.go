package walstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/walstore"
)

func listLocal(t *testing.T, b *clustertest.Broker) int {
	t.Helper()
	infos, err := b.Store.List(context.Background(), b.Store.Local().Bucket, "")
	require.NoError(t, err)
	return len(infos)
}

func TestGCDeletesOnlyWhenEveryFollowerAppliedAndTiered(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 4)
	r1, r2, r3 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2"), c.AddBroker(3, "az3")
	c.SetReplicas(clustertest.TP, 1, 2, 3)
	c.SetLeader(clustertest.TP, 1, 1)
	l := r1.StartLeader(walstore.NodeConfig{GCInterval: time.Hour})
	r1.BecomeLeader(ctx, clustertest.TP, 1, -1)
	r1.Produce(ctx, clustertest.TP, 1, 0, 29, 10)
	require.NoError(t, l.WaitDurable(ctx, clustertest.TP, 1, 29))
	r1.Produce(ctx, clustertest.TP, 1, 30, 59, 10)
	require.NoError(t, l.WaitDurable(ctx, clustertest.TP, 1, 59))
	objects := listLocal(t, r1)
	require.Positive(t, objects)

	collect := func() int {
		n, err := l.CollectGarbage(ctx)
		require.NoError(t, err)
		return n
	}
	assert.Zero(t, collect(), "no follower has applied anything")

	r2.StartFollower(clustertest.TP)
	clustertest.RequireConverges(t, r2, r1, clustertest.TP)
	assert.Zero(t, collect(), "R3 has applied nothing yet")
	assert.Equal(t, objects, listLocal(t, r1))

	l.ReportTiered(clustertest.TP, 30)
	r3.StartFollower(clustertest.TP)
	clustertest.RequireConverges(t, r3, r1, clustertest.TP)
	require.Eventually(t, func() bool { return collect() > 0 }, 10*time.Second, time.Millisecond,
		"objects below the tiered mark go once both followers applied them")
	remaining := listLocal(t, r1)
	assert.Positive(t, remaining, "objects at or above the tiered mark stay")

	l.ReportTiered(clustertest.TP, 60)
	assert.Equal(t, remaining, collect())
	assert.Zero(t, listLocal(t, r1))
	assert.Zero(t, collect(), "collecting again is a no-op")
	assert.Equal(t, uint64(objects), l.Stats().Leader.ObjectsDeleted)

	// With every object gone, the metadata can be trimmed down to the
	// latest markers, and a restarted follower still finds its lineage.
	marks := l.MetadataLowMarks()
	require.NoError(t, walstore.TrimMetadata(ctx, c.Meta, marks))
	for p, off := range marks {
		low, _, err := c.Meta.Watermarks(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, off, low, "metadata partition %d", p)
	}
	r3.Stop()
	r1.Produce(ctx, clustertest.TP, 1, 60, 69, 10)
	r3.StartFollower(clustertest.TP)
	clustertest.RequireConverges(t, r3, r1, clustertest.TP)
}

func TestSweepDeletesUntrackedObjectsOlderThanAge(t *testing.T) {
	ctx := context.Background()
	c := clustertest.New(t, clustertest.Mem(), 1)
	r1 := c.AddBroker(1, "az1")
	c.SetReplicas(clustertest.TP, 1, 2)
	c.SetLeader(clustertest.TP, 1, 1)
	l := r1.StartLeader(walstore.NodeConfig{GCInterval: time.Hour})
	r1.BecomeLeader(ctx, clustertest.TP, 1, -1)
	r1.Produce(ctx, clustertest.TP, 1, 0, 9, 10)
	require.NoError(t, l.WaitDurable(ctx, clustertest.TP, 1, 9))

	// An orphan: an upload under this broker's prefix nobody tracks.
	_, err := r1.Store.Put(ctx, "1/orphan.wal", []byte("lost acknowledgement"))
	require.NoError(t, err)
	n, err := l.Sweep(ctx, time.Hour)
	require.NoError(t, err)
	assert.Zero(t, n, "young orphans are left alone")
	n, err = l.Sweep(ctx, -time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "only the orphan goes; the tracked object stays, follower 2 has not applied it")
	assert.Equal(t, 1, listLocal(t, r1))

	// Once the broker no longer leads, the new leader serves follower 2:
	// the object is abandoned, and Sweep takes it.
	require.NoError(t, l.BecomeFollower(ctx, clustertest.TP, 2, 2))
	n, err = l.Sweep(ctx, -time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Zero(t, listLocal(t, r1))
}
