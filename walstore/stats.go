package walstore

import (
	"slices"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/metadata"
)

// LeaderStats is a snapshot of a leader engine's counters.
type LeaderStats struct {
	// Appends and AppendedBytes count batches accepted by Append.
	Appends, AppendedBytes uint64
	// BufferedBytes is what Append has accepted and not yet published.
	BufferedBytes int
	// Objects and ObjectBytes count objects stored by the append path.
	Objects, ObjectBytes uint64
	// UploadsInFlight counts objects cut and not yet stored.
	UploadsInFlight int
	// UploadRetries and PublishRetries count failed attempts retried.
	UploadRetries, PublishRetries uint64
	// UploadHedges counts uploads attempted again because their attempt
	// overstayed (UploadHedges/Objects is the extra PUT ratio);
	// UploadHedgeWins those whose hedge stored first; UploadHedgesDenied
	// the hedges the budget refused.
	UploadHedges, UploadHedgeWins, UploadHedgesDenied uint64
	// Fenced counts entries withheld because the broker no longer led the
	// partition at the entry's epoch when it was to be published.
	Fenced uint64
	// Republished counts entries republished: for a new leadership
	// (BecomeLeader's republishFrom), by Republish, and for followers
	// that nothing continued.
	Republished uint64
	// ObjectsDeleted counts objects removed by garbage collection.
	ObjectsDeleted uint64
	// UploadLatency is the time from cutting an object to storing it;
	// PublishLatency from the oldest batch's Append to its entries being
	// published.
	UploadLatency, PublishLatency Histogram
	// Health is the upload health.
	Health Health
}

// Stats returns a snapshot of the engine's counters.
func (l *leaderEngine) Stats() LeaderStats { return l.snapshot() }

// FollowerCounters are a follower engine's running totals, as its core
// keeps them.
type FollowerCounters = followcore.Counters

// FollowerStats is a snapshot of a follower engine's counters.
type FollowerStats struct {
	FollowerCounters
	// FetchLatency is the time per fetch answered; ApplyLag the time
	// from a section's newest record timestamp to its append here: the
	// replication lag.
	FetchLatency, ApplyLag Histogram
	// Lag is, per partition, how many offsets announced in metadata are
	// not yet applied.
	Lag map[metadata.TopicPartition]int64
	// Mismatches are the latest digest mismatches (at most
	// keptMismatches, oldest first); DigestMismatches counts them all.
	Mismatches []digest.Mismatch
}

// keptMismatches bounds FollowerStats.Mismatches: a log that differs
// everywhere must not grow the engine's memory.
const keptMismatches = 16

// Stats returns a snapshot of the engine's counters.
func (f *followerEngine) Stats() FollowerStats {
	f.mu.Lock()
	c := f.stats
	lag := make(map[metadata.TopicPartition]int64, len(f.lag))
	for tp, n := range f.lag {
		lag[tp] = n
	}
	mismatches := slices.Clone(f.mismatches)
	f.mu.Unlock()
	return FollowerStats{
		Mismatches:       mismatches,
		FollowerCounters: c,
		FetchLatency:     f.fetchLat.snapshot(),
		ApplyLag:         f.applyLat.snapshot(),
		Lag:              lag,
	}
}
