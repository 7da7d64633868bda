package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// The seven scenarios of docs/design.md ("Failure scenarios"), end to end.
// Each ends by comparing the followers' logs byte for byte with the
// leader's, and what a direct reader yields with the leader's committed
// log. Offsets follow the example of that section, shifted to batch
// boundaries: the old leader wrote 100-199, the new epoch starts at 150.

// RunScenarios runs all seven scenarios as subtests on backend b.
func RunScenarios(t *testing.T, b Backend) {
	for _, s := range []struct {
		name string
		fn   func(*testing.T, Backend)
	}{
		{"Scenario1AZLoss", Scenario1AZLoss},
		{"Scenario2NewReplicaAfterAZLoss", Scenario2NewReplicaAfterAZLoss},
		{"Scenario3ZombieLeader", Scenario3ZombieLeader},
		{"Scenario4RepublishAfterNewerEpoch", Scenario4RepublishAfterNewerEpoch},
		{"Scenario5AnnouncedTwice", Scenario5AnnouncedTwice},
		{"Scenario6DivergentTail", Scenario6DivergentTail},
		{"Scenario7CorruptRange", Scenario7CorruptRange},
	} {
		t.Run(s.name, func(t *testing.T) { s.fn(t, b) })
	}
}

// uploadOldEpoch has r1 lead TP at epoch 5 from offset 100 and upload
// [100, last] in batches of 10, waiting until all is published.
func uploadOldEpoch(t *testing.T, ctx context.Context, r1 *Broker, last int64) {
	r1.StartLeader(walstore.NodeConfig{})
	require.NoError(t, r1.Local.Truncate(ctx, TP, 100)) // the log starts at 100
	r1.BecomeLeader(ctx, TP, 5, -1)
	r1.Produce(ctx, TP, 5, 100, last, 10)
	require.NoError(t, r1.Node.WaitDurable(ctx, TP, 5, last))
}

// threeAZs returns a cluster with brokers 1, 2 and 3 in az1, az2 and az3,
// all replicas of TP, and broker 1 its leader at epoch 5.
func threeAZs(t *testing.T, b Backend) (*Cluster, *Broker, *Broker, *Broker) {
	c := New(t, b, 4)
	r1, r2, r3 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2"), c.AddBroker(3, "az3")
	c.SetReplicas(TP, 1, 2, 3)
	c.SetLeader(TP, 1, 5)
	return c, r1, r2, r3
}

func requireNoFencedAppends(t *testing.T, b *Broker, fencedFrom int64) {
	t.Helper()
	for _, batch := range b.Local.EverAppended() {
		assert.False(t, batch.Epoch == 5 && batch.LastOffset >= fencedFrom,
			"broker %d appended the fenced batch e5[%d-%d]", b.ID, batch.FirstOffset, batch.LastOffset)
	}
}

// Scenario1AZLoss: RF=3; R1 in AZ1 uploaded 100-199 at epoch 5; R2 applied
// up to 149, R3 up to 119; AZ1 goes down with its bucket; R2 leads epoch 6
// from 150 and republishes from 120. R3 ends with exactly R2's log, and
// R1's entries past 149 are ignored.
func Scenario1AZLoss(t *testing.T, b Backend) {
	ctx := context.Background()
	c, r1, r2, r3 := threeAZs(t, b)
	uploadOldEpoch(t, ctx, r1, 199)
	r2.Preload(TP, 5, 100, 149, 10)
	r3.Preload(TP, 5, 100, 119, 10)

	r1.Stop()
	require.NoError(t, c.Objects.SetOutage("az1", true))

	r2.StartLeader(walstore.NodeConfig{})
	r2.BecomeLeader(ctx, TP, 6, 120)
	r2.Produce(ctx, TP, 6, 150, 189, 10)
	f3 := r3.StartFollower(TP)

	RequireConverges(t, r3, r2, TP)
	requireNoFencedAppends(t, r3, 150)
	assert.Positive(t, f3.Stats().Follower.Applied)
	RequireReaderConsistent(t, c, r2, TP, 120, 3) // 100-119 were only in the lost AZ
}

// Scenario2NewReplicaAfterAZLoss: RF=2; AZ1 goes down; a new replica R3
// with an empty log and epoch cache replaces R1 and catches up from what R2
// republished, never from AZ1.
func Scenario2NewReplicaAfterAZLoss(t *testing.T, b Backend) {
	ctx := context.Background()
	c := New(t, b, 4)
	r1, r2 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2")
	c.SetReplicas(TP, 1, 2)
	c.SetLeader(TP, 1, 5)
	uploadOldEpoch(t, ctx, r1, 199)
	r2.Preload(TP, 5, 100, 149, 10)

	r1.Stop()
	require.NoError(t, c.Objects.SetOutage("az1", true))

	r3 := c.AddBroker(3, "az3")
	c.SetReplicas(TP, 2, 3)
	r2.StartLeader(walstore.NodeConfig{})
	r2.BecomeLeader(ctx, TP, 6, 100)
	r2.Produce(ctx, TP, 6, 150, 179, 10)
	r3.StartFollower(TP)

	RequireConverges(t, r3, r2, TP)
	epochs, err := r3.Local.Epochs(TP)
	require.NoError(t, err)
	require.Len(t, epochs, 2, "R3's epoch cache, built from nothing")
	assert.Equal(t, int32(5), epochs[0].Epoch)
	assert.Equal(t, int64(100), epochs[0].StartOffset)
	assert.Equal(t, int32(6), epochs[1].Epoch)
	assert.Equal(t, int64(150), epochs[1].StartOffset)
	assert.Zero(t, c.Gets(r1.Store.Local().Bucket), "nothing is read from the dead AZ's bucket")
	RequireReaderConsistent(t, c, r2, TP, 100, 3)
}

// Scenario3ZombieLeader: R1 keeps uploading and publishing at epoch 5 after
// R2 leads epoch 6: nothing it sends after the fence is ever appended.
func Scenario3ZombieLeader(t *testing.T, b Backend) {
	ctx := context.Background()
	c, r1, r2, r3 := threeAZs(t, b)
	uploadOldEpoch(t, ctx, r1, 149)
	r2.Preload(TP, 5, 100, 149, 10)
	f3 := r3.StartFollower(TP)
	RequireConverges(t, r3, r1, TP)

	// R2 becomes leader at epoch 6; R1 is never told and keeps going.
	r2.StartLeader(walstore.NodeConfig{})
	r2.BecomeLeader(ctx, TP, 6, -1)
	r1.Produce(ctx, TP, 5, 150, 199, 10)
	require.NoError(t, r1.Node.WaitDurable(ctx, TP, 5, 199), "the zombie's uploads succeed")
	r2.Produce(ctx, TP, 6, 150, 179, 10)

	RequireConverges(t, r3, r2, TP)
	requireNoFencedAppends(t, r3, 150)
	require.Eventually(t, func() bool { return f3.Stats().Follower.Dropped > 0 }, 10*time.Second, time.Millisecond,
		"the zombie's entries are dropped as stale")
	RequireReaderConsistent(t, c, r2, TP, 100, 3) // the zombie is out of sync
}

// Scenario4RepublishAfterNewerEpoch: the republished entries arrive after
// entries of the newer epoch; the follower holds the latter and converges.
// R2 was told every follower holds the log (republishFrom -1), but R3
// reports that its log ends at 120: R2 republishes from there by itself,
// after the epoch-6 entries R3 reads first.
func Scenario4RepublishAfterNewerEpoch(t *testing.T, b Backend) {
	ctx := context.Background()
	c, r1, r2, r3 := threeAZs(t, b)
	uploadOldEpoch(t, ctx, r1, 199)
	r2.Preload(TP, 5, 100, 149, 10)
	r3.Preload(TP, 5, 100, 119, 10)
	r1.Stop()
	require.NoError(t, c.Objects.SetOutage("az1", true))

	r2.StartLeader(walstore.NodeConfig{})
	r2.BecomeLeader(ctx, TP, 6, -1)
	r2.Produce(ctx, TP, 6, 150, 189, 10)
	require.NoError(t, r2.Node.WaitDurable(ctx, TP, 6, 189))
	r3.StartFollower(TP)

	RequireConverges(t, r3, r2, TP)
	require.Positive(t, r2.Node.Stats().Leader.Republished, "R2 republished for R3 without being asked")
	RequireReaderConsistent(t, c, r2, TP, 120, 3)
}

// Scenario5AnnouncedTwice: the same offsets are announced from two
// buckets; they are applied once.
func Scenario5AnnouncedTwice(t *testing.T, b Backend) {
	ctx := context.Background()
	c, r1, r2, r3 := threeAZs(t, b)
	uploadOldEpoch(t, ctx, r1, 149)
	r2.Preload(TP, 5, 100, 149, 10)

	// A clean leader change: AZ1 stays up, yet R2 republishes everything.
	r1.Stop()
	r2.StartLeader(walstore.NodeConfig{})
	r2.BecomeLeader(ctx, TP, 6, 100)
	f3 := r3.StartFollower(TP)

	RequireConverges(t, r3, r2, TP)
	seen := make(map[int64]bool)
	for _, batch := range r3.Local.EverAppended() {
		require.False(t, seen[batch.FirstOffset], "offset %d appended twice", batch.FirstOffset)
		seen[batch.FirstOffset] = true
	}
	require.Eventually(t, func() bool { return f3.Stats().Follower.Skipped > 0 }, 10*time.Second, time.Millisecond,
		"the second announcement is skipped as a duplicate")
	RequireReaderConsistent(t, c, r2, TP, 100, 3)
}

// Scenario6DivergentTail: R3 applied 150-159 of epoch 5 before learning
// that epoch 6 starts at 150; it truncates to 150 and continues.
func Scenario6DivergentTail(t *testing.T, b Backend) {
	ctx := context.Background()
	c, r1, r2, r3 := threeAZs(t, b)
	uploadOldEpoch(t, ctx, r1, 159)
	r3.Preload(TP, 5, 100, 159, 10)
	r2.Preload(TP, 5, 100, 149, 10)
	r1.Stop()

	r2.StartLeader(walstore.NodeConfig{})
	r2.BecomeLeader(ctx, TP, 6, -1)
	r2.Produce(ctx, TP, 6, 150, 179, 10)
	f3 := r3.StartFollower(TP)

	RequireConverges(t, r3, r2, TP)
	assert.Equal(t, uint64(1), f3.Stats().Follower.Truncations)
	RequireReaderConsistent(t, c, r2, TP, 100, 3)
}

// Scenario7CorruptRange: every GET returns a flipped byte: nothing is
// appended, the error names the object and partition, and once reads are
// clean the follower catches up.
func Scenario7CorruptRange(t *testing.T, b Backend) {
	ctx := context.Background()
	c := New(t, b, 4)
	r1, r3 := c.AddBroker(1, "az1"), c.AddBroker(3, "az3")
	c.SetReplicas(TP, 1, 3)
	c.SetLeader(TP, 1, 5)
	c.SetFault(faults.On(func(r faults.Request) bool { return r.Op.IsGet() }, faults.Corrupt(7)))
	uploadOldEpoch(t, ctx, r1, 149)
	f3 := r3.StartFollower(TP)
	require.Eventually(t, func() bool { return f3.Stats().Follower.Corrupt >= 3 }, 10*time.Second, time.Millisecond)
	assert.Empty(t, r3.Local.EverAppended(), "nothing corrupt is appended")

	mgr, err := walstore.NewManager(walstore.ManagerConfig{Store: r3.Store})
	require.NoError(t, err)
	defer mgr.Close()
	entries := ReadEntries(t, c, 3, TP)
	require.NotEmpty(t, entries)
	res, err := mgr.Fetch(ctx, entries[:1])
	require.NoError(t, err)
	var fe *walstore.FetchError
	require.ErrorAs(t, res[0].Err, &fe)
	assert.ErrorIs(t, res[0].Err, walstore.ErrCorrupt)
	assert.Contains(t, res[0].Err.Error(), entries[0].Object.Key)
	assert.Contains(t, res[0].Err.Error(), TP.String())

	c.SetFault(nil)
	RequireConverges(t, r3, r1, TP)
	RequireReaderConsistent(t, c, r1, TP, 100)
}

// ReadEntries returns the entries of tp in the metadata partition broker
// reads.
func ReadEntries(t *testing.T, c *Cluster, broker int32, tp metadata.TopicPartition) []metadata.Entry {
	t.Helper()
	ctx := context.Background()
	p := broker % c.Meta.Partitions()
	low, high, err := c.Meta.Watermarks(ctx, p)
	require.NoError(t, err)
	var out []metadata.Entry
	for off := low; off < high; {
		recs, err := c.Meta.Read(ctx, p, off, 1000)
		require.NoError(t, err)
		for _, r := range recs {
			m, err := metadata.DecodeMessage(r.Value)
			require.NoError(t, err)
			for _, e := range m.Entries {
				if e.Partition == tp {
					out = append(out, e)
				}
			}
			off = r.Offset + 1
		}
	}
	return out
}
