package metadata_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// Compare orders by topic name, then topic ID, then partition number, and
// is a total order: every pair of distinct partitions compares non-zero
// and antisymmetrically, so that sorting any permutation of a list gives
// the same list.
func TestTopicPartitionCompare(t *testing.T) {
	id1, id2 := [16]byte{1}, [16]byte{2}
	ordered := []metadata.TopicPartition{
		{TopicID: id1},                           // no name sorts first
		{TopicID: id2},                           //
		{Topic: "a", Partition: 0},               //
		{Topic: "a", Partition: 1},               // partition after name
		{Topic: "a", Partition: 10},              // numerically, not as text
		{Topic: "a", TopicID: id1, Partition: 0}, // the ID before the partition
		{Topic: "a", TopicID: id2, Partition: 0}, //
		{Topic: "a-b", Partition: 0},             // a longer name after its prefix
		{Topic: "a.b", Partition: 0},             // bytewise: '-' < '.' < '_'
		{Topic: "a_b", Partition: 0},             //
		{Topic: "b", Partition: 0},               //
	}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			require.Equal(t, want, a.Compare(b), "%d %v vs %d %v", i, a, j, b)
		}
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for range 100 {
		shuffled := slices.Clone(ordered)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		slices.SortFunc(shuffled, metadata.TopicPartition.Compare)
		require.Equal(t, ordered, shuffled, "seed %d", seed)
	}
}
