package walstore

import (
	"context"
	"fmt"
	"time"

	"github.com/activetier/activetier/internal/leadcore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Garbage collection: the leader tracks, for every object it published,
// the last offset of each partition section, and deletes an object once
// every section is below what all the partition's followers have applied
// and below the broker's tiered mark. Because each leader collects only
// its own objects, no coordination is needed; objects of a previous
// incarnation are found by Sweep. The decisions are the core's
// (leadcore); the store and log calls are made here.

// RecordProgress records that a follower has applied a partition up to,
// not including, p.EndOffset (its log end offset), and that the last
// record it holds has epoch p.LastEpoch (-1: it holds none): what Kafka's
// fetch request carries. The broker relays it from the follower; the
// engine judges it as Kafka's leader does. A follower whose last epoch is
// not one of this leader's log, or whose log runs past the end of that
// epoch here, may still truncate: only what it holds of this leader's log
// counts, and garbage collection never deletes what it may still need;
// nor is a follower credited past the end of what was appended here. The
// latest report is what the follower holds, even if lower than an earlier
// one (it lost its log); one whose last epoch is not in this log
// withdraws its credit until it reports again, truncated.
//
// A follower of this leadership whose log end is below what this
// leadership's entries still reach (what was collected, or published
// before it became a follower) is republished for, from its log end, in
// the background: one republish at a time per partition, from the lowest
// such follower up to where they are reached again, never twice for what
// it covers. The broker need not notice.
//
// Reports for a partition this engine does not lead, of a follower it
// does not have, or with negative values (but LastEpoch -1) are ignored,
// and reports are forgotten when a new leadership begins.
//
// A report whose last epoch is an earlier one than the leadership's is
// judged against the local log's epochs (LocalLog.Epochs). That read
// waits at most RequestTimeout; one that fails, or does not answer, or
// whose earlier call given up on has not returned, leaves the report
// unjudged and the partition reported failing until a report is judged
// again (Health.Partitions). A report that comes while a transition of
// the partition, or a read of the engine's, is calling the log is
// ignored: the next one counts.
func (l *Leader) RecordProgress(p Progress) {
	l.mu.Lock()
	need := l.core.NeedLineage(p.Partition, p.LastEpoch)
	l.mu.Unlock()
	var epochs []storage.EpochEntry
	var err error
	if need {
		// Bounded, as the engine's own calls are: the broker may deliver
		// every partition's reports from one goroutine. Nor does it wait
		// for a transition of the partition, or a read of the engine's,
		// to release the log: that one may itself wait for the goroutine
		// that delivers this report. The next report counts instead.
		held, herr := l.locals.tryHold(p.Partition)
		switch {
		case herr != nil:
			err = herr // a call of the log given up on has not returned
		case !held:
			return
		default:
			epochs, err = l.epochs(context.Background(), p.Partition, "walstore: reading the local log's epochs to judge a follower's progress", true)
			l.locals.release(p.Partition)
		}
	}
	l.step(func(c *leadcore.Core, now time.Time) {
		c.Progress(now, p.Partition, p.Follower, p.EndOffset, p.LastEpoch, epochs, err)
	})
}

// ReportTiered records that tp's records below offset are in long-term
// storage or past retention, so the WAL copy is no longer needed for them.
// Until a mark is reported for a partition, only follower progress gates
// the deletion of its objects.
func (l *Leader) ReportTiered(tp metadata.TopicPartition, offset int64) {
	l.mu.Lock()
	l.core.Tiered(tp, offset)
	l.mu.Unlock()
}

// CollectGarbage deletes every tracked object whose sections are all safe
// to delete and returns how many it deleted. Deletes are idempotent, so a
// failed call is simply repeated; objects stay tracked until deleted.
func (l *Leader) CollectGarbage(ctx context.Context) (int, error) {
	l.mu.Lock()
	refs := l.core.Collect(l.cfg.Clock.Now())
	l.mu.Unlock()
	if len(refs) == 0 {
		return 0, nil
	}
	if err := l.mgr.Delete(ctx, refs); err != nil {
		return 0, fmt.Errorf("walstore: collecting garbage: %w", &DependencyError{Dependency: "ObjectStore.Delete", Err: err})
	}
	l.mu.Lock()
	l.core.Forget(refs, true)
	l.mu.Unlock()
	return len(refs), nil
}

// MetadataLowMarks returns, per metadata partition this leader has
// published to, the lowest offset it still needs kept: the oldest message
// naming an object not yet collected, or else its latest epoch markers.
// The log may be trimmed below the minimum of every leader's mark (see
// TrimMetadata).
func (l *Leader) MetadataLowMarks() map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.core.LowMarks()
}

// TrimMetadata trims each metadata partition below the lowest of the marks
// every publishing leader reported (Leader.MetadataLowMarks). Pass the marks
// of all leaders that publish to the log: a partition is trimmed only below
// what every one of them no longer needs. With Kafka, a short retention.ms
// on the topic is the usual alternative.
func TrimMetadata(ctx context.Context, log metadata.Log, marks ...map[int32]int64) error {
	low := make(map[int32]int64)
	for _, m := range marks {
		for p, off := range m {
			if cur, ok := low[p]; !ok || off < cur {
				low[p] = off
			}
		}
	}
	for p, off := range low {
		if err := log.Trim(ctx, p, off); err != nil {
			return fmt.Errorf("walstore: trimming metadata partition %d below %d: %w", p, off, err)
		}
	}
	return nil
}

// Sweep deletes objects under this broker's key prefix in its own bucket
// that the collector does not track and that are older than age: uploads
// whose acknowledgement was lost, a hedged upload's losing copy, and
// objects of a previous incarnation of the broker. Choose age well above
// the longest a follower may lag. Whatever age says, it never deletes an
// object a leadership of this engine still means to publish: one stored
// while the metadata log refuses its entries, a republish copy whose
// entries are being published, or one stored since the oldest upload
// attempt still in flight began (as the store's clock and the engine's
// tell), which that attempt may yet report.
// Objects the store lists outside that bucket and prefix (a store that
// breaks the List contract) are never deleted; Sweep then also returns an
// error matching ErrContractViolation.
func (l *Leader) Sweep(ctx context.Context, age time.Duration) (int, error) {
	local := l.cfg.Store.Local()
	prefix := l.mgr.keyPrefix()
	infos, err := l.cfg.Store.List(ctx, local.Bucket, prefix)
	if err != nil {
		return 0, fmt.Errorf("walstore: sweep: %w", &DependencyError{Dependency: "ObjectStore.List", Err: err})
	}
	listed := make([]leadcore.Listed, len(infos))
	for i, info := range infos {
		listed[i] = leadcore.Listed{Ref: info.Ref, LastModified: info.LastModified}
	}
	l.mu.Lock()
	refs, foreign := l.core.Sweepable(listed, l.cfg.Clock.Now().Add(-age), local.Bucket, prefix)
	l.mu.Unlock()
	if err := l.mgr.Delete(ctx, refs); err != nil {
		return 0, fmt.Errorf("walstore: sweep: %w", &DependencyError{Dependency: "ObjectStore.Delete", Err: err})
	}
	l.mu.Lock()
	l.core.Forget(refs, false)
	l.mu.Unlock()
	if foreign > 0 {
		return len(refs), fmt.Errorf("walstore: sweep: %w", &DependencyError{Dependency: "ObjectStore.List",
			Err: fmt.Errorf("%w: %d objects outside bucket %s and prefix %q; left alone", ErrContractViolation, foreign, local.Bucket, prefix)})
	}
	return len(refs), nil
}
