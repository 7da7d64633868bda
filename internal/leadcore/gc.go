package leadcore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
)

// collector decides garbage collection. It tracks, for every object this
// leader published, the last offset of each partition section, and lets
// an object go once every section is below what all the partition's
// followers have applied and below the broker's tiered mark. Because each
// leader collects only its own objects, no coordination is needed; objects
// of a previous incarnation are found by Sweep.
type collector struct {
	objects map[metadata.ObjectRef]*tracked
	applied map[metadata.TopicPartition]*progress // of the current leadership
	tiered  map[metadata.TopicPartition]int64
	markers map[int32]int64 // metadata partition -> offset of the latest marker message there
	deleted uint64
}

type tracked struct {
	published time.Time // when its entries were published
	sections  []sectionEnd
	meta      map[int32]int64 // metadata partition -> offset of the message naming the object
}

type sectionEnd struct {
	tp        metadata.TopicPartition
	last      int64
	followers []int32 // when the object was cut
	gen       uint64  // the leadership that published it
}

// progress is what the followers of one leadership reported applied.
type progress struct {
	gen     uint64 // 0 once the leadership ended
	applied map[int32]int64
}

func newCollector() collector {
	return collector{
		objects: make(map[metadata.ObjectRef]*tracked),
		applied: make(map[metadata.TopicPartition]*progress),
		tiered:  make(map[metadata.TopicPartition]int64),
		markers: make(map[int32]int64),
	}
}

func (g *collector) track(now time.Time, ref metadata.ObjectRef, sections []combiner.SectionInfo, followers [][]int32, gens []uint64, meta map[int32]int64) {
	t := &tracked{published: now, meta: meta, sections: make([]sectionEnd, len(sections))}
	for i, s := range sections {
		t.sections[i] = sectionEnd{tp: s.Partition, last: s.LastOffset, followers: followers[i], gen: gens[i]}
	}
	g.objects[ref] = t
}

func (g *collector) trackMarkers(meta map[int32]int64) {
	for p, off := range meta {
		g.markers[p] = max(g.markers[p], off)
	}
}

// newLeadership starts afresh what followers reported applied of tp: at a
// new leadership those reports describe their logs against an earlier
// log, which this leadership's may have truncated, and only fresh reports
// can vouch for this leadership's objects.
func (g *collector) newLeadership(tp metadata.TopicPartition, gen uint64) {
	g.applied[tp] = &progress{gen: gen, applied: make(map[int32]int64)}
}

// followersChanged forgets the progress of followers that join tp's
// follower set, and caps every follower's at republishFrom if it is not
// negative: what the broker says some follower lacks.
func (g *collector) followersChanged(tp metadata.TopicPartition, before, after []int32, republishFrom int64) {
	p := g.applied[tp]
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
func (g *collector) endLeadership(tp metadata.TopicPartition) {
	if p := g.applied[tp]; p != nil {
		p.gen = 0
	}
}

// progress records that follower holds tp's log below credit: its latest
// report, which may be lower than the last (it lost its log).
func (g *collector) progress(tp metadata.TopicPartition, gen uint64, follower int32, credit int64) {
	if p := g.applied[tp]; p != nil && p.gen == gen {
		p.applied[follower] = credit
	}
}

// withdraw forgets what follower reported applied of tp: it must truncate
// first, to an offset not yet known.
func (g *collector) withdraw(tp metadata.TopicPartition, gen uint64, follower int32) {
	if p := g.applied[tp]; p != nil && p.gen == gen {
		delete(p.applied, follower)
	}
}

// safe reports whether a section ending at last is no longer needed:
// below the tiered mark, and applied by every follower the partition had
// when the object was cut and has now (a placement that changes, or
// briefly names nobody, must not make a section look applied by all).
func (g *collector) safe(s sectionEnd, now []int32) bool {
	if t, ok := g.tiered[s.tp]; ok && s.last >= t {
		return false
	}
	var applied map[int32]int64
	if p := g.applied[s.tp]; p != nil {
		applied = p.applied
	}
	for _, set := range [][]int32{s.followers, now} {
		for _, f := range set {
			if off, ok := applied[f]; !ok || s.last >= off {
				return false
			}
		}
	}
	return true
}

// prune forgets the progress and tiered marks of partitions this engine no
// longer leads and no tracked object holds, so that a broker that leads
// ever more partitions over its life (topics come and go) does not keep
// something for each of them.
func (g *collector) prune() {
	held := make(map[metadata.TopicPartition]bool)
	for _, t := range g.objects {
		for _, s := range t.sections {
			held[s.tp] = true
		}
	}
	for tp, p := range g.applied {
		if p.gen == 0 && !held[tp] {
			delete(g.applied, tp)
		}
	}
	for tp := range g.tiered {
		if p := g.applied[tp]; (p == nil || p.gen == 0) && !held[tp] {
			delete(g.tiered, tp)
		}
	}
}

// collect returns, in order, the tracked objects published at least
// RetainFor before now whose sections are all safe to delete. They stay
// tracked until forget.
func (c *Core) collect(now time.Time) []metadata.ObjectRef {
	var refs []metadata.ObjectRef
	keepAfter := now.Add(-c.cfg.RetainFor)
	for ref, t := range c.gc.objects {
		if t.published.After(keepAfter) {
			continue
		}
		if !slices.ContainsFunc(t.sections, func(s sectionEnd) bool { return !c.gc.safe(s, c.followers[s.tp]) }) {
			refs = append(refs, ref)
		}
	}
	c.gc.prune()
	slices.SortFunc(refs, compareRefs)
	return refs
}

// forget stops tracking refs, which are deleted; collected says they were
// collected (counted) rather than swept.
func (c *Core) forget(refs []metadata.ObjectRef, collected bool) {
	for _, ref := range refs {
		c.mayBeGone(ref)
		delete(c.gc.objects, ref)
	}
	if collected {
		c.gc.deleted += uint64(len(refs))
	}
}

// mayBeGone records that tracked object ref may be deleted: no follower
// is counted on to find its sections any more.
func (c *Core) mayBeGone(ref metadata.ObjectRef) {
	if t := c.gc.objects[ref]; t != nil {
		for _, s := range t.sections {
			c.collected(s.tp, s.gen, s.last)
		}
	}
}

// collectDue hands out the periodic collection's deletes, unless the last
// one is still under way.
func (c *Core) collectDue(now time.Time) {
	if c.gcDelete != 0 {
		return
	}
	if refs := c.collect(now); len(refs) > 0 {
		c.gcDelete = c.deleteFor(now, 0, refs, true, nil)
	}
}

// CollectGarbage is the broker's call to collect garbage now, named call
// by the driver (any id of its own, not zero): the objects the periodic
// collection would delete now go in one Delete, which names call, and
// Ready.Calls tells of the call's end once the Delete is answered, at once
// if there is nothing to delete. It does not wait for a periodic Delete
// under way, which may name some of the same objects: deletes are
// idempotent.
func (c *Core) CollectGarbage(now time.Time, call uint64) {
	c.deleteFor(now, call, c.collect(now), true, nil)
}

// Sweep is the broker's call to sweep, named call by the driver as
// CollectGarbage is: of listed, what a listing of bucket under prefix
// returned, the objects older than cutoff that no leadership still needs
// (see sweepable) go in one Delete that names call, and Ready.Calls tells
// of the call's end once it is answered. Listed objects outside bucket
// and prefix (a store that breaks the List contract) are left alone, and
// the call ends with a violation of ObjectStore.List's contract, unless
// its Delete fails.
func (c *Core) Sweep(now time.Time, call uint64, listed []Listed, cutoff time.Time, bucket, prefix string) {
	refs, foreign := c.sweepable(listed, cutoff, bucket, prefix)
	var err error
	if foreign > 0 {
		err = c.cfg.Violation("ObjectStore.List", fmt.Sprintf("%d objects outside bucket %s and prefix %q; left alone", foreign, bucket, prefix))
	}
	c.deleteFor(now, call, refs, false, err)
}

// deleteFor hands out a Delete of refs for call (zero: the periodic
// collection) and returns its id; collected says whether they are
// counted as collected once deleted, and err is the call's error if the
// Delete succeeds. A call with nothing to delete ends at once, and 0 is
// returned.
func (c *Core) deleteFor(now time.Time, call uint64, refs []metadata.ObjectRef, collected bool, err error) uint64 {
	if len(refs) == 0 {
		c.rd.Calls = append(c.rd.Calls, CallDone{Call: call, Err: err})
		return 0
	}
	r := c.newRequest(now, whatDelete)
	r.refs, r.call, r.collected, r.callErr = refs, call, collected, err
	c.rd.Deletes = append(c.rd.Deletes, Delete{ID: r.id, Refs: refs, Call: call})
	return r.id
}

// Deleted is the result of Delete id.
func (c *Core) Deleted(now time.Time, id uint64, err error) {
	r := c.take(id)
	if r == nil {
		return
	}
	if id == c.gcDelete {
		c.gcDelete = 0
	}
	if r.call != 0 {
		done := CallDone{Call: r.call, Err: err}
		if err == nil {
			done.Deleted, done.Err = len(r.refs), r.callErr
		}
		c.rd.Calls = append(c.rd.Calls, done)
	}
	if err != nil {
		// A DELETE that failed may still have deleted some of its objects
		// (its answer lost, a batch half done): they stay tracked, to be
		// deleted again, but no follower is counted on to find them, so
		// one that comes back below them is republished for.
		c.cfg.Logger.Warn("activetier: garbage collection failed", "err", err)
		for _, ref := range r.refs {
			c.mayBeGone(ref)
		}
		return
	}
	c.forget(r.refs, r.collected)
}

// Listed is one object a store listing returned.
type Listed struct {
	Ref          metadata.ObjectRef
	LastModified time.Time
}

// sweepable returns, of the objects a listing of bucket under prefix
// returned, those older than cutoff that no leadership still needs:
// untracked (an upload whose acknowledgement was lost, a hedge's losing
// copy, or a previous incarnation's), or abandoned. An object a live
// leadership still means to publish is never among them, however old
// (see unpublished), nor is one stored since the oldest upload attempt
// still in flight began, which that attempt may yet report. foreign
// counts objects outside bucket and prefix (a store that breaks the List
// contract), which are never swept.
func (c *Core) sweepable(listed []Listed, cutoff time.Time, bucket, prefix string) (refs []metadata.ObjectRef, foreign int) {
	keep := c.unpublished()
	if at, ok := c.oldestAttempt(); ok && at.Before(cutoff) {
		cutoff = at
	}
	if c.cfg.SweepUnpublished {
		keep = nil
	}
	for _, o := range listed {
		if o.Ref.Bucket != bucket || !strings.HasPrefix(o.Ref.Key, prefix) {
			foreign++
			continue
		}
		if !o.LastModified.Before(cutoff) || keep[o.Ref] {
			continue
		}
		if t, ok := c.gc.objects[o.Ref]; !ok || c.abandoned(t) {
			refs = append(refs, o.Ref)
		}
	}
	return refs, foreign
}

// abandoned reports whether every section of t still needed belongs to a
// partition this engine no longer leads: its followers are now served by
// the partition's new leader, which republishes what they lack.
func (c *Core) abandoned(t *tracked) bool {
	for _, s := range t.sections {
		if p := c.gc.applied[s.tp]; !c.gc.safe(s, c.followers[s.tp]) && p != nil && p.gen != 0 {
			return false
		}
	}
	return true
}

// LowMarks returns, per metadata partition this leader has published to,
// the lowest offset it still needs kept: the oldest message naming an
// object not yet collected, or else its latest epoch markers.
func (c *Core) LowMarks() map[int32]int64 {
	marks := make(map[int32]int64, len(c.gc.markers))
	for p, off := range c.gc.markers {
		marks[p] = off
	}
	for _, t := range c.gc.objects {
		for p, off := range t.meta {
			if cur, ok := marks[p]; !ok || off < cur {
				marks[p] = off
			}
		}
	}
	return marks
}

func compareRefs(a, b metadata.ObjectRef) int {
	if c := strings.Compare(a.Bucket, b.Bucket); c != 0 {
		return c
	}
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return strings.Compare(a.AZ, b.AZ)
}
