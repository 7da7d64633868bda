package walstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/walstore"
)

func listLocal(t *testing.T, b *broker) int {
	t.Helper()
	infos, err := b.store.List(context.Background(), b.store.Local().Bucket, "")
	require.NoError(t, err)
	return len(infos)
}

func TestGCDeletesOnlyWhenEveryFollowerAppliedAndTiered(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4)
	r1, r2, r3 := c.addBroker(1, "az1"), c.addBroker(2, "az2"), c.addBroker(3, "az3")
	c.setReplicas(testTP, 1, 2, 3)
	c.setLeader(testTP, 1, 1)
	l := r1.startLeader(walstore.LeaderConfig{GCInterval: time.Hour})
	r1.becomeLeader(ctx, testTP, 1, -1)
	r1.produce(ctx, testTP, 1, 0, 29, 10)
	require.NoError(t, l.WaitDurable(ctx, testTP, 29))
	r1.produce(ctx, testTP, 1, 30, 59, 10)
	require.NoError(t, l.WaitDurable(ctx, testTP, 59))
	objects := listLocal(t, r1)
	require.Positive(t, objects)

	collect := func() int {
		n, err := l.CollectGarbage(ctx)
		require.NoError(t, err)
		return n
	}
	assert.Zero(t, collect(), "no follower has applied anything")

	r2.startFollower()
	requireConverges(t, r2, r1, testTP)
	assert.Zero(t, collect(), "R3 has applied nothing yet")
	assert.Equal(t, objects, listLocal(t, r1))

	l.ReportTiered(testTP, 30)
	r3.startFollower()
	requireConverges(t, r3, r1, testTP)
	require.Eventually(t, func() bool { return collect() > 0 }, 10*time.Second, time.Millisecond,
		"objects below the tiered mark go once both followers applied them")
	remaining := listLocal(t, r1)
	assert.Positive(t, remaining, "objects at or above the tiered mark stay")

	l.ReportTiered(testTP, 60)
	assert.Equal(t, remaining, collect())
	assert.Zero(t, listLocal(t, r1))
	assert.Zero(t, collect(), "collecting again is a no-op")
	assert.Equal(t, uint64(objects), l.Stats().ObjectsDeleted)

	// With every object gone, the metadata can be trimmed down to the
	// latest markers, and a restarted follower still finds its lineage.
	marks := l.MetadataLowMarks()
	require.NoError(t, walstore.TrimMetadata(ctx, c.meta, marks))
	for p, off := range marks {
		low, _, err := c.meta.Watermarks(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, off, low, "metadata partition %d", p)
	}
	r3.stop()
	r1.produce(ctx, testTP, 1, 60, 69, 10)
	r3.startFollower()
	requireConverges(t, r3, r1, testTP)
}

func TestSweepDeletesUntrackedObjectsOlderThanAge(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 1)
	r1 := c.addBroker(1, "az1")
	c.setReplicas(testTP, 1)
	l := r1.startLeader(walstore.LeaderConfig{GCInterval: time.Hour})
	r1.becomeLeader(ctx, testTP, 1, -1)
	r1.produce(ctx, testTP, 1, 0, 9, 10)
	require.NoError(t, l.WaitDurable(ctx, testTP, 9))

	// An orphan: an upload under this broker's prefix nobody tracks.
	_, err := r1.store.Put(ctx, "1/orphan.wal", []byte("lost acknowledgement"))
	require.NoError(t, err)
	n, err := l.Sweep(ctx, time.Hour)
	require.NoError(t, err)
	assert.Zero(t, n, "young orphans are left alone")
	n, err = l.Sweep(ctx, -time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "only the orphan goes; the tracked object stays")
	assert.Equal(t, 1, listLocal(t, r1))
}
