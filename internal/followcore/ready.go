package followcore

import (
	"errors"
	"strconv"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Ready is the work the core wants done and its news, gathered since
// the last Core.Advance: taken with Core.Ready, acknowledged with Advance.
type Ready struct {
	// Loads asks for partitions' local log state: its end offset and
	// epochs. Answer each with Core.Loaded.
	Loads []Load
	// Truncates asks for local-log truncations. Answer each with
	// Core.Truncated.
	Truncates []Truncate
	// Appends asks for local-log appends, in the order given. Answer each
	// with Core.Appended.
	Appends []Append
	// Verifies asks for records a partition's local log holds to be read
	// back, to check them against the digest their leader published.
	// Answer each with Core.Verified.
	Verifies []Verify
	// Fetches asks for fetches: each one ranged GET of its entries'
	// sections (as PlanReads plans them), verified. Answer each with
	// Core.Fetched.
	Fetches []Fetch
	// Cancels are fetches the core no longer wants (the losers of hedged
	// pairs): stop them; their answers are ignored.
	Cancels []uint64
	// Progress is what to report to partitions' leaders, as a Kafka
	// follower's fetch does: after every append and truncation, after a
	// partition starts from its local log, when its leader changes, and
	// again every ReportInterval while its log does not change.
	Progress []Progress
	// Applied are the appends answered since the last Advance, for the
	// replication lag.
	Applied []Applied
	// Lags are the partitions whose lag (offsets announced, not yet
	// applied) changed since the last Advance, with the new value.
	Lags []Lag
	// Failures are the partitions whose local log began failing (each
	// failure sets the partition aside for a backoff), failed again, or
	// recovered, in order.
	Failures []Failure
	// Mismatches are the digests that differed from the ones leaders
	// published (package digest): the local log and the leader's differ
	// in each one's range. The core logs them too.
	Mismatches []digest.Mismatch
	// Rewind asks for the metadata partition to be read again from its
	// low watermark: entries the core forgot are needed again.
	Rewind bool
	// WakeAt, if not zero, is when the core wants a Tick at the latest.
	WakeAt time.Time
}

// maxReused bounds the elements of a Ready slice the core keeps to reuse:
// a burst of work must not pin its arrays for good.
const maxReused = 4096

// emptied returns rd without its requests, for the core to fill again:
// its slices keep their arrays, cleared so that they keep nothing from the
// collector, unless longer than maxReused. A Ready's slices otherwise grew
// afresh after every Advance, a few allocations per partition appended.
func (rd *Ready) emptied() Ready {
	return Ready{
		Loads: reused(rd.Loads), Truncates: reused(rd.Truncates), Appends: reused(rd.Appends), Verifies: reused(rd.Verifies),
		Fetches: reused(rd.Fetches), Cancels: reused(rd.Cancels), Progress: reused(rd.Progress),
		Applied: reused(rd.Applied), Lags: reused(rd.Lags), Failures: reused(rd.Failures),
		Mismatches: reused(rd.Mismatches),
	}
}

func reused[S ~[]E, E any](s S) S {
	if cap(s) > maxReused {
		return nil
	}
	clear(s)
	return s[:0]
}

// Empty reports whether rd asks for nothing but, perhaps, a Tick.
func (rd *Ready) Empty() bool {
	return len(rd.Loads) == 0 && len(rd.Truncates) == 0 && len(rd.Appends) == 0 && len(rd.Verifies) == 0 &&
		len(rd.Fetches) == 0 && len(rd.Cancels) == 0 && len(rd.Progress) == 0 && len(rd.Applied) == 0 && len(rd.Lags) == 0 && len(rd.Failures) == 0 && len(rd.Mismatches) == 0 && !rd.Rewind
}

// Load asks for a partition's local log state.
type Load struct {
	ID        uint64
	Partition metadata.TopicPartition
}

// Truncate asks for a partition's local log to be truncated so that it
// ends at To. With AtBatch, To may fall inside a batch (a marker may be
// wrong about batch boundaries): the driver then truncates at that
// batch's first offset instead, removing it whole, as Kafka's truncateTo
// does. Without it, To is exact (a log holding no records starts over at
// To).
type Truncate struct {
	ID        uint64
	Partition metadata.TopicPartition
	To        int64
	AtBatch   bool
}

// Append asks for batches to be appended to a partition's local log. They
// continue the log from its end, whole, in order.
type Append struct {
	ID        uint64
	Partition metadata.TopicPartition
	Batches   []storage.Batch
}

// Verify asks for a partition's records [From, To) to be read back from
// its local log, whole batches as appended.
type Verify struct {
	ID        uint64
	Partition metadata.TopicPartition
	From, To  int64
}

// Fetch asks for the sections of Entries, all in one object of Bucket, to
// be read, with one ranged GET, and verified.
type Fetch struct {
	ID      uint64
	Bucket  string
	Entries []metadata.Entry
	// HedgeOf, if not zero, makes this a hedge: the same GET as fetch
	// HedgeOf, which has not answered in time, sent again (on a fresh
	// connection, as Amazon's S3 performance guidance advises).
	HedgeOf uint64
}

// Progress is a partition's local log as its follower reports it to the
// partition's leader.
type Progress struct {
	Partition metadata.TopicPartition
	// Leader is the leader the broker knows for the partition.
	Leader int32
	// EndOffset and LastEpoch describe the local log; LastEpoch is -1
	// for a log without epochs.
	EndOffset int64
	LastEpoch int32
}

// Applied is one append: its size, and the newest record timestamp of the
// entry it came from (Unix ms), for the replication lag.
type Applied struct {
	Partition    metadata.TopicPartition
	Bytes        int
	MaxTimestamp int64
}

// Failure is a followed partition whose replication its local log's
// failures have stopped: each sets it aside for a backoff, after which it
// starts again from what the log says. It recovers once the kind of call
// that failed succeeds: a load (EndOffset, Epochs) for a failed load, an
// append or a truncation for a failed write. An Err of nil says it
// recovered, or is no longer followed.
type Failure struct {
	Partition metadata.TopicPartition
	// Since is when it began failing.
	Since time.Time
	// Err is the latest failure.
	Err error
}

// Lag is a partition's count of offsets announced but not applied.
type Lag struct {
	Partition metadata.TopicPartition
	Offsets   int64
}

// LocalState is a partition's local log as Loaded reports it.
type LocalState struct {
	EndOffset int64
	Epochs    []storage.EpochEntry
}

// Outcome classifies how fetching one entry's section went.
type Outcome uint8

// The outcomes.
const (
	// Fetched: the section was read and verified; its batches are in the
	// result.
	Fetched Outcome = iota
	// Gone: the object, its bucket or the range does not exist; no retry
	// can bring it back.
	Gone
	// Corrupt: the bytes read failed verification.
	Corrupt
	// Unavailable: the bucket did not answer, or answered that it cannot
	// now; its entries back off, and copies elsewhere may be used.
	Unavailable
	// Refused: the store refused the request for good as it is (for
	// example, access denied): retried only after the longest backoff.
	Refused
	// Failed: any other failure, retried after a backoff.
	Failed
)

// Result is the outcome of fetching one entry's section.
type Result struct {
	Entry   metadata.Entry
	Outcome Outcome
	// Batches is the section's batches when Outcome is Fetched.
	Batches []storage.Batch
	// Buffer, if set, is the driver's hold on memory that Batches alias.
	// The core releases it once it has appended the entry's batches and
	// forgotten them, and never touches Batches after; an entry it forgets
	// otherwise keeps its hold, leaving the memory to the garbage
	// collector.
	Buffer Releaser
	// Err says what went wrong otherwise, for the log.
	Err error
}

// Releaser is a hold on memory lent to the core; see Result.Buffer.
type Releaser interface {
	// Release drops the hold. The core calls it at most once per Result.
	Release()
}

// Counters are the core's running totals. The follower engine reports them
// as they are (walstore.FollowerCounters), so their docs are the broker's.
type Counters struct {
	// Messages counts metadata messages read; Poisoned those that failed
	// to decode and were skipped, and marker publications that were
	// invalid.
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
	// Skipped counts duplicates; Dropped entries fenced as stale or
	// malformed.
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
	// DigestChecks counts comparisons of the local log's rolling digest
	// with one a leader published, DigestMismatches those that differed
	// (each also in Ready.Mismatches), and DigestsTaken the times a
	// partition that knew no digest of its own (after starting from its
	// local log, or a truncation past what it remembers) took its
	// leader's, to check what it appends from there on.
	DigestChecks, DigestMismatches, DigestsTaken uint64
}

// OutcomeOf classifies the error of a failed section fetch, as the
// ObjectStore contract defines its errors; nil is Fetched.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return Fetched
	case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrUnknownBucket), errors.Is(err, storage.ErrInvalidRange):
		return Gone
	case errors.Is(err, combiner.ErrCorrupt):
		return Corrupt
	case errors.Is(err, storage.ErrPermanent):
		return Refused
	case errors.Is(err, storage.ErrUnavailable):
		return Unavailable
	}
	return Failed
}

// DescribeReady renders rd as text, one line per request or report, in a
// fixed order (loads, truncations, appends, fetches, cancels, progress,
// applied, lags, failures, rewind, wake), with times as milliseconds since
// base. It is what the package's scripts under testdata expect, and what a
// driver may log to see what its core asked for: the same Ready gives the
// same text. It appends with strconv rather than fmt: the fuzz target
// renders every Ready twice per input.
func DescribeReady(rd Ready, base time.Time) string {
	var b []byte
	num := func(n int64) { b = append(b, ' '); b = strconv.AppendInt(b, n, 10) }
	part := func(tp metadata.TopicPartition) {
		b = append(b, ' ')
		b = append(b, tp.Topic...)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(tp.Partition), 10)
	}
	word := func(w string) { b = append(b, w...) }
	for _, l := range rd.Loads {
		word("load")
		num(int64(l.ID))
		part(l.Partition)
		word("\n")
	}
	for _, tr := range rd.Truncates {
		word("truncate")
		num(int64(tr.ID))
		part(tr.Partition)
		word(" to")
		num(tr.To)
		if tr.AtBatch {
			word(" at batch")
		}
		word("\n")
	}
	for _, a := range rd.Appends {
		word("append")
		num(int64(a.ID))
		part(a.Partition)
		for _, bt := range a.Batches {
			num(bt.FirstOffset)
			word("-")
			b = strconv.AppendInt(b, bt.LastOffset, 10)
			word("@")
			b = strconv.AppendInt(b, int64(bt.Epoch), 10)
		}
		word("\n")
	}
	for _, v := range rd.Verifies {
		word("verify")
		num(int64(v.ID))
		part(v.Partition)
		num(v.From)
		word("-")
		b = strconv.AppendInt(b, v.To, 10)
		word("\n")
	}
	for _, f := range rd.Fetches {
		word("fetch")
		num(int64(f.ID))
		if f.HedgeOf != 0 {
			word(" hedging")
			num(int64(f.HedgeOf))
		}
		word(" " + f.Bucket)
		for _, e := range f.Entries {
			part(e.Partition)
			word(":")
			b = strconv.AppendInt(b, e.FirstOffset, 10)
			word("-")
			b = strconv.AppendInt(b, e.LastOffset, 10)
			word("@")
			b = strconv.AppendInt(b, int64(e.RecordEpoch), 10)
		}
		word("\n")
	}
	for _, id := range rd.Cancels {
		word("cancel")
		num(int64(id))
		word("\n")
	}
	for _, pr := range rd.Progress {
		word("progress")
		part(pr.Partition)
		word(" end")
		num(pr.EndOffset)
		word(" epoch")
		num(int64(pr.LastEpoch))
		word(" leader")
		num(int64(pr.Leader))
		word("\n")
	}
	for _, a := range rd.Applied {
		word("applied")
		part(a.Partition)
		num(int64(a.Bytes))
		word(" bytes\n")
	}
	for _, l := range rd.Lags {
		word("lag")
		part(l.Partition)
		num(l.Offsets)
		word("\n")
	}
	for _, f := range rd.Failures {
		if f.Err == nil {
			word("recovered")
			part(f.Partition)
			word("\n")
			continue
		}
		word("failing")
		part(f.Partition)
		word(" since")
		num(f.Since.Sub(base).Milliseconds())
		word(": " + f.Err.Error() + "\n")
	}
	for _, m := range rd.Mismatches {
		word("mismatch")
		part(m.Partition)
		word(" " + m.What)
		num(m.From)
		word("-")
		b = strconv.AppendInt(b, m.To, 10)
		word(" epoch")
		num(int64(m.Epoch))
		word("\n")
	}
	if rd.Rewind {
		word("rewind\n")
	}
	if !rd.WakeAt.IsZero() {
		word("wake")
		num(rd.WakeAt.Sub(base).Milliseconds())
		word("\n")
	}
	return string(b)
}
