package walstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
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
	applied map[metadata.TopicPartition]*progress // of the current leadership
	tiered  map[metadata.TopicPartition]int64
	markers map[int32]int64 // metadata partition -> offset of the latest marker message there
	deleted uint64
}

type tracked struct {
	sections []sectionEnd
	meta     map[int32]int64 // metadata partition -> offset of the message naming the object
}

type sectionEnd struct {
	tp        metadata.TopicPartition
	last      int64
	followers []int32 // when the object was cut
}

// progress is what the followers of one leadership reported applied.
type progress struct {
	gen     uint64
	applied map[int32]int64
}

func newCollector(l *Leader) *collector {
	return &collector{
		l:       l,
		objects: make(map[metadata.ObjectRef]*tracked),
		applied: make(map[metadata.TopicPartition]*progress),
		tiered:  make(map[metadata.TopicPartition]int64),
		markers: make(map[int32]int64),
	}
}

func (c *collector) track(ref metadata.ObjectRef, sections []combiner.SectionInfo, followers [][]int32, meta map[int32]int64) {
	t := &tracked{meta: meta, sections: make([]sectionEnd, len(sections))}
	for i, s := range sections {
		t.sections[i] = sectionEnd{tp: s.Partition, last: s.LastOffset, followers: followers[i]}
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

// RecordProgress records that a follower has applied a partition up to,
// not including, p.EndOffset (its log end offset), and that the last
// record it holds has epoch p.LastEpoch: what Kafka's fetch request
// carries. The broker
// relays it from the follower; the engine judges it as Kafka's leader
// does. A follower whose last epoch is not one of this leader's log, or
// whose log runs past the end of that epoch here, may still truncate: only
// what it holds of this leader's log counts, and garbage collection never
// deletes what it may still need; nor is a follower credited past the end
// of what was appended here. Reports for a partition this engine does
// not lead, from an earlier leadership, or with negative values are
// ignored, and reports are forgotten when a new leadership begins.
func (l *Leader) RecordProgress(p Progress) {
	tp, follower, endOffset, lastEpoch := p.Partition, p.Follower, p.EndOffset, p.LastEpoch
	if follower < 0 || follower == l.cfg.BrokerID || endOffset < 0 || lastEpoch < 0 {
		return
	}
	l.mu.Lock()
	ld := l.leading[tp]
	var epoch int32
	var gen uint64
	var end int64
	if ld != nil {
		epoch, gen, end = ld.epoch, ld.gen, max(ld.next, ld.durable)
	}
	l.mu.Unlock()
	if ld == nil || lastEpoch > epoch {
		return
	}
	// No follower holds more than the leader's log: a report past its
	// end is not believed beyond it, or one such report would make every
	// later object look applied by that follower.
	credit := min(endOffset, end)
	if lastEpoch < epoch {
		epochs, err := l.cfg.Local.Epochs(tp)
		if err != nil {
			l.cfg.Logger.Warn("activetier: cannot judge a follower's progress", "partition", tp.String(), "err", &DependencyError{Dependency: "LocalLog.Epochs", Err: err})
			return
		}
		lin, err := fencing.NewLineage(epochs...)
		if err != nil {
			return
		}
		e, end := lin.EndOffsetFor(lastEpoch, math.MaxInt64)
		if e != lastEpoch {
			return // the follower's last epoch is not in this log
		}
		credit = min(credit, end)
	}
	c := l.gc
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := c.applied[tp]
	if pr == nil || pr.gen != gen {
		return
	}
	pr.applied[follower] = max(pr.applied[follower], credit)
}

// newLeadership starts afresh what followers reported applied of tp: at a
// new leadership those reports describe their logs against an earlier
// log, which this leadership's may have truncated, and only fresh reports
// can vouch for this leadership's objects.
func (c *collector) newLeadership(tp metadata.TopicPartition, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applied[tp] = &progress{gen: gen, applied: make(map[int32]int64)}
}

// followersChanged forgets the progress of followers that join tp's
// follower set, and caps every follower's at republishFrom if it is not
// negative: what the broker says some follower lacks.
func (c *collector) followersChanged(tp metadata.TopicPartition, before, after []int32, republishFrom int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.applied[tp]
	if p == nil {
		return
	}
	for _, f := range after {
		if !slices.Contains(before, f) {
			delete(p.applied, f)
		}
	}
	if republishFrom >= 0 {
		for f, off := range p.applied {
			p.applied[f] = min(off, republishFrom)
		}
	}
}

// endLeadership freezes what followers reported applied of tp: no new
// report is taken, sections all followers had applied are still
// collected, and Sweep removes the rest once they are old enough.
func (c *collector) endLeadership(tp metadata.TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.applied[tp]; p != nil {
		p.gen = 0
	}
}

// ReportTiered records that tp's records below offset are in long-term
// storage or past retention, so the WAL copy is no longer needed for them.
// Until a mark is reported for a partition, only follower progress gates
// the deletion of its objects.
func (l *Leader) ReportTiered(tp metadata.TopicPartition, offset int64) {
	if offset < 0 {
		return // no offset is below it: nothing to say
	}
	c := l.gc
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tiered[tp] = max(c.tiered[tp], offset)
}

// safeLocked reports whether a section ending at last is no longer needed:
// below the tiered mark, and applied by every follower the partition had
// when the object was cut and has now (a placement that changes, or
// briefly names nobody, must not make a section look applied by all).
func (c *collector) safeLocked(s sectionEnd) bool {
	if t, ok := c.tiered[s.tp]; ok && s.last >= t {
		return false
	}
	var applied map[int32]int64
	if p := c.applied[s.tp]; p != nil {
		applied = p.applied
	}
	for _, set := range [][]int32{s.followers, c.l.followersOf(s.tp)} {
		for _, f := range set {
			if off, ok := applied[f]; !ok || s.last >= off {
				return false
			}
		}
	}
	return true
}

// pruneLocked forgets the progress and tiered marks of partitions this
// engine no longer leads and no tracked object holds, so that a broker that
// leads ever more partitions over its life (topics come and go) does not
// keep something for each of them.
func (c *collector) pruneLocked() {
	held := make(map[metadata.TopicPartition]bool)
	for _, t := range c.objects {
		for _, s := range t.sections {
			held[s.tp] = true
		}
	}
	for tp, p := range c.applied {
		if p.gen == 0 && !held[tp] {
			delete(c.applied, tp)
		}
	}
	for tp := range c.tiered {
		if p := c.applied[tp]; (p == nil || p.gen == 0) && !held[tp] {
			delete(c.tiered, tp)
		}
	}
}

// abandonedLocked reports whether every section of t still needed belongs
// to a partition this engine no longer leads: its followers are now served
// by the partition's new leader, which republishes what they lack.
func (c *collector) abandonedLocked(t *tracked) bool {
	for _, s := range t.sections {
		if p := c.applied[s.tp]; !c.safeLocked(s) && p != nil && p.gen != 0 {
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
	c.pruneLocked()
	c.mu.Unlock()
	if len(refs) == 0 {
		return 0, nil
	}
	if err := l.mgr.Delete(ctx, refs); err != nil {
		return 0, fmt.Errorf("walstore: collecting garbage: %w", &DependencyError{Dependency: "ObjectStore.Delete", Err: err})
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
	cutoff := l.cfg.Clock.Now().Add(-age)
	c := l.gc
	var refs []metadata.ObjectRef
	foreign := 0
	c.mu.Lock()
	for _, info := range infos {
		if info.Ref.Bucket != local.Bucket || !strings.HasPrefix(info.Ref.Key, prefix) {
			// Not what was asked for (a store that breaks the List
			// contract): whatever it is, it is not this broker's.
			foreign++
			continue
		}
		if !info.LastModified.Before(cutoff) {
			continue
		}
		if t, ok := c.objects[info.Ref]; !ok || c.abandonedLocked(t) {
			refs = append(refs, info.Ref)
		}
	}
	c.mu.Unlock()
	if err := l.mgr.Delete(ctx, refs); err != nil {
		return 0, fmt.Errorf("walstore: sweep: %w", &DependencyError{Dependency: "ObjectStore.Delete", Err: err})
	}
	c.mu.Lock()
	for _, ref := range refs {
		delete(c.objects, ref)
	}
	c.mu.Unlock()
	if foreign > 0 {
		return len(refs), fmt.Errorf("walstore: sweep: %w", &DependencyError{Dependency: "ObjectStore.List",
			Err: fmt.Errorf("%w: %d objects outside bucket %s and prefix %q; left alone", ErrContractViolation, foreign, local.Bucket, prefix)})
	}
	return len(refs), nil
}
