package walstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// The seven scenarios of DESIGN.md §3, from the KIP-1176 thread, end to end
// over memstore. Each ends by comparing the followers' logs byte for byte
// with the leader's.

// uploadOldEpoch has broker r1 lead tp at epoch 5 from offset 100 and
// upload [100, last] in batches of 10, waiting until all is published.
func uploadOldEpoch(t *testing.T, ctx context.Context, r1 *broker, last int64) {
	r1.startLeader(walstore.LeaderConfig{})
	require.NoError(t, r1.local.Truncate(ctx, testTP, 100)) // the log starts at 100
	r1.becomeLeader(ctx, testTP, 5, -1)
	r1.produce(ctx, testTP, 5, 100, last, 10)
	require.NoError(t, r1.leader.WaitDurable(ctx, testTP, last))
}

func TestScenario1AZLossFollowerCatchesUpFromRepublish(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4)
	r1, r2, r3 := c.addBroker(1, "az1"), c.addBroker(2, "az2"), c.addBroker(3, "az3")
	c.setReplicas(testTP, 1, 2, 3)
	c.setLeader(testTP, 1, 5)

	// R1 uploaded 100-199 at epoch 5; R2 applied up to 149, R3 up to 119.
	uploadOldEpoch(t, ctx, r1, 199)
	r2.preload(testTP, 5, 100, 149, 10)
	r3.preload(testTP, 5, 100, 119, 10)

	// AZ1 goes down with its bucket; R1 stops.
	r1.stop()
	require.NoError(t, c.objects.SetOutage("az1", true))

	// R2 leads epoch 6 from 150 and republishes what R3 may lack.
	r2.startLeader(walstore.LeaderConfig{})
	r2.becomeLeader(ctx, testTP, 6, 120)
	r2.produce(ctx, testTP, 6, 150, 189, 10)
	f3 := r3.startFollower()

	requireConverges(t, r3, r2, testTP)
	for _, b := range r3.local.everAppended() {
		assert.False(t, b.Epoch == 5 && b.LastOffset >= 150, "R3 appended R1's fenced batch e5[%d-%d]", b.FirstOffset, b.LastOffset)
	}
	assert.Positive(t, f3.Stats().Applied)
}

func TestScenario2NewReplicaWithEmptyCacheBootstrapsFromRepublish(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4)
	r1, r2 := c.addBroker(1, "az1"), c.addBroker(2, "az2")
	c.setReplicas(testTP, 1, 2)
	c.setLeader(testTP, 1, 5)
	uploadOldEpoch(t, ctx, r1, 199)
	r2.preload(testTP, 5, 100, 149, 10)

	r1.stop()
	require.NoError(t, c.objects.SetOutage("az1", true))

	// The operator replaces R1 by a new, empty R3 in AZ3.
	r3 := c.addBroker(3, "az3")
	c.setReplicas(testTP, 2, 3)
	r2.startLeader(walstore.LeaderConfig{})
	r2.becomeLeader(ctx, testTP, 6, 100)
	r2.produce(ctx, testTP, 6, 150, 179, 10)
	r3.startFollower()

	requireConverges(t, r3, r2, testTP)
	epochs, err := r3.local.Epochs(testTP)
	require.NoError(t, err)
	require.Len(t, epochs, 2, "R3's epoch cache, built from nothing")
	assert.Equal(t, int32(5), epochs[0].Epoch)
	assert.Equal(t, int64(100), epochs[0].StartOffset)
	assert.Equal(t, int32(6), epochs[1].Epoch)
	assert.Equal(t, int64(150), epochs[1].StartOffset)
	// Nothing was read from AZ1's bucket after it went down.
	assert.Zero(t, c.objects.Stats().Buckets["bucket-az1"].GetRequests, "R3 never reads the dead bucket")
}

func TestScenario3ZombieLeaderIsFenced(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4)
	r1, r2, r3 := c.addBroker(1, "az1"), c.addBroker(2, "az2"), c.addBroker(3, "az3")
	c.setReplicas(testTP, 1, 2, 3)
	c.setLeader(testTP, 1, 5)
	uploadOldEpoch(t, ctx, r1, 149)
	r2.preload(testTP, 5, 100, 149, 10)
	f3 := r3.startFollower()
	requireConverges(t, r3, r1, testTP)

	// R2 becomes leader at epoch 6; R1 is never told and keeps going.
	r2.startLeader(walstore.LeaderConfig{})
	r2.becomeLeader(ctx, testTP, 6, -1)
	r1.produce(ctx, testTP, 5, 150, 199, 10)
	require.NoError(t, r1.leader.WaitDurable(ctx, testTP, 199), "the zombie's uploads succeed")
	r2.produce(ctx, testTP, 6, 150, 179, 10)

	requireConverges(t, r3, r2, testTP)
	for _, b := range r3.local.everAppended() {
		assert.False(t, b.Epoch == 5 && b.LastOffset >= 150, "R3 appended the zombie's e5[%d-%d]", b.FirstOffset, b.LastOffset)
	}
	assert.Positive(t, f3.Stats().Dropped, "the zombie's entries are dropped as stale")
}

func TestScenario4RepublishedEntriesArriveAfterNewerEpoch(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4)
	r1, r2, r3 := c.addBroker(1, "az1"), c.addBroker(2, "az2"), c.addBroker(3, "az3")
	c.setReplicas(testTP, 1, 2, 3)
	c.setLeader(testTP, 1, 5)
	uploadOldEpoch(t, ctx, r1, 199)
	r2.preload(testTP, 5, 100, 149, 10)
	r3.preload(testTP, 5, 100, 119, 10)
	r1.stop()
	require.NoError(t, c.objects.SetOutage("az1", true))

	// R2 publishes new-epoch data first and republishes only afterwards.
	r2.startLeader(walstore.LeaderConfig{})
	r2.becomeLeader(ctx, testTP, 6, -1)
	r2.produce(ctx, testTP, 6, 150, 189, 10)
	require.NoError(t, r2.leader.WaitDurable(ctx, testTP, 189))
	f3 := r3.startFollower()
	require.Eventually(t, func() bool { return f3.Stats().Held > 0 }, 10*time.Second, time.Millisecond,
		"R3 holds epoch-6 entries it cannot apply yet")
	require.NoError(t, r2.leader.Republish(ctx, testTP, 120))

	requireConverges(t, r3, r2, testTP)
}

func TestScenario5SameOffsetsAnnouncedTwiceAppliedOnce(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4)
	r1, r2, r3 := c.addBroker(1, "az1"), c.addBroker(2, "az2"), c.addBroker(3, "az3")
	c.setReplicas(testTP, 1, 2, 3)
	c.setLeader(testTP, 1, 5)
	uploadOldEpoch(t, ctx, r1, 149)
	r2.preload(testTP, 5, 100, 149, 10)

	// A clean leader change: AZ1 stays up, yet R2 republishes everything.
	r1.stop()
	r2.startLeader(walstore.LeaderConfig{})
	r2.becomeLeader(ctx, testTP, 6, 100)
	f3 := r3.startFollower()

	requireConverges(t, r3, r2, testTP)
	appended := r3.local.everAppended()
	seen := make(map[int64]bool)
	for _, b := range appended {
		require.False(t, seen[b.FirstOffset], "offset %d appended twice", b.FirstOffset)
		seen[b.FirstOffset] = true
	}
	require.Eventually(t, func() bool { return f3.Stats().Skipped > 0 }, 10*time.Second, time.Millisecond,
		"the second announcement is skipped as a duplicate")
}

func TestScenario6FollowerTruncatesDivergentTail(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4)
	r1, r2, r3 := c.addBroker(1, "az1"), c.addBroker(2, "az2"), c.addBroker(3, "az3")
	c.setReplicas(testTP, 1, 2, 3)
	c.setLeader(testTP, 1, 5)
	uploadOldEpoch(t, ctx, r1, 159)
	// R3 fetched 150-159 of epoch 5; R2 had only reached 149.
	r3.preload(testTP, 5, 100, 159, 10)
	r2.preload(testTP, 5, 100, 149, 10)
	r1.stop()

	r2.startLeader(walstore.LeaderConfig{})
	r2.becomeLeader(ctx, testTP, 6, -1)
	r2.produce(ctx, testTP, 6, 150, 179, 10)
	f3 := r3.startFollower()

	requireConverges(t, r3, r2, testTP)
	assert.Equal(t, uint64(1), f3.Stats().Truncations)
}

func TestScenario7CorruptRangeIsNeverAppended(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4)
	r1, r3 := c.addBroker(1, "az1"), c.addBroker(3, "az3")
	c.setReplicas(testTP, 1, 3)
	c.setLeader(testTP, 1, 5)

	// Every GET returns a flipped byte until the fault is removed.
	var corrupted atomic.Int64
	remove, err := c.objects.AddFault(memstore.Fault{
		Match: func(r memstore.Request) bool {
			if r.Op == memstore.OpGet {
				corrupted.Add(1)
				return true
			}
			return false
		},
		Corrupt: true,
	})
	require.NoError(t, err)
	uploadOldEpoch(t, ctx, r1, 149)
	f3 := r3.startFollower()
	require.Eventually(t, func() bool { return f3.Stats().Corrupt >= 3 }, 10*time.Second, time.Millisecond)
	end, err := r3.local.EndOffset(testTP)
	require.NoError(t, err)
	assert.Empty(t, r3.local.everAppended(), "nothing corrupt is appended (log end %d)", end)

	// The error names the object and the partition.
	mgr, err := walstore.NewManager(walstore.ManagerConfig{Store: r3.store})
	require.NoError(t, err)
	defer mgr.Close()
	entries := readEntries(t, c, 3, testTP)
	require.NotEmpty(t, entries)
	res, err := mgr.Fetch(ctx, entries[:1])
	require.NoError(t, err)
	var fe *walstore.FetchError
	require.ErrorAs(t, res[0].Err, &fe)
	assert.ErrorIs(t, res[0].Err, walstore.ErrCorrupt)
	assert.Contains(t, res[0].Err.Error(), entries[0].Object.Key)
	assert.Contains(t, res[0].Err.Error(), testTP.String())

	// Once reads are clean again, the follower catches up.
	remove()
	requireConverges(t, r3, r1, testTP)
}

// readEntries returns the entries of tp in the metadata partition broker
// reads.
func readEntries(t *testing.T, c *cluster, broker int32, tp metadata.TopicPartition) []metadata.Entry {
	t.Helper()
	ctx := context.Background()
	p := broker % c.meta.Partitions()
	recs, err := c.meta.Read(ctx, p, 0, 1000)
	require.NoError(t, err)
	var out []metadata.Entry
	for _, r := range recs {
		m, err := metadata.DecodeMessage(r.Value)
		require.NoError(t, err)
		for _, e := range m.Entries {
			if e.Partition == tp {
				out = append(out, e)
			}
		}
	}
	return out
}
