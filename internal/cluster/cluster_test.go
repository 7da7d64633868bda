package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/cluster"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

var (
	tpA = metadata.TopicPartition{Topic: "orders", Partition: 0}
	tpB = metadata.TopicPartition{Topic: "orders", Partition: 1}
)

// newCluster returns brokers 1, 2, 3 in az1, az2, az3 on memstore, every
// one a replica of tpA (led by 1) and tpB (led by 2), their Nodes running
// and both partitions started.
func newCluster(t *testing.T) (*cluster.Cluster, *memstore.Cluster) {
	t.Helper()
	objects, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "b1", "az2": "b2", "az3": "b3"}, Seed: 1})
	require.NoError(t, err)
	meta, err := memstore.NewLog(4, memstore.WithMaxPollWait(20*time.Millisecond))
	require.NoError(t, err)
	c := cluster.New(meta)
	for i, az := range []string{"az1", "az2", "az3"} {
		store, err := objects.Store(az)
		require.NoError(t, err)
		c.AddBroker(int32(i+1), az, store, memstore.NewLocalLog())
	}
	c.SetReplicas(tpA, 1, 2, 3)
	c.SetLeader(tpA, 1, 0)
	c.SetReplicas(tpB, 2, 3, 1)
	c.SetLeader(tpB, 2, 0)
	for _, b := range c.Brokers() {
		_, err := b.Start(walstore.NodeConfig{Interval: 5 * time.Millisecond,
			Backoff: walstore.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond}})
		require.NoError(t, err)
	}
	ctx := context.Background()
	for _, tp := range c.Partitions() {
		require.NoError(t, c.StartPartition(ctx, tp))
	}
	return c, objects
}

// produce appends n one-record batches at the end of tp's leader's log.
func produce(t *testing.T, c *cluster.Cluster, tp metadata.TopicPartition, n int) {
	t.Helper()
	ctx := context.Background()
	l, epoch := c.Leader(tp)
	require.NotNil(t, l, "%s is offline", tp)
	for range n {
		end, err := l.Local.EndOffset(tp)
		require.NoError(t, err)
		b := storage.Batch{Epoch: epoch, FirstOffset: end, LastOffset: end, Data: fmt.Appendf(nil, "%s e%d o%d", tp, epoch, end)}
		require.NoError(t, l.Local.Append(ctx, tp, []storage.Batch{b}))
		require.NoError(t, l.Node.Append(ctx, tp, b))
	}
}

// requireCaughtUp waits until no live follower is behind its leader, and
// requires the logs of the followers (compared of them) to be their
// leaders', byte for byte.
func requireCaughtUp(t *testing.T, c *cluster.Cluster, compared int, why string) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, _, err := c.Behind()
		return err == nil && n == 0
	}, 20*time.Second, 5*time.Millisecond)
	got, diffs := c.Compare()
	assert.Empty(t, diffs)
	assert.Equal(t, compared, got, why)
}

func TestPlacementAndLeaders(t *testing.T) {
	c, _ := newCluster(t)
	defer func() { require.NoError(t, c.Close()) }()
	assert.Equal(t, []metadata.TopicPartition{tpA, tpB}, c.Partitions())
	assert.Equal(t, []int32{3, 1}, c.Followers(tpB))
	l, epoch := c.Leader(tpB)
	assert.Equal(t, int32(2), l.ID)
	assert.Zero(t, epoch)
	assert.Len(t, c.LiveReplicas(), 4)
	for _, b := range c.Brokers() {
		assert.True(t, b.Running())
		assert.True(t, b.Live())
	}
	nobody, _ := c.Leader(metadata.TopicPartition{Topic: "none"})
	assert.Nil(t, nobody)
}

// An AZ fails: its brokers crash, the partitions they led go offline, and
// Elect moves each to the survivor with the longest log at the next epoch,
// republishing for the shorter one; the survivors converge on it.
func TestCrashAndElect(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		az      string
		moved   []metadata.TopicPartition
		crashed int32
	}{
		{"leader of A", "az1", []metadata.TopicPartition{tpA}, 1},
		{"leader of B", "az2", []metadata.TopicPartition{tpB}, 2},
		{"no leader", "az3", nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, objects := newCluster(t)
			produce(t, c, tpA, 20)
			produce(t, c, tpB, 20)
			requireCaughtUp(t, c, 4, "two partitions, two live followers each")

			require.NoError(t, objects.SetOutage(tc.az, true))
			crashed, moved := c.Crash(tc.az)
			require.Len(t, crashed, 1)
			assert.Equal(t, tc.crashed, crashed[0].ID)
			assert.False(t, crashed[0].Live())
			assert.False(t, crashed[0].Running())
			assert.NotNil(t, crashed[0].Node, "a crashed broker's last Node stays readable")
			assert.Equal(t, tc.moved, moved)
			for _, tp := range moved {
				l, _ := c.Leader(tp)
				assert.Nil(t, l, "%s is offline until elected", tp)
				e, err := c.Elect(ctx, tp)
				require.NoError(t, err)
				assert.Equal(t, int32(1), e.Epoch)
				assert.Equal(t, tc.crashed, e.OldLeader.ID)
				assert.NotEqual(t, tc.crashed, e.Leader.ID)
				assert.Equal(t, int64(20), e.Start, "every record was replicated")
				assert.Zero(t, e.Lost())
				assert.Equal(t, int64(-1), e.RepublishFrom, "the follower has the whole log")
				l, epoch := c.Leader(tp)
				assert.Equal(t, e.Leader, l)
				assert.Equal(t, e.Epoch, epoch)
			}
			require.NoError(t, c.ShrinkInSync())
			produce(t, c, tpA, 5)
			produce(t, c, tpB, 5)
			requireCaughtUp(t, c, 2, "each partition keeps one live follower")
			require.NoError(t, c.Close())
			assert.NoError(t, c.Failed())
		})
	}
}

func TestElectWithEveryReplicaDown(t *testing.T) {
	c, _ := newCluster(t)
	defer func() { require.NoError(t, c.Close()) }()
	c.Crash("az1")
	c.Crash("az2")
	c.Crash("az3")
	_, err := c.Elect(context.Background(), tpA)
	require.ErrorContains(t, err, "every replica is in the failed AZ")
}

func TestStopAndRestart(t *testing.T) {
	c, _ := newCluster(t)
	defer func() { require.NoError(t, c.Close()) }()
	b := c.Broker(3)
	old := b.Node
	require.NoError(t, b.Stop())
	require.NoError(t, b.Stop(), "stopping a stopped broker does nothing")
	assert.False(t, b.Running())
	assert.True(t, b.Live(), "a stop is not a crash")
	n, err := b.Start(walstore.NodeConfig{Interval: 5 * time.Millisecond})
	require.NoError(t, err)
	assert.NotSame(t, old, n)
	assert.Same(t, n, b.Node)
}

func TestDiffLogs(t *testing.T) {
	batch := func(epoch int32, first, last int64, data string) storage.Batch {
		return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: []byte(data)}
	}
	a, b := batch(0, 0, 9, "a"), batch(0, 10, 19, "b")
	for _, tc := range []struct {
		name      string
		want, got []storage.Batch
		diff      string
	}{
		{"equal", []storage.Batch{a, b}, []storage.Batch{a, b}, ""},
		{"both empty", nil, nil, ""},
		{"shorter", []storage.Batch{a, b}, []storage.Batch{a}, "1 batches, the leader has 2"},
		{"longer", []storage.Batch{a}, []storage.Batch{a, b}, "2 batches, the leader has 1"},
		{"offsets", []storage.Batch{a, b}, []storage.Batch{a, batch(0, 10, 18, "b")}, "batch 1 holds offsets 10-18, the leader's 10-19"},
		{"epoch", []storage.Batch{a, b}, []storage.Batch{a, batch(1, 10, 19, "b")}, "batch 1 (offsets 10-19) has epoch 1, the leader's 0"},
		{"bytes", []storage.Batch{a, b}, []storage.Batch{a, batch(0, 10, 19, "c")}, "batch 1 (offsets 10-19) has different bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.diff, cluster.DiffLogs(tc.want, tc.got))
			assert.Equal(t, tc.diff == "", cluster.SameBatches(tc.want, tc.got))
		})
	}
}
