package fencing

import (
	"fmt"
	"math"

	"github.com/activetier/activetier/metadata"
)

// Action is what a follower does with one metadata entry.
type Action uint8

// The actions. The zero Action is Hold, the one that is always safe.
const (
	// Hold keeps the entry to decide again later: something it needs (the
	// offsets before it, a marker, a newer publication) has not arrived.
	Hold Action = iota
	// Apply fetches the entry's section and appends the batches with offsets
	// in [Decision.From, Decision.Limit) to the local log.
	Apply
	// Skip discards the entry: the local log already holds its offsets.
	Skip
	// Drop discards the entry: it is malformed, or the leader lineage proves
	// its records are not the partition's records at those offsets.
	Drop
	// Truncate truncates the local log to Decision.TruncateTo before anything
	// else; the entry is decided again afterwards.
	Truncate
)

// String returns the action's name in lower case.
func (a Action) String() string {
	switch a {
	case Hold:
		return "hold"
	case Apply:
		return "apply"
	case Skip:
		return "skip"
	case Drop:
		return "drop"
	case Truncate:
		return "truncate"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Reason says why Decide chose its action. Each value belongs to one action
// and is short enough to be a metric label.
type Reason string

// Reasons for Apply.
const (
	// ReasonNext: the entry holds the log end offset and the leader lineage
	// gives the entry's record epoch there.
	ReasonNext Reason = "next"
)

// Reasons for Skip. A skipped entry is not needed at the current log end,
// but it is after a truncation below its last offset: the follower keeps it
// findable (or re-reads the metadata log), as it does for applied entries.
const (
	// ReasonDuplicate: every offset of the entry is below the log end offset
	// and the local lineage gives them the entry's record epoch (or knows
	// nothing about them): the local log already holds these records.
	ReasonDuplicate Reason = "duplicate"
	// ReasonSupersededTail: the entry's first offsets are in the local log
	// already and, from the first one that is not, the leader lineage (on
	// the word of a publisher at least as new as the entry's) has a later
	// epoch: the rest was fenced. A zombie's batch that straddles the fence,
	// once its true prefix is applied.
	ReasonSupersededTail Reason = "superseded-tail"
)

// Reasons for Drop.
const (
	// ReasonInvalidRange: a negative first offset, a last offset below the
	// first, or a last offset of math.MaxInt64.
	ReasonInvalidRange Reason = "invalid-range"
	// ReasonInvalidEpoch: a negative record epoch, or a publisher epoch below
	// the record epoch (a leader cannot publish records of a later epoch).
	ReasonInvalidEpoch Reason = "invalid-epoch"
	// ReasonFenced: at the entry's first offset (the first the local log
	// does not already hold), the leader lineage has a later epoch than the
	// entry's, on the word of a publisher at least as new as the entry's. The
	// entry's epoch had ended there: a zombie leader's records, or an old
	// leader's records that the next leader did not have.
	ReasonFenced Reason = "fenced"
	// ReasonNotInLineage: at the first offset of the entry the local log
	// does not already hold, the leader lineage, on the word of a publisher
	// at least as new as the entry's, has an earlier epoch than the entry's:
	// the entry's epoch never wrote there in the log that won (it was erased
	// by a failover, or the entry contradicts its own epoch's start).
	ReasonNotInLineage Reason = "not-in-lineage"
)

// Reasons for Hold.
const (
	// ReasonGap: the entry starts after the log end offset; the range in
	// between must be applied first.
	ReasonGap Reason = "gap"
	// ReasonEpochAhead: the record epoch is newer than any epoch in the
	// leader lineage; its marker has not arrived.
	ReasonEpochAhead Reason = "epoch-ahead"
	// ReasonPublisherAhead: the publisher's epoch is newer than any epoch in
	// the leader lineage. The publisher's markers, which may end the record
	// epoch earlier than the follower knows, have not arrived.
	ReasonPublisherAhead Reason = "publisher-ahead"
	// ReasonNotCovered: the leader lineage is empty or starts above the
	// offset in question.
	ReasonNotCovered Reason = "not-covered"
	// ReasonUnresolved: the leader lineage disagrees with the entry at the
	// offset in question, but on the word of a publisher older than the
	// entry's: a newer publication is missing.
	ReasonUnresolved Reason = "unresolved"
	// ReasonLocalAhead: the local log's latest epoch is newer than the
	// entry's and the leader lineage cannot yet tell whether the local log is
	// wrong.
	ReasonLocalAhead Reason = "local-ahead"
	// ReasonConflictsLocal: the entry gives some offset below the log end
	// offset another epoch than the local log does, and the leader lineage
	// cannot yet tell which is right. It is needed if the local log turns
	// out wrong and is truncated.
	ReasonConflictsLocal Reason = "conflicts-local"
	// ReasonInvalidLEO: the log end offset passed to Decide is negative.
	ReasonInvalidLEO Reason = "invalid-leo"
)

// Reasons for Truncate.
const (
	// ReasonDiverged: some offset below the log end offset has a local epoch
	// other than the leader lineage's, on the word of a publisher at least as
	// new as the local epoch (KIP-320's divergence).
	ReasonDiverged Reason = "diverged"
)

// Decision is the result of Decide.
type Decision struct {
	Action Action
	// From and Limit, set for Apply, bound the offsets to append:
	// [From, Limit). From is always the log end offset; Limit is at most the
	// entry's LastOffset+1 and at most the start of the epoch after the
	// entry's. Batches below From are duplicates and batches at or past Limit
	// belong to no epoch the follower may append, so both are skipped.
	From, Limit int64
	// TruncateTo, set for Truncate, is the new log end offset: the first
	// offset whose local epoch disagrees with the leader lineage.
	TruncateTo int64
	Reason     Reason
}

// String formats the decision for logs, "apply [121, 151): next".
func (d Decision) String() string {
	switch d.Action {
	case Apply:
		return fmt.Sprintf("apply [%d, %d): %s", d.From, d.Limit, d.Reason)
	case Truncate:
		return fmt.Sprintf("truncate to %d: %s", d.TruncateTo, d.Reason)
	}
	return fmt.Sprintf("%s: %s", d.Action, d.Reason)
}

// Decide says what a follower whose log ends at leo (the next offset it will
// append), whose own log has the epochs in local, and who has learned leader
// from the markers, does with entry e. It is a pure function: it reads its
// arguments and changes nothing, so deciding again after a failed fetch gives
// the same answer. Nil lineages are empty ones.
//
// The checks, in order (the package documentation has the table):
//  1. A malformed entry is dropped.
//  2. A local log that diverges from the leader lineage is truncated first.
//  3. Let j be the first offset of the entry the local log does not already
//     hold with the entry's epoch: the first offset below leo where the local
//     epoch differs, else max(FirstOffset, leo). If there is none (the entry
//     is wholly below leo and agrees) it is skipped as a duplicate.
//  4. If the leader lineage, on the word of a publisher at least as new as
//     the entry's, gives j another epoch, the entry's records from j on are
//     not the partition's: it is dropped, unless the lineage's epoch at j is
//     later and j is past FirstOffset, in which case its offsets below j are
//     ones the local log holds and it is skipped.
//  5. An entry that starts after leo is held (a gap); one that disagrees
//     with the local log below leo is held until the lineage can tell which
//     is right.
//  6. An entry whose epochs the leader lineage does not know yet, or that it
//     disagrees with on older authority, is held, as is one whose epoch is
//     older than the local log's latest.
//  7. Otherwise it is applied from leo up to the end of its record epoch.
func Decide(leo int64, local *Lineage, leader *LeaderLineage, e metadata.Entry) Decision {
	switch {
	case e.FirstOffset < 0 || e.LastOffset < e.FirstOffset || e.LastOffset == math.MaxInt64:
		return Decision{Action: Drop, Reason: ReasonInvalidRange}
	case e.RecordEpoch < 0 || e.PublisherEpoch < e.RecordEpoch:
		return Decision{Action: Drop, Reason: ReasonInvalidEpoch}
	case leo < 0:
		return Decision{Action: Hold, Reason: ReasonInvalidLEO}
	}
	if to, ok := Divergence(leo, local, leader); ok {
		return Decision{Action: Truncate, TruncateTo: to, Reason: ReasonDiverged}
	}
	j, ok := firstNew(leo, local, e)
	if !ok {
		return Decision{Action: Skip, Reason: ReasonDuplicate}
	}
	i, authority := leader.at(j)
	if i >= 0 {
		if epoch := leader.view.entries[i].Epoch; epoch != e.RecordEpoch && authority >= e.PublisherEpoch {
			switch {
			case epoch < e.RecordEpoch:
				// The entry's epoch had not started at j, or was erased
				// there: no record of the entry can be in that log.
				return Decision{Action: Drop, Reason: ReasonNotInLineage}
			case j == e.FirstOffset:
				return Decision{Action: Drop, Reason: ReasonFenced}
			default:
				// Offsets below j are in the local log already; keep them
				// findable for after a truncation, as for any duplicate.
				return Decision{Action: Skip, Reason: ReasonSupersededTail}
			}
		}
	}
	switch {
	case e.FirstOffset > leo:
		return Decision{Action: Hold, Reason: ReasonGap}
	case j < leo:
		return Decision{Action: Hold, Reason: ReasonConflictsLocal}
	}
	latest, ok := leader.Latest()
	switch {
	case !ok:
		return Decision{Action: Hold, Reason: ReasonNotCovered}
	case e.RecordEpoch > latest.Epoch:
		return Decision{Action: Hold, Reason: ReasonEpochAhead}
	case e.PublisherEpoch > latest.Epoch:
		return Decision{Action: Hold, Reason: ReasonPublisherAhead}
	case i < 0:
		return Decision{Action: Hold, Reason: ReasonNotCovered}
	case leader.view.entries[i].Epoch != e.RecordEpoch:
		return Decision{Action: Hold, Reason: ReasonUnresolved}
	}
	if ll, ok := local.Latest(); ok && ll.Epoch > e.RecordEpoch {
		return Decision{Action: Hold, Reason: ReasonLocalAhead}
	}
	limit := e.LastOffset + 1
	if end, ok := leader.view.endAfter(i); ok && end < limit {
		limit = end
	}
	return Decision{Action: Apply, From: leo, Limit: limit, Reason: ReasonNext}
}

// firstNew returns the first offset of e that the local log, which ends at
// leo, does not hold with e's record epoch: the first offset below leo where
// the local lineage gives another epoch, else max(FirstOffset, leo). Below
// the local lineage's earliest start it cannot disagree. It reports false
// when the local log holds all of e.
func firstNew(leo int64, local *Lineage, e metadata.Entry) (int64, bool) {
	if hi := min(e.LastOffset, leo-1); e.FirstOffset <= hi {
		if first, ok := local.Earliest(); ok && first.StartOffset <= hi {
			o := max(e.FirstOffset, first.StartOffset)
			i := local.indexFor(o)
			if local.entries[i].Epoch != e.RecordEpoch {
				return o, true
			}
			if end, ok := local.endAfter(i); ok && end <= hi {
				return end, true
			}
		}
	}
	if e.LastOffset < leo {
		return 0, false
	}
	return max(e.FirstOffset, leo), true
}

// Divergence reports whether the local log, which ends at leo and has the
// epochs in local, diverges from the leader lineage, and if so the offset to
// truncate it to: the first offset below leo where the local epoch differs
// from the leader lineage's, counting only offsets where both know an epoch
// and the leader lineage's publisher there is at least as new as the local
// epoch (an older publication cannot overrule records written after it).
// When there is no divergence it returns leo and false.
//
// A follower calls it after merging markers, to truncate at once rather than
// at the next entry; Decide calls it too.
func Divergence(leo int64, local *Lineage, leader *LeaderLineage) (truncateTo int64, diverged bool) {
	if leader == nil {
		return leo, false
	}
	lf, ok1 := local.Earliest()
	vf, ok2 := leader.view.Earliest()
	if !ok1 || !ok2 {
		return leo, false
	}
	// Walk from the first offset both lineages know up to leo, piece by
	// piece: the local epoch, the leader epoch and the leader authority only
	// change at entry starts and publication starts, so each piece is
	// checked once.
	o := max(lf.StartOffset, vf.StartOffset)
	li, vi := local.indexFor(o), leader.view.indexFor(o)
	pi := 0
	for pi+1 < len(leader.pubs) && leader.pubs[pi+1].from() <= o {
		pi++
	}
	for o < leo {
		le := local.entries[li].Epoch
		if leader.view.entries[vi].Epoch != le && leader.pubs[pi].publisher >= le {
			return o, true
		}
		next := leo
		if li+1 < len(local.entries) {
			next = min(next, local.entries[li+1].StartOffset)
		}
		if vi+1 < len(leader.view.entries) {
			next = min(next, leader.view.entries[vi+1].StartOffset)
		}
		if pi+1 < len(leader.pubs) {
			next = min(next, leader.pubs[pi+1].from())
		}
		o = next
		for li+1 < len(local.entries) && local.entries[li+1].StartOffset <= o {
			li++
		}
		for vi+1 < len(leader.view.entries) && leader.view.entries[vi+1].StartOffset <= o {
			vi++
		}
		for pi+1 < len(leader.pubs) && leader.pubs[pi+1].from() <= o {
			pi++
		}
	}
	return leo, false
}
