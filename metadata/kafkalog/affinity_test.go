package kafkalog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/activetier/activetier/metadata"
)

// entryKey identifies one entry (or, with marker set, one epoch-start
// marker) across encoding and decoding.
type entryKey struct {
	tp     metadata.TopicPartition
	object string
	first  int64
	marker bool
}

// TestFollowerAffinity publishes a cluster's flushes through the
// follower-affinity partitioner and shows that a broker reading its one
// metadata partition receives only entries for partitions it follows plus
// those of the brokers that share its partition (id % N): 12 brokers, N=4,
// 120 data partitions with RF=3.
func TestFollowerAffinity(t *testing.T) {
	const (
		brokers        = 12
		n              = 4
		rf             = 3
		flushes        = 3
		seed    uint64 = 20250828
	)
	r := rand.New(rand.NewPCG(seed, seed))
	t.Logf("seed %d", seed)

	// The placement: each data partition's leader and two followers on
	// distinct brokers, chosen at random.
	var parts []metadata.TopicPartition
	parts = append(parts, topicPartitions("orders", 64)...)
	parts = append(parts, topicPartitions("payments", 32)...)
	parts = append(parts, topicPartitions("audit", 24)...)
	leaderOf := map[metadata.TopicPartition]int32{}
	followersOf := map[metadata.TopicPartition][]int32{}
	for _, tp := range parts {
		replicas := r.Perm(brokers)[:rf]
		leaderOf[tp] = int32(replicas[0])
		for _, f := range replicas[1:] {
			followersOf[tp] = append(followersOf[tp], int32(f))
		}
	}
	followers := func(tp metadata.TopicPartition) []int32 { return followersOf[tp] }

	c := newCluster(t, kfake.SeedTopics(n, testTopic))
	publisher := openLog(t, c, Config{Partitions: n})
	partitioner, err := metadata.NewPartitioner(publisher.Partitions())
	require.NoError(t, err)
	ctx := testContext(t)

	// Every broker publishes, per flush, one object holding the partitions
	// it leads, and an epoch-start marker for one of them on the first
	// flush, as after a leader election.
	published := map[entryKey]metadata.TopicPartition{}
	written, wire := 0, 0
	for flush := range flushes {
		for leader := range int32(brokers) {
			var led []metadata.TopicPartition
			for _, tp := range parts {
				if leaderOf[tp] == leader {
					led = append(led, tp)
				}
			}
			if len(led) == 0 {
				continue
			}
			m := flushMessage(r, leader, fmt.Sprintf("flush-%d", flush), led)
			if flush == 0 {
				m.Markers = append(m.Markers, metadata.EpochStart{Partition: led[0], Epoch: 7, StartOffset: 4_000_000, LeaderBrokerID: leader})
			}
			for _, k := range keysOf(m) {
				published[k] = k.tp
			}
			routed, err := partitioner.Split(m, followers)
			require.NoError(t, err, "seed %d", seed)
			for _, rt := range routed {
				v, err := metadata.AppendMessage(nil, rt.Message)
				require.NoError(t, err)
				written += len(rt.Message.Entries) + len(rt.Message.Markers)
				wire += len(v)
				_, err = publisher.Append(ctx, rt.Partition, v)
				require.NoError(t, err)
			}
		}
	}

	for b := range int32(brokers) {
		// Each broker has its own log and reads only its partition.
		l := openLog(t, c, Config{Partitions: n})
		mine, err := partitioner.For(b)
		require.NoError(t, err)
		_, high, err := l.Watermarks(ctx, mine)
		require.NoError(t, err)

		received := map[entryKey]int{}
		for _, rec := range readAll(t, l, mine, 0, int(high), 64) {
			m, err := metadata.DecodeMessage(rec.Value)
			require.NoError(t, err, "message at offset %d of partition %d", rec.Offset, mine)
			for _, k := range keysOf(m) {
				received[k]++
			}
		}

		// Expected: everything for a partition that b, or a broker
		// sharing b's metadata partition, follows; each once.
		want := map[entryKey]int{}
		follows := 0
		for k, tp := range published {
			if slices.Contains(followersOf[tp], b) {
				follows++
			}
			if slices.ContainsFunc(followersOf[tp], func(f int32) bool { return f%n == b%n }) {
				want[k] = 1
			}
		}
		require.Equal(t, want, received, "broker %d reading metadata partition %d (seed %d)", b, mine, seed)
		for k, tp := range published {
			if slices.Contains(followersOf[tp], b) {
				assert.Contains(t, received, k, "broker %d follows %s", b, tp)
			}
		}
		t.Logf("broker %2d reads partition %d: %3d entries and markers, %3d for partitions it follows", b, mine, len(received), follows)
	}
	t.Logf("%d entries and markers published, %d written (%.2f copies each), %.1f bytes each on the wire",
		len(published), written, float64(written)/float64(len(published)), float64(wire)/float64(written))
}

// keysOf lists the entries and markers of m.
func keysOf(m *metadata.Message) []entryKey {
	var out []entryKey
	for _, e := range m.Entries {
		out = append(out, entryKey{tp: e.Partition, object: e.Object.Key, first: e.FirstOffset})
	}
	for _, s := range m.Markers {
		out = append(out, entryKey{tp: s.Partition, first: s.StartOffset, marker: true})
	}
	return out
}
