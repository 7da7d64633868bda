package walstore

import "github.com/activetier/activetier/metadata"

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
func (l *Leader) Stats() LeaderStats { return l.snapshot() }

// FollowerStats is a snapshot of a follower engine's counters.
type FollowerStats struct {
	// Messages counts metadata messages read; Poisoned those that failed
	// to decode and were skipped.
	Messages, Poisoned uint64
	// Forged counts entries and marker publications ignored because they
	// claimed the epoch the broker knows but came from a broker that is not
	// that epoch's leader.
	Forged uint64
	// LocalErrors counts failures of the local log (or answers against its
	// contract) that set a partition aside for a backoff.
	LocalErrors uint64
	// Entries counts entries received for followed partitions.
	Entries uint64
	// Applied and AppliedBytes count entries (or their parts) appended to
	// the local log.
	Applied, AppliedBytes uint64
	// Held is the number of entries waiting now: for a gap to fill, an
	// epoch marker, a retry, or their turn.
	Held int
	// Skipped counts duplicates; Dropped entries fenced as stale.
	Skipped, Dropped uint64
	// Truncations counts local-log truncations on divergence.
	Truncations uint64
	// Evicted counts held entries forgotten to stay within MaxHeld (and
	// read again later from the metadata log).
	Evicted uint64
	// FetchErrors counts failed section fetches, of which Corrupt failed
	// verification and NotFound named a missing object.
	FetchErrors, Corrupt, NotFound uint64
	// Fetches counts fetches made, one ranged GET each (hedges not
	// included); Hedges the hedges sent (Hedges/Fetches is the extra
	// request ratio), HedgeWins those that answered first, HedgesDenied
	// those the budget refused.
	Fetches, Hedges, HedgeWins, HedgesDenied uint64
	// FetchLatency is the time per fetch answered; ApplyLag the time from a section's newest record
	// timestamp to its append here: the replication lag.
	FetchLatency, ApplyLag Histogram
	// Lag is, per partition, how many offsets announced in metadata are
	// not yet applied.
	Lag map[metadata.TopicPartition]int64
}

// Stats returns a snapshot of the engine's counters.
func (f *Follower) Stats() FollowerStats {
	f.mu.Lock()
	c := f.stats
	lag := make(map[metadata.TopicPartition]int64, len(f.lag))
	for tp, n := range f.lag {
		lag[tp] = n
	}
	f.mu.Unlock()
	return FollowerStats{
		Messages: c.Messages, Poisoned: c.Poisoned, Forged: c.Forged, LocalErrors: c.LocalErrors, Entries: c.Entries,
		Applied: c.Applied, AppliedBytes: c.AppliedBytes, Held: c.Held,
		Skipped: c.Skipped, Dropped: c.Dropped, Truncations: c.Truncations, Evicted: c.Evicted,
		FetchErrors: c.FetchErrors, Corrupt: c.Corrupt, NotFound: c.NotFound,
		Fetches: c.Fetches, Hedges: c.Hedges, HedgeWins: c.HedgeWins, HedgesDenied: c.HedgesDenied,
		FetchLatency: f.fetchLat.snapshot(), ApplyLag: f.applyLat.snapshot(),
		Lag: lag,
	}
}
