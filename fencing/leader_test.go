package fencing

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

var testTP = metadata.TopicPartition{Topic: "orders", Partition: 3}

// mk is one epoch-start marker of testTP.
func mk(epoch int32, start int64) metadata.EpochStart {
	return metadata.EpochStart{Partition: testTP, Epoch: epoch, StartOffset: start}
}

// pub is one publication: markers a leader published together.
func pub(markers ...metadata.EpochStart) []metadata.EpochStart { return markers }

func mustLeader(t testing.TB, pubs ...[]metadata.EpochStart) *LeaderLineage {
	t.Helper()
	var l LeaderLineage
	for _, p := range pubs {
		require.NoError(t, l.Merge(p...))
	}
	return &l
}

func TestLeaderLineageMerge(t *testing.T) {
	tests := []struct {
		name string
		pubs [][]metadata.EpochStart
		want []storage.EpochEntry
	}{
		{"nothing", nil, nil},
		{"one marker", [][]metadata.EpochStart{pub(mk(5, 100))}, []storage.EpochEntry{ee(5, 100)}},
		{"markers one by one, in order",
			[][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(6, 151))}, []storage.EpochEntry{ee(5, 100), ee(6, 151)}},
		{"markers one by one, newest first",
			[][]metadata.EpochStart{pub(mk(6, 151)), pub(mk(5, 100))}, []storage.EpochEntry{ee(5, 100), ee(6, 151)}},
		{"duplicate marker", [][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(5, 100))}, []storage.EpochEntry{ee(5, 100)}},
		{"an epoch that a later one starts at or before is superseded",
			[][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(6, 151)), pub(mk(7, 151))}, []storage.EpochEntry{ee(5, 100), ee(7, 151)}},
		{"a later epoch at a lower start supersedes an earlier one entirely",
			[][]metadata.EpochStart{pub(mk(6, 200)), pub(mk(7, 150))}, []storage.EpochEntry{ee(7, 150)}},
		{"a gap between known epochs stays a gap",
			[][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(7, 200))}, []storage.EpochEntry{ee(5, 100), ee(7, 200)}},
		{"same epoch from the same publisher keeps the lower start",
			[][]metadata.EpochStart{pub(mk(5, 130)), pub(mk(5, 100))}, []storage.EpochEntry{ee(5, 100)}},
		{"a retention-moved start in a newer publication continues the epoch",
			[][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(5, 121), mk(6, 151))}, []storage.EpochEntry{ee(5, 100), ee(6, 151)}},
		{"a publication is one leader's lineage, in any order within the call",
			[][]metadata.EpochStart{pub(mk(6, 151), mk(4, 50), mk(5, 100))}, []storage.EpochEntry{ee(4, 50), ee(5, 100), ee(6, 151)}},
		{"an empty epoch inside a publication is dropped",
			[][]metadata.EpochStart{pub(mk(5, 100), mk(6, 151), mk(7, 151))}, []storage.EpochEntry{ee(5, 100), ee(7, 151)}},
		{"KIP-279: a newer publication erases an epoch its leader never had",
			[][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(6, 150)), pub(mk(5, 100), mk(7, 151))},
			[]storage.EpochEntry{ee(5, 100), ee(7, 151)}},
		{"KIP-279, newest publication first",
			[][]metadata.EpochStart{pub(mk(5, 100), mk(7, 151)), pub(mk(6, 150)), pub(mk(5, 100))},
			[]storage.EpochEntry{ee(5, 100), ee(7, 151)}},
		{"an older publication still describes what the newer one does not cover",
			[][]metadata.EpochStart{pub(mk(3, 10), mk(4, 50), mk(5, 100)), pub(mk(5, 120), mk(6, 151))},
			[]storage.EpochEntry{ee(3, 10), ee(4, 50), ee(5, 100), ee(6, 151)}},
		{"a newer publication overrides a different start of the same epoch",
			[][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(5, 90), mk(6, 151))}, []storage.EpochEntry{ee(5, 90), ee(6, 151)}},
		{"a newer publication that contradicts the epochs below it hides them",
			// Publisher 8 says epoch 5 still ran at 150, so epoch 6 at 120 is
			// not in its log and what it holds below 150 is unknown.
			[][]metadata.EpochStart{pub(mk(4, 0), mk(6, 120)), pub(mk(5, 150), mk(8, 160))},
			[]storage.EpochEntry{ee(5, 150), ee(8, 160)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLeader(t, tt.pubs...)
			assert.Equal(t, tt.want, l.Lineage().Entries())
		})
	}
}

func TestLeaderLineageAt(t *testing.T) {
	// Epoch 5's own marker, then epoch 6's publication of its lineage from
	// 121 on (R2 in scenario 1).
	l := mustLeader(t, pub(mk(5, 100)), pub(mk(5, 121), mk(6, 151)))
	tests := []struct {
		offset           int64
		epoch, publisher int32
		ok               bool
	}{
		{99, UndefinedEpoch, UndefinedEpoch, false},
		{100, 5, 5, true},
		{120, 5, 5, true},
		{121, 5, 6, true},
		{151, 6, 6, true},
		{1 << 40, 6, 6, true},
	}
	for _, tt := range tests {
		epoch, publisher, ok := l.At(tt.offset)
		assert.Equal(t, tt.ok, ok, "offset %d", tt.offset)
		assert.Equal(t, tt.epoch, epoch, "epoch at %d", tt.offset)
		assert.Equal(t, tt.publisher, publisher, "publisher at %d", tt.offset)
	}
	assert.Equal(t, "[(5, 100) (6, 151)] by 5@100 6@121", l.String())

	var empty LeaderLineage
	_, _, ok := empty.At(0)
	assert.False(t, ok)
	var nilLeader *LeaderLineage
	_, _, ok = nilLeader.At(0)
	assert.False(t, ok)
	_, ok = nilLeader.Latest()
	assert.False(t, ok)
	assert.Zero(t, nilLeader.Lineage().Len())
	assert.Equal(t, "[]", nilLeader.String())
}

func TestLeaderLineageMergeRejects(t *testing.T) {
	other := metadata.TopicPartition{Topic: "orders", Partition: 4}
	tests := []struct {
		name    string
		markers []metadata.EpochStart
		wantMsg string
	}{
		{"negative epoch", pub(mk(-1, 5)), "epoch -1"},
		{"negative start", pub(mk(5, -5)), "offset -5"},
		{"later epoch starts earlier", pub(mk(5, 100), mk(6, 90)), "epoch 6 starts at 90, before epoch 5 at 100"},
		{"two partitions in one publication", pub(mk(5, 100), metadata.EpochStart{Partition: other, Epoch: 6, StartOffset: 151}), "orders-4"},
		{"another partition than the bound one", pub(metadata.EpochStart{Partition: other, Epoch: 6, StartOffset: 151}), "orders-4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLeader(t, pub(mk(4, 0)))
			before := l.Clone()
			err := l.Merge(tt.markers...)
			require.ErrorIs(t, err, ErrInvalidEpochEntry)
			assert.Contains(t, err.Error(), tt.wantMsg)
			assert.Equal(t, before, l, "a rejected publication changes nothing")
		})
	}
	var l LeaderLineage
	require.NoError(t, l.Merge(), "an empty publication is nothing")
	assert.Zero(t, l.Lineage().Len())
}

func TestLeaderLineageClone(t *testing.T) {
	l := mustLeader(t, pub(mk(5, 100), mk(6, 151)))
	c := l.Clone()
	require.NoError(t, c.Merge(mk(7, 200)))
	assert.Equal(t, []storage.EpochEntry{ee(5, 100), ee(6, 151)}, l.Lineage().Entries(), "Clone is independent")
	assert.Equal(t, []storage.EpochEntry{ee(5, 100), ee(6, 151), ee(7, 200)}, c.Lineage().Entries())
	var nilLeader *LeaderLineage
	assert.Zero(t, nilLeader.Clone().Lineage().Len())
}

// TestLeaderLineageOrderIndependence merges random publications, with
// duplicates, in many orders, and requires the same view (and the same
// authority for every offset) whatever the order. Replay one seed with
// -run 'TestLeaderLineageOrderIndependence/seed=N'.
func TestLeaderLineageOrderIndependence(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(seedName(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x1ea9e5))
			pubs := randomPublications(rng)
			want := mustLeader(t, pubs...)
			for range 20 {
				order := append([][]metadata.EpochStart(nil), pubs...)
				for _, i := range rng.Perm(len(pubs))[:rng.IntN(len(pubs)+1)] {
					order = append(order, pubs[i]) // duplicates
				}
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				got := mustLeader(t, order...)
				require.Equal(t, want.Lineage().Entries(), got.Lineage().Entries(), "seed %d: view depends on order %v", seed, order)
				for o := int64(0); o < 64; o++ {
					we, wp, wok := want.At(o)
					ge, gp, gok := got.At(o)
					require.Equal(t, []any{we, wp, wok}, []any{ge, gp, gok}, "seed %d: At(%d) depends on order", seed, o)
				}
			}
		})
	}
}

// randomPublications returns publications of a random, not necessarily
// consistent, history: valid each on its own, contradicting each other freely.
func randomPublications(rng *rand.Rand) [][]metadata.EpochStart {
	var pubs [][]metadata.EpochStart
	for range 1 + rng.IntN(6) {
		var p []metadata.EpochStart
		epoch := int32(rng.IntN(4))
		start := int64(rng.IntN(20))
		for range 1 + rng.IntN(4) {
			p = append(p, mk(epoch, start))
			epoch += 1 + int32(rng.IntN(3))
			start += int64(rng.IntN(15))
		}
		pubs = append(pubs, p)
	}
	return pubs
}

func seedName(seed uint64) string { return "seed=" + strconv.FormatUint(seed, 10) }
