package fencing

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// fuzzLineages builds a local lineage from pairs of bytes (epoch, start
// step) and a leader lineage from triples (epoch, start step, flags), where a
// set low flag bit ends the publication. Small values keep the lineages,
// the log end and the entry in the same range of offsets.
func fuzzLineages(localSpec, leaderSpec []byte) (*Lineage, *LeaderLineage) {
	local := &Lineage{}
	var start int64
	for i := 0; i+1 < len(localSpec); i += 2 {
		start += int64(localSpec[i+1] % 16)
		_ = local.Assign(int32(localSpec[i]%16), start) // Kafka's assign accepts any order
	}
	leader := &LeaderLineage{}
	var markers []metadata.EpochStart
	start = 0
	for i := 0; i+2 < len(leaderSpec); i += 3 {
		start += int64(leaderSpec[i+1] % 16)
		markers = append(markers, mk(int32(leaderSpec[i]%16), start))
		if leaderSpec[i+2]&1 == 1 {
			_ = leader.Merge(markers...) // contradictory publications are rejected; fine
			markers, start = markers[:0], int64(leaderSpec[i+2]>>1)
		}
	}
	_ = leader.Merge(markers...)
	return local, leader
}

// FuzzDecide feeds Decide arbitrary lineages and entries. It must never
// panic, must not change its arguments, and every decision must keep its
// promises: an Apply appends only offsets at the log end, within the entry
// and its epoch, where the leader lineage has the entry's epoch and the
// local log agrees below; a Truncate names a real divergence below the log
// end; a Drop has a publisher at least as new as the entry's that disagrees.
func FuzzDecide(f *testing.F) {
	// reasonAction maps each reason to the one action it explains.
	reasonAction := map[Reason]Action{
		ReasonNext:           Apply,
		ReasonDuplicate:      Skip,
		ReasonSupersededTail: Skip,
		ReasonInvalidRange:   Drop,
		ReasonInvalidEpoch:   Drop,
		ReasonFenced:         Drop,
		ReasonNotInLineage:   Drop,
		ReasonGap:            Hold,
		ReasonEpochAhead:     Hold,
		ReasonPublisherAhead: Hold,
		ReasonNotCovered:     Hold,
		ReasonUnresolved:     Hold,
		ReasonLocalAhead:     Hold,
		ReasonConflictsLocal: Hold,
		ReasonInvalidLEO:     Hold,
		ReasonDiverged:       Truncate,
	}
	f.Add(int64(121), int32(5), int32(5), int64(121), int64(150), []byte{5, 0}, []byte{5, 0, 1})
	f.Add(int64(161), int32(6), int32(6), int64(151), int64(170), []byte{5, 0}, []byte{5, 0, 1, 6, 15, 1})
	f.Add(int64(20), int32(5), int32(5), int64(15), int64(30), []byte{5, 0, 6, 10}, []byte{5, 0, 0, 6, 8, 1, 7, 12, 1})
	f.Add(int64(10), int32(6), int32(7), int64(10), int64(12), []byte{3, 0, 6, 8}, []byte{3, 0, 0, 7, 9, 1, 6, 8, 0, 8, 2, 1})
	f.Add(int64(-1), int32(-1), int32(0), int64(0), int64(-5), []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, leo int64, recordEpoch, publisherEpoch int32, first, last int64, localSpec, leaderSpec []byte) {
		local, leader := fuzzLineages(localSpec, leaderSpec)
		e := entry(recordEpoch, publisherEpoch, first, last)
		localBefore, leaderBefore := local.Entries(), leader.String()

		d := Decide(leo, local, leader, e)

		require.Equal(t, d, Decide(leo, local, leader, e), "deterministic")
		require.Equal(t, localBefore, local.Entries(), "Decide changed the local lineage")
		require.Equal(t, leaderBefore, leader.String(), "Decide changed the leader lineage")
		want, known := reasonAction[d.Reason]
		require.True(t, known, "unknown reason %q", d.Reason)
		require.Equal(t, want, d.Action, "reason %q with action %v", d.Reason, d.Action)
		if d.Action != Apply {
			require.Zero(t, d.From+d.Limit, "From and Limit are for Apply: %v", d)
		}
		if d.Action != Truncate {
			require.Zero(t, d.TruncateTo, "TruncateTo is for Truncate: %v", d)
		}

		switch d.Action {
		case Apply:
			require.Equal(t, leo, d.From, "apply from the log end")
			require.LessOrEqual(t, first, d.From)
			require.Less(t, d.From, d.Limit)
			require.LessOrEqual(t, d.Limit, last+1)
			for _, o := range []int64{d.From, d.Limit - 1} {
				epoch, _, ok := leader.At(o)
				require.True(t, ok && epoch == recordEpoch, "apply at %d where the leader has epoch %d (%v): %v", o, epoch, ok, d)
			}
			if end, ok := leader.Lineage().endAfterOffset(d.From); ok {
				require.LessOrEqual(t, d.Limit, end, "apply past the end of the epoch")
			}
			latest, _ := leader.Latest()
			require.LessOrEqual(t, publisherEpoch, latest.Epoch, "publisher unknown to the lineage")
			if ll, ok := local.Latest(); ok {
				require.LessOrEqual(t, ll.Epoch, recordEpoch, "apply an epoch older than the local log's")
			}
			_, diverged := Divergence(leo, local, leader)
			require.False(t, diverged, "apply onto a diverged log")
			for o := max(first, 0); o < leo && o < first+64; o++ {
				if le, ok := local.EpochFor(o); ok {
					require.Equal(t, recordEpoch, le, "apply an entry that disagrees with the local log at %d", o)
				}
			}
		case Truncate:
			require.GreaterOrEqual(t, d.TruncateTo, int64(0))
			require.Less(t, d.TruncateTo, leo, "truncate must shorten the log")
			to, ok := Divergence(leo, local, leader)
			require.True(t, ok)
			require.Equal(t, d.TruncateTo, to)
			le, lok := local.EpochFor(to)
			ve, authority, vok := leader.At(to)
			require.True(t, lok && vok && le != ve && authority >= le, "truncate to %d: local %d, leader %d by %d", to, le, ve, authority)
		case Skip:
			if d.Reason == ReasonDuplicate {
				require.Less(t, last, leo, "a duplicate lies below the log end")
			}
		case Drop:
			if d.Reason == ReasonFenced || d.Reason == ReasonNotInLineage {
				disagrees := false
				for o := first; o <= last && o < first+4096 && !disagrees; o++ {
					epoch, authority, ok := leader.At(o)
					disagrees = ok && epoch != recordEpoch && authority >= publisherEpoch
				}
				require.True(t, disagrees, "dropped with no newer publisher disagreeing: %v", d)
			}
		}
	})
}
