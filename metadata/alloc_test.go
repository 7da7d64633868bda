package metadata

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// DecodeMessage allocates per message, not per row: a follower decodes
// every message of its metadata partition, and one allocation per entry,
// marker or commit was a good share of its allocations. Both marker
// encodings count (version 3's rows, version 4's columns), and so do
// version 5's digests.
func TestDecodeMessageAllocatesPerMessage(t *testing.T) {
	allocs := func(rows int, version byte) float64 {
		r := rand.New(rand.NewPCG(7, uint64(rows)))
		m := typicalMessage(r, rows, 0)
		if version == messageVersion {
			withDigests(r, m, 0.5)
		}
		for _, e := range m.Entries {
			m.Markers = append(m.Markers, EpochStart{Partition: e.Partition, Epoch: 7, StartOffset: e.FirstOffset - 1000, LeaderBrokerID: 3})
			m.Commits = append(m.Commits, Commit{Partition: e.Partition, Epoch: 7, Offset: e.FirstOffset})
		}
		b, err := appendMessage(nil, m, version)
		require.NoError(t, err)
		require.Equal(t, version, b[0])
		return testing.AllocsPerRun(20, func() {
			if _, err := DecodeMessage(b); err != nil {
				panic(err)
			}
		})
	}
	for _, version := range []byte{messageVersion3, messageVersion4, messageVersion} {
		t.Run(fmt.Sprint("version ", version), func(t *testing.T) {
			require.Equal(t, allocs(4, version), allocs(400, version))
		})
	}
}

// Split allocates per metadata partition, not per item: a leader splits
// every object's entries and commits.
func TestSplitAllocatesPerPartition(t *testing.T) {
	p, err := NewPartitioner(4)
	require.NoError(t, err)
	var sets [12][]int32
	for i := range sets {
		sets[i] = []int32{int32(i), int32(i+5) % 12}
	}
	followers := func(tp TopicPartition) []int32 { return sets[tp.Partition%12] }
	allocs := func(rows int) float64 {
		m := typicalMessage(rand.New(rand.NewPCG(7, uint64(rows))), rows, 0)
		for _, e := range m.Entries {
			m.Commits = append(m.Commits, Commit{Partition: e.Partition, Epoch: 7, Offset: e.FirstOffset})
		}
		return testing.AllocsPerRun(20, func() {
			if _, err := p.Split(m, followers); err != nil {
				panic(err)
			}
		})
	}
	require.Equal(t, allocs(40), allocs(400))
}
