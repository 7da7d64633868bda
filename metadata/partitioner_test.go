package metadata

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewPartitionerRejectsNonPositive(t *testing.T) {
	for _, n := range []int32{0, -1, -50} {
		_, err := NewPartitioner(n)
		require.ErrorContains(t, err, fmt.Sprintf("partitions %d must be positive", n))
	}
	var zero Partitioner
	_, err := zero.For(1)
	require.ErrorIs(t, err, errNoPartitions)
	_, err = zero.Split(&Message{}, nil)
	require.ErrorIs(t, err, errNoPartitions)
}

func TestPartitionerFor(t *testing.T) {
	p, err := NewPartitioner(4)
	require.NoError(t, err)
	require.Equal(t, int32(4), p.Partitions())
	for _, tc := range []struct{ broker, want int32 }{
		{0, 0}, {1, 1}, {3, 3}, {4, 0}, {5, 1}, {11, 3}, {1<<31 - 1, 3},
	} {
		got, err := p.For(tc.broker)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "broker %d", tc.broker)
	}
	_, err = p.For(-1)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "follower broker id -1 is negative")
}

// splitFixture is one object of a 12-broker cluster: partitions 0..11 of
// topic "orders", partition i led by broker i, RF 3, followers i+1 and i+4
// (mod 12). With N = 4 metadata partitions, broker b reads partition b % 4.
func splitFixture() (*Message, func(TopicPartition) []int32) {
	m := &Message{Object: testObject, WriterBrokerID: 0}
	for i := range int32(12) {
		m.Entries = append(m.Entries, Entry{
			Partition: TopicPartition{Topic: "orders", Partition: i}, RecordEpoch: 1, PublisherEpoch: 1,
			FirstOffset: 100, LastOffset: 110, Object: testObject,
			Position: int64(i) * 1000, Length: 1000, UncompressedSize: 1000,
		})
	}
	followers := func(tp TopicPartition) []int32 {
		return []int32{(tp.Partition + 1) % 12, (tp.Partition + 4) % 12}
	}
	return m, followers
}

// partitionsOf returns the data partitions of msg's entries.
func partitionsOf(msg *Message) []int32 {
	var ps []int32
	for _, e := range msg.Entries {
		ps = append(ps, e.Partition.Partition)
	}
	return ps
}

func TestSplitTwelveBrokersFourPartitions(t *testing.T) {
	p, err := NewPartitioner(4)
	require.NoError(t, err)
	m, followers := splitFixture()
	routed, err := p.Split(m, followers)
	require.NoError(t, err)

	// Data partition i has followers i+1 and i+4, which read metadata
	// partitions (i+1)%4 and i%4: every entry goes to two partitions,
	// i%4 and (i+1)%4.
	want := map[int32][]int32{
		0: {0, 3, 4, 7, 8, 11},
		1: {0, 1, 4, 5, 8, 9},
		2: {1, 2, 5, 6, 9, 10},
		3: {2, 3, 6, 7, 10, 11},
	}
	require.Len(t, routed, 4)
	for i, r := range routed {
		require.Equal(t, int32(i), r.Partition, "result sorted by metadata partition")
		require.Equal(t, want[r.Partition], partitionsOf(r.Message), "entries routed to metadata partition %d", r.Partition)
		require.Equal(t, m.Object, r.Message.Object)
		require.Equal(t, m.WriterBrokerID, r.Message.WriterBrokerID)
		require.NoError(t, r.Message.Validate())
	}
}

func TestSplitEveryFollowerFindsItsEntries(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	const brokers = 12
	for _, n := range []int32{1, 3, 4, 5, 12, 50} {
		p, err := NewPartitioner(n)
		require.NoError(t, err)
		m := typicalMessage(r, 60, 0.5)
		assignment := make(map[int32][]int32)
		for _, e := range m.Entries {
			perm := r.Perm(brokers)
			assignment[e.Partition.Partition] = []int32{int32(perm[0]), int32(perm[1])}
		}
		followers := func(tp TopicPartition) []int32 { return assignment[tp.Partition] }
		routed, err := p.Split(m, followers)
		require.NoError(t, err, "seed %d", seed)
		byPart := make(map[int32]*Message)
		for _, rt := range routed {
			byPart[rt.Partition] = rt.Message
		}
		for b := range int32(brokers) {
			part, err := p.For(b)
			require.NoError(t, err)
			var want, got []int32
			for _, e := range m.Entries {
				if slices.Contains(assignment[e.Partition.Partition], b) {
					want = append(want, e.Partition.Partition)
				}
			}
			if msg := byPart[part]; msg != nil {
				for _, ps := range partitionsOf(msg) {
					if slices.Contains(assignment[ps], b) {
						got = append(got, ps)
					}
				}
				// Nothing in the message is for nobody on it.
				for _, ps := range partitionsOf(msg) {
					onPart := false
					for _, f := range assignment[ps] {
						onPart = onPart || f%n == part
					}
					require.True(t, onPart, "seed %d, N %d: partition %d routed to %d without a follower there", seed, n, ps, part)
				}
			}
			require.Equal(t, want, got, "seed %d, N %d: entries broker %d finds on metadata partition %d", seed, n, b, part)
		}
	}
}

func TestSplitMarkersDuplicatesAndUnfollowed(t *testing.T) {
	p, err := NewPartitioner(4)
	require.NoError(t, err)
	tp := func(i int32) TopicPartition { return TopicPartition{Topic: "orders", Partition: i} }
	m := &Message{Object: testObject, WriterBrokerID: 2,
		Entries: []Entry{
			{Partition: tp(0), Object: testObject, Position: 0, Length: 10, UncompressedSize: 10, LastOffset: 3, WriterBrokerID: 2},
			{Partition: tp(1), Object: testObject, Position: 10, Length: 10, UncompressedSize: 10, LastOffset: 3, WriterBrokerID: 2},
		},
		Markers: []EpochStart{
			{Partition: tp(0), Epoch: 4, StartOffset: 0, LeaderBrokerID: 2},
			{Partition: tp(2), Epoch: 4, StartOffset: 50, LeaderBrokerID: 2},
		},
	}
	followers := map[int32][]int32{
		0: {1, 5, 9}, // all on metadata partition 1: routed once
		1: nil,       // no followers: routed nowhere
		2: {3, 7},    // marker only, on metadata partition 3
	}
	routed, err := p.Split(m, func(tp TopicPartition) []int32 { return followers[tp.Partition] })
	require.NoError(t, err)
	require.Equal(t, []Routed{
		{Partition: 1, Message: &Message{Object: testObject, WriterBrokerID: 2, Entries: m.Entries[:1], Markers: m.Markers[:1]}},
		{Partition: 3, Message: &Message{WriterBrokerID: 2, Markers: m.Markers[1:]}},
	}, routed)
	for _, r := range routed {
		_, err := AppendMessage(nil, r.Message)
		require.NoError(t, err, "routed message for partition %d encodes", r.Partition)
	}
}

func TestSplitRejects(t *testing.T) {
	p, err := NewPartitioner(4)
	require.NoError(t, err)
	m, _ := splitFixture()
	_, err = p.Split(m, func(tp TopicPartition) []int32 { return []int32{1, -3} })
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "follower broker id -3 of orders-0 is negative")

	m.Entries[3].Length = 0
	_, err = p.Split(m, func(TopicPartition) []int32 { return []int32{1} })
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "entries[3] (orders-3): Length 0 is not positive")

	_, err = p.Split(nil, nil)
	require.ErrorIs(t, err, ErrInvalid)
}
