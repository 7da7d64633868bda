package fencing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/storage"
)

// ee is shorthand for an EpochEntry in tables.
func ee(epoch int32, start int64) storage.EpochEntry {
	return storage.EpochEntry{Epoch: epoch, StartOffset: start}
}

func mustLineage(t testing.TB, entries ...storage.EpochEntry) *Lineage {
	t.Helper()
	l, err := NewLineage(entries...)
	require.NoError(t, err)
	return l
}

// The cases follow Kafka's LeaderEpochFileCacheTest where one exists, so a
// reader can check the two side by side.
func TestLineageAssign(t *testing.T) {
	tests := []struct {
		name    string
		assigns []storage.EpochEntry
		want    []storage.EpochEntry
	}{
		{"empty", nil, nil},
		{"first entry", []storage.EpochEntry{ee(2, 10)}, []storage.EpochEntry{ee(2, 10)}},
		{"epochs need not start at zero", []storage.EpochEntry{ee(7, 0), ee(9, 4)}, []storage.EpochEntry{ee(7, 0), ee(9, 4)}},
		{"same epoch at a later start is ignored (one call per batch)",
			[]storage.EpochEntry{ee(2, 6), ee(2, 7), ee(2, 100)}, []storage.EpochEntry{ee(2, 6)}},
		{"exact duplicate of the latest is ignored", []storage.EpochEntry{ee(1, 5), ee(2, 8), ee(2, 8)}, []storage.EpochEntry{ee(1, 5), ee(2, 8)}},
		{"same epoch at an earlier start replaces it",
			[]storage.EpochEntry{ee(5, 11), ee(6, 12), ee(7, 13), ee(7, 12)}, []storage.EpochEntry{ee(5, 11), ee(7, 12)}},
		{"new epoch at a lower start removes the entries at or after it",
			[]storage.EpochEntry{ee(2, 6), ee(3, 5)}, []storage.EpochEntry{ee(3, 5)}},
		{"new epoch at an equal start replaces the empty epoch",
			[]storage.EpochEntry{ee(1, 0), ee(2, 6), ee(3, 6)}, []storage.EpochEntry{ee(1, 0), ee(3, 6)}},
		{"lower epoch removes every entry of that epoch or later",
			[]storage.EpochEntry{ee(1, 5), ee(2, 6), ee(3, 7), ee(2, 8)}, []storage.EpochEntry{ee(1, 5), ee(2, 8)}},
		{"lower epoch at a lower start removes back to where it fits",
			[]storage.EpochEntry{ee(1, 5), ee(3, 10), ee(4, 20), ee(2, 7)}, []storage.EpochEntry{ee(1, 5), ee(2, 7)}},
		{"an epoch already passed is reassigned from the new start",
			[]storage.EpochEntry{ee(1, 0), ee(2, 10), ee(1, 15)}, []storage.EpochEntry{ee(1, 15)}},
		{"out-of-order starts keep only the consistent tail",
			[]storage.EpochEntry{ee(1, 50), ee(2, 40), ee(3, 60)}, []storage.EpochEntry{ee(2, 40), ee(3, 60)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l Lineage
			for _, a := range tt.assigns {
				require.NoError(t, l.Assign(a.Epoch, a.StartOffset))
			}
			assert.Equal(t, tt.want, l.Entries())
			assert.Equal(t, len(tt.want), l.Len())
		})
	}
}

func TestLineageAssignRejectsNegative(t *testing.T) {
	l := mustLineage(t, ee(1, 5))
	err := l.Assign(-1, 10)
	require.ErrorIs(t, err, ErrInvalidEpochEntry)
	assert.Contains(t, err.Error(), "epoch -1")
	err = l.Assign(2, -3)
	require.ErrorIs(t, err, ErrInvalidEpochEntry)
	assert.Contains(t, err.Error(), "offset -3")
	assert.Equal(t, []storage.EpochEntry{ee(1, 5)}, l.Entries(), "a rejected assignment changes nothing")

	_, err = NewLineage(ee(1, 0), ee(2, -1))
	require.ErrorIs(t, err, ErrInvalidEpochEntry)
}

func TestLineageEndOffsetFor(t *testing.T) {
	lin := []storage.EpochEntry{ee(0, 10), ee(2, 13), ee(4, 17)}
	tests := []struct {
		name      string
		entries   []storage.EpochEntry
		requested int32
		logEnd    int64
		epoch     int32
		end       int64
	}{
		{"undefined epoch", lin, UndefinedEpoch, 30, UndefinedEpoch, UndefinedOffset},
		{"empty lineage", nil, 3, 30, UndefinedEpoch, UndefinedOffset},
		{"empty lineage, undefined epoch", nil, UndefinedEpoch, 30, UndefinedEpoch, UndefinedOffset},
		{"latest epoch ends at the log end", lin, 4, 30, 4, 30},
		{"above the latest is unknown", lin, 5, 30, UndefinedEpoch, UndefinedOffset},
		{"exact earlier epoch ends where the next starts", lin, 2, 30, 2, 17},
		{"first epoch", lin, 0, 30, 0, 13},
		{"missing epoch answers the one below it", lin, 1, 30, 0, 13},
		{"missing epoch between later ones", lin, 3, 30, 2, 17},
		{"below the earliest: the epoch itself, ending at the earliest start (KIP-279)",
			[]storage.EpochEntry{ee(5, 11), ee(6, 12), ee(7, 13)}, 4, 30, 4, 11},
		{"single entry", []storage.EpochEntry{ee(2, 100)}, 2, 150, 2, 150},
		{"single entry, newer requested", []storage.EpochEntry{ee(2, 100)}, 3, 150, UndefinedEpoch, UndefinedOffset},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLineage(t, tt.entries...)
			epoch, end := l.EndOffsetFor(tt.requested, tt.logEnd)
			assert.Equal(t, tt.epoch, epoch, "epoch")
			assert.Equal(t, tt.end, end, "end offset")
		})
	}
}

func TestLineageEpochFor(t *testing.T) {
	l := mustLineage(t, ee(1, 5), ee(3, 10), ee(4, 20))
	tests := []struct {
		offset int64
		epoch  int32
		ok     bool
	}{
		{-1, UndefinedEpoch, false},
		{0, UndefinedEpoch, false},
		{4, UndefinedEpoch, false},
		{5, 1, true},
		{9, 1, true},
		{10, 3, true},
		{19, 3, true},
		{20, 4, true},
		{1 << 40, 4, true},
	}
	for _, tt := range tests {
		epoch, ok := l.EpochFor(tt.offset)
		assert.Equal(t, tt.ok, ok, "offset %d", tt.offset)
		assert.Equal(t, tt.epoch, epoch, "offset %d", tt.offset)
	}
	var empty Lineage
	_, ok := empty.EpochFor(0)
	assert.False(t, ok)
	var nilLineage *Lineage
	_, ok = nilLineage.EpochFor(0)
	assert.False(t, ok, "a nil lineage is an empty one")
}

func TestLineageTruncateFromEnd(t *testing.T) {
	base := []storage.EpochEntry{ee(2, 6), ee(3, 8), ee(4, 11)}
	tests := []struct {
		name string
		end  int64
		want []storage.EpochEntry
	}{
		{"past the latest start changes nothing", 12, base},
		{"at the latest start removes it", 11, base[:2]},
		{"inside an epoch keeps it", 9, base[:2]},
		{"at an earlier start removes it and all later", 8, base[:1]},
		{"at zero removes everything", 0, nil},
		{"negative changes nothing", -1, base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLineage(t, base...)
			l.TruncateFromEnd(tt.end)
			assert.Equal(t, tt.want, l.Entries())
		})
	}
}

func TestLineageTruncateFromStart(t *testing.T) {
	base := []storage.EpochEntry{ee(2, 6), ee(3, 8), ee(4, 11)}
	tests := []struct {
		name  string
		start int64
		want  []storage.EpochEntry
	}{
		{"below the earliest changes nothing", 5, base},
		{"at the earliest start changes nothing", 6, base},
		{"inside the first epoch moves its start", 7, []storage.EpochEntry{ee(2, 7), ee(3, 8), ee(4, 11)}},
		{"at a later start drops the ones before", 8, []storage.EpochEntry{ee(3, 8), ee(4, 11)}},
		{"inside a later epoch drops and moves", 9, []storage.EpochEntry{ee(3, 9), ee(4, 11)}},
		{"at the latest start keeps only it", 11, []storage.EpochEntry{ee(4, 11)}},
		{"past the latest start moves the latest", 12, []storage.EpochEntry{ee(4, 12)}},
		{"negative changes nothing", -1, base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLineage(t, base...)
			l.TruncateFromStart(tt.start)
			assert.Equal(t, tt.want, l.Entries())
		})
	}
	var empty Lineage
	empty.TruncateFromStart(10)
	empty.TruncateFromEnd(10)
	assert.Zero(t, empty.Len())
}

func TestLineageAccessors(t *testing.T) {
	var empty Lineage
	_, ok := empty.Latest()
	assert.False(t, ok)
	_, ok = empty.Earliest()
	assert.False(t, ok)
	assert.Nil(t, empty.Entries())
	assert.Equal(t, "[]", empty.String())

	l := mustLineage(t, ee(5, 100), ee(6, 151))
	latest, ok := l.Latest()
	require.True(t, ok)
	assert.Equal(t, ee(6, 151), latest)
	earliest, ok := l.Earliest()
	require.True(t, ok)
	assert.Equal(t, ee(5, 100), earliest)
	assert.Equal(t, "[(5, 100) (6, 151)]", l.String())

	entries := l.Entries()
	entries[0].StartOffset = 1
	assert.Equal(t, ee(5, 100), l.Entries()[0], "Entries returns a copy")

	c := l.Clone()
	require.NoError(t, c.Assign(7, 200))
	assert.Equal(t, 2, l.Len(), "Clone is independent")
	assert.Equal(t, 3, c.Len())
}
