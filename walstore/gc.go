package walstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
)

// collector is the leader's garbage collector. It tracks, for every object
// this leader published, the last offset of each partition section, and
// deletes an object once every section is below what all the partition's
// followers have applied and below the broker's tiered mark. Because each
// leader collects only its own objects, no coordination is needed; objects
// of a previous incarnation are found by Sweep.
type collector struct {
	l *Leader

	mu      sync.Mutex
	objects map[metadata.ObjectRef]*tracked
	applied map[metadata.TopicPartition]map[int32]int64
	tiered  map[metadata.TopicPartition]int64
	markers map[int32]int64 // metadata partition -> offset of the latest marker message there
	deleted uint64
}

type tracked struct {
	sections []sectionEnd
	meta     map[int32]int64 // metadata partition -> offset of the message naming the object
}

type sectionEnd struct {
	tp   metadata.TopicPartition
	last int64
}

func newCollector(l *Leader) *collector {
	return &collector{
		l:       l,
		objects: make(map[metadata.ObjectRef]*tracked),
		applied: make(map[metadata.TopicPartition]map[int32]int64),
		tiered:  make(map[metadata.TopicPartition]int64),
		markers: make(map[int32]int64),
	}
}

func (c *collector) track(ref metadata.ObjectRef, sections []combiner.SectionInfo, meta map[int32]int64) {
	t := &tracked{meta: meta, sections: make([]sectionEnd, len(sections))}
	for i, s := range sections {
		t.sections[i] = sectionEnd{tp: s.Partition, last: s.LastOffset}
	}
	c.mu.Lock()
	c.objects[ref] = t
	c.mu.Unlock()
}

func (c *collector) trackMarkers(meta map[int32]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, off := range meta {
		c.markers[p] = max(c.markers[p], off)
	}
}

// ReportApplied records that follower has applied tp up to, not including,
// offset (its log end offset). The broker relays this from the follower, as
// Kafka's leader learns it from fetch requests. Reports are forgotten when
// the engine leads tp at a new epoch (BecomeLeader).
func (l *Leader) ReportApplied(tp metadata.TopicPartition, follower int32, offset int64) {
	c := l.gc
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.applied[tp]
	if m == nil {
		m = make(map[int32]int64)
		c.applied[tp] = m
	}
	m[follower] = max(m[follower], offset)
}

// forgetApplied drops what followers reported applied of tp: at a new
// leadership those reports describe their logs against an earlier leader's
// log, which this leadership's may have truncated, and only fresh reports
// can vouch for this leadership's objects.
func (c *collector) forgetApplied(tp metadata.TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.applied, tp)
}

// ReportTiered records that tp's records below offset are in long-term
// storage or past retention, so the WAL copy is no longer needed for them.
// Until a mark is reported for a partition, only follower progress gates
// the deletion of its objects.
func (l *Leader) ReportTiered(tp metadata.TopicPartition, offset int64) {
	c := l.gc
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tiered[tp] = max(c.tiered[tp], offset)
}

// safeLocked reports whether a section ending at last is no longer needed.
func (c *collector) safeLocked(s sectionEnd) bool {
	if t, ok := c.tiered[s.tp]; ok && s.last >= t {
		return false
	}
	applied := c.applied[s.tp]
	for _, f := range c.l.cfg.Followers(s.tp) {
		if off, ok := applied[f]; !ok || s.last >= off {
			return false
		}
	}
	return true
}

// CollectGarbage deletes every tracked object whose sections are all safe
// to delete and returns how many it deleted. Deletes are idempotent, so a
// failed call is simply repeated; objects stay tracked until deleted.
func (l *Leader) CollectGarbage(ctx context.Context) (int, error) {
	c := l.gc
	c.mu.Lock()
	var refs []metadata.ObjectRef
	for ref, t := range c.objects {
		safe := true
		for _, s := range t.sections {
			if !c.safeLocked(s) {
				safe = false
				break
			}
		}
		if safe {
			refs = append(refs, ref)
		}
	}
	c.mu.Unlock()
	if len(refs) == 0 {
		return 0, nil
	}
	if err := l.mgr.Delete(ctx, refs); err != nil {
		return 0, err
	}
	c.mu.Lock()
	for _, ref := range refs {
		delete(c.objects, ref)
	}
	c.deleted += uint64(len(refs))
	c.mu.Unlock()
	return len(refs), nil
}

// MetadataLowMarks returns, per metadata partition this leader has
// published to, the lowest offset it still needs kept: the oldest message
// naming an object not yet collected, or else its latest epoch markers.
// The log may be trimmed below the minimum of every leader's mark (see
// TrimMetadata).
func (l *Leader) MetadataLowMarks() map[int32]int64 {
	c := l.gc
	c.mu.Lock()
	defer c.mu.Unlock()
	marks := make(map[int32]int64, len(c.markers))
	for p, off := range c.markers {
		marks[p] = off
	}
	for _, t := range c.objects {
		for p, off := range t.meta {
			if cur, ok := marks[p]; !ok || off < cur {
				marks[p] = off
			}
		}
	}
	return marks
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
// whose acknowledgement was lost, and objects of a previous incarnation of
// the broker. Choose age well above the longest a follower may lag.
func (l *Leader) Sweep(ctx context.Context, age time.Duration) (int, error) {
	local := l.cfg.Store.Local()
	infos, err := l.cfg.Store.List(ctx, local.Bucket, l.mgr.keyPrefix())
	if err != nil {
		return 0, fmt.Errorf("walstore: sweep: %w", err)
	}
	cutoff := l.cfg.Clock.Now().Add(-age)
	c := l.gc
	var refs []metadata.ObjectRef
	c.mu.Lock()
	for _, info := range infos {
		if _, ok := c.objects[info.Ref]; !ok && info.LastModified.Before(cutoff) {
			refs = append(refs, info.Ref)
		}
	}
	c.mu.Unlock()
	if err := l.mgr.Delete(ctx, refs); err != nil {
		return 0, err
	}
	return len(refs), nil
}
