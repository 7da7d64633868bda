package fencing

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// TestDecide covers every action and every reason. Offsets follow the
// failure scenarios of docs/design.md: epoch 5 started at 100, epoch 6 at
// 151.
func TestDecide(t *testing.T) {
	var (
		only5     = [][]metadata.EpochStart{pub(mk(5, 100))}
		fenced5   = [][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(6, 151))}
		r2        = [][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(5, 121), mk(6, 151))}
		r2full    = [][]metadata.EpochStart{pub(mk(5, 100), mk(6, 151))}
		gap6      = [][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(7, 200))}
		kip279    = [][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(6, 150)), pub(mk(5, 100), mk(7, 151))}
		fromR2    = [][]metadata.EpochStart{pub(mk(5, 130), mk(6, 151))}
		local5    = []EpochEntry{ee(5, 100)}
		local56   = []EpochEntry{ee(5, 100), ee(6, 151)}
		local57   = []EpochEntry{ee(5, 100), ee(7, 151)}
		applyWant = func(from, limit int64) Decision {
			return Decision{Action: Apply, From: from, Limit: limit, Reason: ReasonNext}
		}
	)
	tests := []struct {
		name   string
		leo    int64
		local  []EpochEntry
		leader [][]metadata.EpochStart
		e      metadata.Entry
		want   Decision
	}{
		// Apply.
		{"apply: the next entry", 121, local5, only5, entry(5, 5, 121, 150), applyWant(121, 151)},
		{"apply: the suffix from the log end", 121, local5, only5, entry(5, 5, 110, 130), applyWant(121, 131)},
		{"apply: only up to the end of the record epoch", 140, local5, fenced5, entry(5, 5, 140, 160), applyWant(140, 151)},
		{"apply: republished records of an older epoch", 121, local5, r2, entry(5, 6, 121, 150), applyWant(121, 151)},
		{"apply: a newer epoch on top of an older one", 151, local5, fenced5, entry(6, 6, 151, 170), applyWant(151, 171)},
		{"apply: an empty local log", 100, nil, r2, entry(5, 6, 100, 150), applyWant(100, 151)},
		{"apply: the latest epoch has no known end", 151, local56, fenced5, entry(6, 6, 151, 1<<40), applyWant(151, 1<<40+1)},
		{"apply: whatever published it, epoch and offset name the record", 121, local5, r2, entry(5, 5, 121, 150), applyWant(121, 151)},

		// Skip.
		{"skip: below the log end and the local log agrees", 151, local5, only5, entry(5, 5, 121, 150), Decision{Action: Skip, Reason: ReasonDuplicate}},
		{"skip: ends just below the log end", 151, local5, only5, entry(5, 5, 150, 150), Decision{Action: Skip, Reason: ReasonDuplicate}},
		{"skip: below what the local lineage knows", 100, nil, only5, entry(4, 4, 50, 99), Decision{Action: Skip, Reason: ReasonDuplicate}},
		{"skip: the known part agrees", 130, local5, only5, entry(5, 5, 90, 120), Decision{Action: Skip, Reason: ReasonDuplicate}},
		{"skip: a zombie batch straddling the fence, once its true prefix is applied", 151, local56, fenced5, entry(5, 5, 140, 160), Decision{Action: Skip, Reason: ReasonSupersededTail}},
		{"skip: below the log end, superseded after a prefix the local log holds", 170, local56, fenced5, entry(5, 5, 140, 165), Decision{Action: Skip, Reason: ReasonSupersededTail}},

		// Drop: malformed.
		{"drop: negative first offset", 0, nil, only5, entry(5, 5, -1, 10), Decision{Action: Drop, Reason: ReasonInvalidRange}},
		{"drop: last below first", 0, nil, only5, entry(5, 5, 10, 9), Decision{Action: Drop, Reason: ReasonInvalidRange}},
		{"drop: last offset at the largest int64", 0, nil, only5, entry(5, 5, 10, math.MaxInt64), Decision{Action: Drop, Reason: ReasonInvalidRange}},
		{"drop: negative record epoch", 0, nil, only5, entry(-1, 5, 0, 10), Decision{Action: Drop, Reason: ReasonInvalidEpoch}},
		{"drop: publisher older than its records", 121, local5, fenced5, entry(6, 5, 151, 160), Decision{Action: Drop, Reason: ReasonInvalidEpoch}},
		{"drop: malformed beats everything", 161, local5, fenced5, entry(5, 4, 151, 160), Decision{Action: Drop, Reason: ReasonInvalidEpoch}},

		// Drop: stale.
		{"drop: a zombie's records after the fence", 151, local5, fenced5, entry(5, 5, 151, 200), Decision{Action: Drop, Reason: ReasonFenced}},
		{"drop: a zombie's records past a gap", 121, local5, fenced5, entry(5, 5, 160, 200), Decision{Action: Drop, Reason: ReasonFenced}},
		{"drop: below the log end, contradicted by the lineage", 161, local56, fenced5, entry(5, 5, 151, 160), Decision{Action: Drop, Reason: ReasonFenced}},
		{"drop: an epoch the newer leader never had (KIP-279)", 150, local5, kip279, entry(6, 6, 150, 150), Decision{Action: Drop, Reason: ReasonNotInLineage}},
		{"drop: records of an epoch before its start, on the publisher's word", 140, local5, r2full, entry(6, 6, 140, 160), Decision{Action: Drop, Reason: ReasonNotInLineage}},

		// Hold.
		{"hold: a gap before the entry", 121, local5, fenced5, entry(6, 6, 171, 180), Decision{Action: Hold, Reason: ReasonGap}},
		{"hold: a gap even when the lineage knows nothing", 121, local5, nil, entry(6, 6, 171, 180), Decision{Action: Hold, Reason: ReasonGap}},
		{"hold: record epoch newer than any known", 151, local5, only5, entry(6, 6, 151, 160), Decision{Action: Hold, Reason: ReasonEpochAhead}},
		{"hold: publisher newer than any known", 121, local5, only5, entry(5, 6, 121, 150), Decision{Action: Hold, Reason: ReasonPublisherAhead}},
		{"hold: no lineage yet", 100, nil, nil, entry(5, 5, 100, 110), Decision{Action: Hold, Reason: ReasonNotCovered}},
		{"hold: below the lineage's earliest start", 100, nil, fromR2, entry(5, 6, 100, 129), Decision{Action: Hold, Reason: ReasonNotCovered}},
		{"hold: between known epochs, the publisher is newer than the lineage there", 151, local5, gap6, entry(6, 6, 151, 160), Decision{Action: Hold, Reason: ReasonUnresolved}},
		{"hold: records of an epoch before its start, judged only by an older publisher", 140, local5, fenced5, entry(6, 6, 140, 160), Decision{Action: Hold, Reason: ReasonUnresolved}},
		{"hold: the local log is ahead of what the lineage knows", 161, local57, only5, entry(5, 5, 161, 170), Decision{Action: Hold, Reason: ReasonLocalAhead}},
		{"hold: below the log end, disagrees with the local log, undecidable", 161, local56, only5, entry(5, 5, 151, 160), Decision{Action: Hold, Reason: ReasonConflictsLocal}},
		{"hold: below the log end, local epoch differs inside the entry", 161, local56, only5, entry(5, 5, 140, 155), Decision{Action: Hold, Reason: ReasonConflictsLocal}},
		{"hold: straddles the log end and disagrees with the local log below it", 161, local56, only5, entry(5, 5, 155, 170), Decision{Action: Hold, Reason: ReasonConflictsLocal}},
		{"hold: disagrees below the log end, though the part past it is fenced", 155, []EpochEntry{ee(4, 0)}, [][]metadata.EpochStart{pub(mk(6, 155))}, entry(5, 5, 150, 160), Decision{Action: Hold, Reason: ReasonConflictsLocal}},
		{"hold: a negative log end offset", -1, nil, only5, entry(5, 5, 100, 110), Decision{Action: Hold, Reason: ReasonInvalidLEO}},

		// Truncate.
		{"truncate: the local log has the old epoch past the new epoch's start", 161, local5, fenced5, entry(6, 6, 161, 170), Decision{Action: Truncate, TruncateTo: 151, Reason: ReasonDiverged}},
		{"truncate: before deciding even a duplicate", 161, local5, fenced5, entry(5, 5, 100, 120), Decision{Action: Truncate, TruncateTo: 151, Reason: ReasonDiverged}},
		{"truncate: an erased epoch in the local log (KIP-279)", 151, []EpochEntry{ee(5, 100), ee(6, 150)}, kip279, entry(7, 7, 151, 160), Decision{Action: Truncate, TruncateTo: 150, Reason: ReasonDiverged}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := mustLineage(t, tt.local...)
			leader := mustLeader(t, tt.leader...)
			got := Decide(tt.leo, local, leader, tt.e)
			assert.Equal(t, tt.want, got, "got %v", got)
		})
	}
	decideScenarios(t)
}

func TestDecideNilLineages(t *testing.T) {
	assert.Equal(t, Decision{Action: Hold, Reason: ReasonNotCovered}, Decide(0, nil, nil, entry(1, 1, 0, 5)))
	assert.Equal(t, Decision{Action: Skip, Reason: ReasonDuplicate}, Decide(10, nil, nil, entry(1, 1, 0, 5)))
	to, ok := Divergence(10, nil, nil)
	assert.False(t, ok)
	assert.Equal(t, int64(10), to)
}

func TestDivergence(t *testing.T) {
	tests := []struct {
		name   string
		leo    int64
		local  []EpochEntry
		leader [][]metadata.EpochStart
		to     int64
		ok     bool
	}{
		{"agreeing logs", 161, []EpochEntry{ee(5, 100), ee(6, 151)}, [][]metadata.EpochStart{pub(mk(5, 100), mk(6, 151))}, 161, false},
		{"old epoch past the new start (KIP-320)", 161, []EpochEntry{ee(5, 100)}, [][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(6, 151))}, 151, true},
		{"divergence at the log end is none", 151, []EpochEntry{ee(5, 100)}, [][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(6, 151))}, 151, false},
		{"the first of several divergent offsets", 300, []EpochEntry{ee(3, 0), ee(5, 100), ee(6, 200)},
			[][]metadata.EpochStart{pub(mk(3, 0), mk(4, 90), mk(6, 120))}, 90, true},
		{"local epoch where the leader had an earlier one", 200, []EpochEntry{ee(4, 0), ee(6, 100)},
			[][]metadata.EpochStart{pub(mk(4, 0), mk(6, 120))}, 100, true},
		{"only where both know: lineage starts above the divergence", 200, []EpochEntry{ee(4, 0), ee(6, 100)},
			[][]metadata.EpochStart{pub(mk(6, 150))}, 200, false},
		{"only where both know: local lineage starts above", 200, []EpochEntry{ee(6, 150)},
			[][]metadata.EpochStart{pub(mk(4, 0), mk(5, 140))}, 200, false},
		{"an older publication does not overrule a newer local epoch", 200, []EpochEntry{ee(5, 100), ee(7, 151)},
			[][]metadata.EpochStart{pub(mk(5, 100))}, 200, false},
		{"a newer publication does", 200, []EpochEntry{ee(5, 100), ee(7, 151)},
			[][]metadata.EpochStart{pub(mk(5, 100)), pub(mk(5, 100), mk(8, 151))}, 151, true},
		{"empty local lineage", 200, nil, [][]metadata.EpochStart{pub(mk(6, 150))}, 200, false},
		{"empty leader lineage", 200, []EpochEntry{ee(6, 150)}, nil, 200, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			to, ok := Divergence(tt.leo, mustLineage(t, tt.local...), mustLeader(t, tt.leader...))
			assert.Equal(t, tt.ok, ok, "diverged")
			assert.Equal(t, tt.to, to, "truncate to")
		})
	}
}

func TestDecisionString(t *testing.T) {
	assert.Equal(t, "apply [121, 151): next", Decision{Action: Apply, From: 121, Limit: 151, Reason: ReasonNext}.String())
	assert.Equal(t, "truncate to 151: diverged", Decision{Action: Truncate, TruncateTo: 151, Reason: ReasonDiverged}.String())
	assert.Equal(t, "hold: gap", Decision{Action: Hold, Reason: ReasonGap}.String())
	assert.Equal(t, "action(9)", Action(9).String())
	assert.Equal(t, "hold", Decision{}.Action.String(), "the zero decision is a hold")
}

// decideScenarios runs, as TestDecide/scenarioN_..., the seven scenarios
// of docs/design.md, "Failure scenarios", at the decision level. R1 led
// epoch 5 from offset 100 in AZ1 and uploaded 100–200; R2 applied up to 150
// and leads epoch 6 from 151.
func decideScenarios(t *testing.T) {
	// What R1 (epoch 5, AZ1) published before AZ1 went away.
	var (
		r1Marker   = pub(mk(5, 100))
		r1Head     = entry(5, 5, 100, 120)
		r1Mid      = entry(5, 5, 121, 150)
		r1Tail     = entry(5, 5, 151, 200)
		r2Pub      = pub(mk(5, 100), mk(6, 151)) // R2's lineage
		r2Repub    = entry(5, 6, 121, 150)       // R2 republishes what R3 lacks
		r2Repub100 = entry(5, 6, 100, 150)       // or its whole log
		r2New1     = entry(6, 6, 151, 170)
		r2New2     = entry(6, 6, 171, 180)
		r2Log      = concat(run(5, 51), run(6, 30)) // offsets 100..180
	)

	t.Run("scenario1_az_loss_rf3_follower_catches_up_from_new_leader", func(t *testing.T) {
		r3 := newFollower(t, 100)
		r3.merge(r1Marker...)
		require.Equal(t, Apply, r3.offer(r1Head).Action)
		// AZ1 goes down before R3 fetched 121–150: the decision is to apply,
		// the fetch fails, nothing is appended (see scenario 7).
		require.Equal(t, Decision{Action: Apply, From: 121, Limit: 151, Reason: ReasonNext}, Decide(r3.leo(), &r3.local, &r3.leader, r1Mid))

		r3.merge(r2Pub...)
		assert.Equal(t, Decision{Action: Drop, Reason: ReasonFenced}, r3.offer(r1Tail), "R1's 151–200 are superseded")
		assert.Equal(t, Apply, r3.offer(r2Repub).Action, "R2's republished 121–150")
		assert.Equal(t, Apply, r3.offer(r2New1).Action)
		assert.Equal(t, Apply, r3.offer(r2New2).Action)
		for _, late := range []metadata.Entry{r1Head, r1Mid, r2Repub} {
			assert.Equal(t, Skip, r3.offer(late).Action, "late copy of %+v", late)
		}
		assert.Equal(t, Drop, r3.offer(r1Tail).Action)
		assert.Equal(t, r2Log, r3.epochs(), "R3 ends with exactly R2's log")
		assert.Equal(t, []EpochEntry{ee(5, 100), ee(6, 151)}, r3.local.Entries())
	})

	t.Run("scenario2_rf2_new_replica_with_empty_cache_catches_up_from_republish", func(t *testing.T) {
		r3 := newFollower(t, 100) // assigned after AZ1 died: empty log and empty epoch cache
		assert.Equal(t, Decision{Action: Hold, Reason: ReasonNotCovered}, r3.offer(r2Repub100), "nothing is known before a marker")
		r3.merge(r2Pub...)
		// R1's own entry names true records (epoch 5, offsets 100–150) but
		// lives in AZ1's bucket; whichever copy the follower can fetch, the
		// range is the same.
		assert.Equal(t, Decision{Action: Apply, From: 100, Limit: 151, Reason: ReasonNext}, Decide(r3.leo(), &r3.local, &r3.leader, entry(5, 5, 100, 200)))
		assert.Equal(t, Decision{Action: Apply, From: 100, Limit: 151, Reason: ReasonNext}, r3.offer(r2Repub100))
		assert.Equal(t, Apply, r3.offer(r2New1).Action)
		assert.Equal(t, Apply, r3.offer(r2New2).Action)
		assert.Equal(t, r2Log, r3.epochs())
	})

	t.Run("scenario3_zombie_leader_is_fenced", func(t *testing.T) {
		f := newFollower(t, 100)
		f.merge(r1Marker...)
		f.offer(r1Head)
		f.merge(r2Pub...)
		// The zombie keeps uploading under epoch 5: a batch straddling the
		// fence gives only its true prefix, the rest is dropped.
		assert.Equal(t, Decision{Action: Apply, From: 121, Limit: 151, Reason: ReasonNext}, f.offer(entry(5, 5, 121, 160)))
		for _, z := range []metadata.Entry{entry(5, 5, 151, 160), entry(5, 5, 161, 170), entry(5, 5, 171, 300), r1Tail} {
			assert.Equal(t, Decision{Action: Drop, Reason: ReasonFenced}, f.offer(z), "zombie %+v", z)
		}
		// Past the log end too, while the follower waits for epoch 6.
		assert.Equal(t, Decision{Action: Drop, Reason: ReasonFenced}, f.offer(entry(5, 5, 190, 200)))
		f.offer(r2New1)
		f.offer(r2New2)
		assert.Equal(t, r2Log, f.epochs())
	})

	t.Run("scenario4_republished_entries_arrive_after_newer_epoch", func(t *testing.T) {
		r3 := newFollower(t, 100)
		r3.merge(r1Marker...)
		r3.offer(r1Head)
		held := []metadata.Entry{r2New2, r2New1}
		for _, e := range held {
			assert.Equal(t, Decision{Action: Hold, Reason: ReasonGap}, r3.offer(e))
		}
		// The republished entry arrives before R2's markers: the publisher
		// is newer than anything known, so wait for its lineage.
		assert.Equal(t, Decision{Action: Hold, Reason: ReasonPublisherAhead}, r3.offer(r2Repub))
		r3.merge(r2Pub...)
		assert.Equal(t, Apply, r3.offer(r2Repub).Action)
		assert.Equal(t, Decision{Action: Hold, Reason: ReasonGap}, r3.offer(r2New2), "still held: 151–170 not applied yet")
		assert.Equal(t, Apply, r3.offer(r2New1).Action)
		assert.Equal(t, Apply, r3.offer(r2New2).Action)
		assert.Equal(t, r2Log, r3.epochs())
	})

	t.Run("scenario5_same_offsets_from_two_buckets_applied_once", func(t *testing.T) {
		fromAZ1 := r1Mid
		fromAZ1.Object = metadata.ObjectRef{AZ: "use1-az1", Bucket: "wal--use1-az1--x-s3", Key: "a"}
		fromAZ2 := r2Repub
		fromAZ2.Object = metadata.ObjectRef{AZ: "use1-az2", Bucket: "wal--use1-az2--x-s3", Key: "b"}
		f := newFollower(t, 100)
		f.merge(r1Marker...)
		f.offer(r1Head)
		f.merge(r2Pub...)
		assert.Equal(t, Apply, f.offer(fromAZ1).Action)
		assert.Equal(t, Decision{Action: Skip, Reason: ReasonDuplicate}, f.offer(fromAZ2))
		assert.Equal(t, Decision{Action: Skip, Reason: ReasonDuplicate}, f.offer(fromAZ1))
		assert.Equal(t, run(5, 51), f.epochs(), "offsets 100–150 once")
	})

	t.Run("scenario6_follower_truncates_old_epoch_after_new_epoch_start", func(t *testing.T) {
		f := newFollower(t, 100)
		f.merge(r1Marker...)
		f.offer(r1Head)
		f.offer(r1Mid)
		require.Equal(t, Apply, f.offer(entry(5, 5, 151, 160)).Action, "before the fence is known, R1's records look like the next ones")
		require.Equal(t, int64(161), f.leo())

		require.NoError(t, f.leader.Merge(r2Pub...))
		to, diverged := Divergence(f.leo(), &f.local, &f.leader)
		assert.True(t, diverged)
		assert.Equal(t, int64(151), to)
		assert.Equal(t, Decision{Action: Truncate, TruncateTo: 151, Reason: ReasonDiverged}, f.offer(r2New1), "any entry truncates first")
		assert.Equal(t, int64(151), f.leo())
		assert.Equal(t, []EpochEntry{ee(5, 100)}, f.local.Entries())
		assert.Equal(t, Apply, f.offer(r2New1).Action)
		assert.Equal(t, Apply, f.offer(r2New2).Action)
		assert.Equal(t, r2Log, f.epochs())
	})

	t.Run("scenario7_corrupted_range_is_never_counted_as_applied", func(t *testing.T) {
		// Checksums are the engine's (walstore verifies the section and
		// names object and partition in its error). What fencing guarantees
		// is that deciding records nothing: a decision whose fetch failed
		// verification is simply not carried out, and the same entry, or
		// another copy of the same offsets, is decided the same way again.
		f := newFollower(t, 100)
		f.merge(r1Marker...)
		f.offer(r1Head)
		f.merge(r2Pub...)
		localBefore, leaderBefore := f.local.Entries(), f.leader.String()

		corrupt := r1Mid
		first := Decide(f.leo(), &f.local, &f.leader, corrupt)
		require.Equal(t, Decision{Action: Apply, From: 121, Limit: 151, Reason: ReasonNext}, first)
		// The fetch fails its checksum: the engine appends nothing, calls
		// neither Assign nor TruncateFromEnd, and keeps the entry.
		assert.Equal(t, first, Decide(f.leo(), &f.local, &f.leader, corrupt), "deciding again gives the same answer")
		assert.Equal(t, localBefore, f.local.Entries(), "the local lineage is unchanged")
		assert.Equal(t, leaderBefore, f.leader.String(), "the leader lineage is unchanged")
		assert.Equal(t, first, Decide(f.leo(), &f.local, &f.leader, r2Repub), "a good copy elsewhere covers the same range")

		assert.Equal(t, Apply, f.offer(r2Repub).Action)
		assert.Equal(t, Decision{Action: Skip, Reason: ReasonDuplicate}, Decide(f.leo(), &f.local, &f.leader, corrupt), "once the good copy is applied the bad one is a duplicate")
	})
}
