package walstore

import (
	"context"
	"fmt"
	"slices"
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

// RecordProgress is Node.RecordProgress of the leader side.
func (l *leaderEngine) RecordProgress(p Progress) {
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

// ReportTiered is Node.ReportTiered of the leader side.
func (l *leaderEngine) ReportTiered(tp metadata.TopicPartition, offset int64) {
	l.mu.Lock()
	l.core.Tiered(tp, offset)
	l.mu.Unlock()
}

// CollectGarbage is Node.CollectGarbage of the leader side.
func (l *leaderEngine) CollectGarbage(ctx context.Context) (int, error) {
	n, err := l.callCore(ctx, func(c *leadcore.Core, now time.Time, call uint64) { c.CollectGarbage(now, call) })
	if err != nil {
		return n, fmt.Errorf("walstore: collecting garbage: %w", err)
	}
	return n, nil
}

// callCore feeds the core a broker's call of garbage collection, event,
// as soon as Run runs (at once, if it does), and waits for its end in
// Ready.Calls: its deletes are Run's, as the periodic collection's are. It
// fails with ctx's error if ctx ends first, the call then fed or not,
// and with ErrStopped once Run has returned.
func (l *leaderEngine) callCore(ctx context.Context, event func(c *leadcore.Core, now time.Time, call uint64)) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return 0, ErrStopped
	}
	l.lastCall++
	id, ch := l.lastCall, make(chan leadcore.CallDone, 1)
	l.gcCalls[id] = ch
	changed := false
	if l.running {
		event(l.core, l.cfg.Clock.Now(), id)
		changed = l.takeLocked()
	} else {
		l.queued = append(l.queued, queuedCall{id: id, event: event})
	}
	done := l.done
	l.mu.Unlock()
	if changed {
		l.report()
	}
	select {
	case d := <-ch:
		return d.Deleted, d.Err
	case <-ctx.Done():
	case <-done:
	}
	l.mu.Lock()
	delete(l.gcCalls, id)
	l.queued = slices.DeleteFunc(l.queued, func(q queuedCall) bool { return q.id == id })
	l.mu.Unlock()
	select {
	case d := <-ch: // it ended meanwhile
		return d.Deleted, d.Err
	default:
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return 0, ErrStopped
}

// queuedCall is a broker's call of garbage collection made before Run,
// for Run to feed the core when it starts.
type queuedCall struct {
	id    uint64
	event func(c *leadcore.Core, now time.Time, call uint64)
}

// MetadataLowMarks is Node.MetadataLowMarks of the leader side.
func (l *leaderEngine) MetadataLowMarks() map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.core.LowMarks()
}

// TrimMetadata trims each metadata partition below the lowest of the marks
// every publishing leader reported (Node.MetadataLowMarks). Pass the marks
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

// Sweep is Node.Sweep of the leader side. The listing is the call's
// own, made before the core is told of it (see Node.Sweep).
func (l *leaderEngine) Sweep(ctx context.Context, age time.Duration) (int, error) {
	if l.isStopped() {
		return 0, ErrStopped
	}
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
	cutoff := l.cfg.Clock.Now().Add(-age)
	n, err := l.callCore(ctx, func(c *leadcore.Core, now time.Time, call uint64) {
		c.Sweep(now, call, listed, cutoff, local.Bucket, prefix)
	})
	if err != nil {
		return n, fmt.Errorf("walstore: sweep: %w", err)
	}
	return n, nil
}
