package leadcore

import (
	"math"
	"slices"
	"time"

	"github.com/activetier/activetier/metadata"
)

// Catching followers up. A follower that restarts behind what the store
// still holds, or that joins the follower set, may find no entry that
// continues its log: the objects it needs were collected while it was
// away, or their entries were routed to the metadata partitions of the
// followers of the time, not to its own. The leader knows where each
// follower's log ends from its progress, and for each follower from
// where on this leadership's entries reach it: routed to its metadata
// partition and kept until it applies them. A follower whose log ends
// below that is a laggard, and the leader republishes for it, from its
// log end, without the broker having to notice.
//
// At most one such republish is under way per partition, covering every
// laggard: from the lowest log end to the highest offset from which the
// laggards are reached. A laggard that reports while it runs and that it
// covers causes nothing; one below it moves its start down if it has
// published nothing yet, and is served when it ends otherwise. Its
// objects are tracked like any other, so garbage collection keeps them
// until every follower applied them. Each holds at most ObjectBytes of
// the log read and not yet stored, and at most BufferBytes/ObjectBytes
// run at once over all partitions: a broker put back into thousands of
// partitions' replicas takes them in turn, first come first served.

// replica is what a leadership knows of one of its followers.
type replica struct {
	// pos is where the follower's log goes on, as its last report was
	// judged (after the truncation the report shows it must make); -1
	// until a report could be judged.
	pos int64
	// reach: every entry this leadership publishes at or above it
	// reaches the follower. Entries below it may not: published before
	// it joined, or collected.
	reach int64
	// caughtUpAt is when the follower last held everything this
	// leadership had published, as of its report or the one before
	// (Kafka's lastCaughtUpTime); prevAt and prevDurable are the time
	// and durable offset of its last report.
	caughtUpAt, prevAt time.Time
	prevDurable        int64
	// gone: it is not a follower now; it left when routed was left. A
	// follower that comes back before anything more was routed (the
	// placement flapped) is reached as it was.
	gone bool
	left int64
}

// newReplicas returns the replicas of a leadership of followers, each
// reached from reach.
func newReplicas(followers []int32, reach int64) map[int32]*replica {
	rs := make(map[int32]*replica, len(followers))
	for _, f := range followers {
		rs[f] = &replica{pos: -1, reach: reach}
	}
	return rs
}

// replicasChanged updates ld's replicas for a new follower set. One that
// joins is reached only by what is routed from now on, unless it was a
// follower until nothing more was routed; one that leaves is set aside,
// and a republish under way no longer counts for it. Either way what it
// reported no longer counts: the broker may have deleted its log.
func (c *Core) replicasChanged(ld *leadership, followers []int32) {
	hi := max(ld.routed, ld.durable)
	for f, r := range ld.replicas {
		if !r.gone && !slices.Contains(followers, f) {
			r.gone, r.left, r.pos = true, ld.routed, -1
		}
	}
	for _, f := range followers {
		switch r := ld.replicas[f]; {
		case r == nil:
			ld.replicas[f] = &replica{pos: -1, reach: hi}
		case r.gone:
			r.gone = false
			if r.left != ld.routed {
				r.reach = max(r.reach, hi)
			}
		}
	}
	gone := func(f int32) bool { return ld.replicas[f].gone }
	for _, t := range ld.duties() {
		if t != nil {
			t.audience = slices.DeleteFunc(t.audience, gone)
		}
	}
	for _, t := range c.tasks {
		if t.gen == ld.gen {
			t.audience = slices.DeleteFunc(t.audience, gone)
		}
	}
}

// reported records follower's progress in ld: its log goes on at pos,
// and it holds credit of this leadership's log.
func (c *Core) reported(now time.Time, tp metadata.TopicPartition, ld *leadership, follower int32, pos, credit int64) {
	r := ld.replicas[follower]
	if r == nil || r.gone {
		return
	}
	r.pos = pos
	switch {
	case credit >= ld.durable:
		r.caughtUpAt = now
	case !r.prevAt.IsZero() && credit >= r.prevDurable:
		r.caughtUpAt = r.prevAt
	}
	r.prevAt, r.prevDurable = now, ld.durable
	if pos >= 0 && pos < r.reach {
		c.catchUp(now, tp, ld)
	}
}

// unjudged records that follower's last report could not be judged: it
// must truncate first, and only its next report says where it goes on.
func (ld *leadership) unjudged(follower int32) {
	if r := ld.replicas[follower]; r != nil && !r.gone {
		r.pos = -1
	}
}

// collected records that tp's section ending at last, of leadership gen,
// is deleted: no follower is reached below its end any more.
func (c *Core) collected(tp metadata.TopicPartition, gen uint64, last int64) {
	if ld := c.leading[tp]; ld != nil && ld.gen == gen {
		// A republish under way counts on nothing collected meanwhile at
		// or above its start: that may be its own copies.
		note := func(t *task) {
			if t != nil && t.gen == gen && t.republish && last >= t.start {
				t.collectedTo = max(t.collectedTo, last+1)
			}
		}
		for _, t := range ld.duties() {
			note(t)
		}
		for _, t := range c.tasks {
			note(t)
		}
		for _, r := range ld.replicas {
			r.reach = max(r.reach, last+1)
		}
	}
}

// catchUp starts, widens or leaves the republish for tp's laggards.
func (c *Core) catchUp(now time.Time, tp metadata.TopicPartition, ld *leadership) {
	if c.cfg.SkipCatchUp {
		return
	}
	from, to := int64(math.MaxInt64), int64(-1)
	for _, f := range c.followers[tp] { // sorted: the same events, the same requests
		if r := ld.replicas[f]; r != nil && !r.gone && r.pos >= 0 && r.pos < r.reach {
			from, to = min(from, r.pos), max(to, r.reach)
		}
	}
	if to < 0 {
		return
	}
	if t := ld.chore; t != nil && t.republish {
		return // one republish at a time: the laggards are judged again when it ends
	}
	t := ld.catchup
	if t == nil {
		if c.catchingUp >= max(1, c.cfg.BufferBytes/c.cfg.ObjectBytes) {
			if !ld.catchupQueued {
				ld.catchupQueued = true
				c.catchupQueue = append(c.catchupQueue, tp)
			}
			return
		}
		c.catchingUp++
		ld.catchup = &task{kind: catchup, tp: tp, gen: ld.gen, epoch: ld.epoch, markers: true,
			from: from, start: from, to: to, republish: true, audience: slices.Clone(c.followers[tp])}
		c.cfg.Logger.Info("activetier: republishing for followers that nothing continues", "partition", tp.String(), "from", from, "to", to)
		c.advance(now, ld.catchup)
		return
	}
	if to > t.to {
		t.to = to
		if t.haveEnd && t.to > t.logEnd {
			t.haveEnd = false // the log grew since: its end is read again before the next chunk
		} else if t.haveEnd {
			t.end = t.to
		}
	}
	if from >= t.start || t.published || t.entries != nil {
		return // covered, or served once it ends
	}
	// Nothing published yet: start lower, rather than read it all again
	// for the lower laggard afterwards.
	t.from, t.start, t.infos = from, from, nil
	if t.req != 0 && !t.markers {
		c.cancel(t.req)
		t.req = 0
		c.advance(now, t)
	}
}

// caughtUpDone takes ld's catch-up off, stopping it if stop (it is not
// done), and gives its turn to the partitions waiting for one.
func (c *Core) caughtUpDone(now time.Time, ld *leadership, stop bool) {
	if stop {
		c.stopTask(ld.catchup)
	}
	ld.catchup = nil
	c.catchingUp--
	for len(c.catchupQueue) > 0 && c.catchingUp < max(1, c.cfg.BufferBytes/c.cfg.ObjectBytes) {
		tp := c.catchupQueue[0]
		c.catchupQueue = c.catchupQueue[1:]
		if next := c.leading[tp]; next != nil && next.catchupQueued {
			next.catchupQueued = false
			c.catchUp(now, tp, next)
		}
	}
}

// reached lowers, once republish t has published [t.start, t.end), the
// reach of each follower it was published to that it joins up with; but
// not below what was collected while it ran (a long republish's first
// copies may be applied and collected before it ends), which no longer
// reaches anyone.
func (c *Core) reached(t *task, ld *leadership) {
	floor := max(t.start, t.collectedTo)
	for _, f := range t.audience {
		if r := ld.replicas[f]; r != nil && !r.gone && r.reach <= t.end {
			r.reach = min(r.reach, floor)
		}
	}
}

// ReplicaState is a follower of a partition as its leader sees it.
type ReplicaState struct {
	Broker int32
	// EndOffset is the follower's log end as credited in this
	// leadership: it holds the leader's log below it. -1 until it
	// reported in this leadership.
	EndOffset int64
	// CaughtUp: Kafka's rule for joining the in-sync set.
	CaughtUp bool
	// InSync: the high watermark waits for it.
	InSync bool
	// LastCaughtUp is when it last held everything the leadership had
	// published; zero if never.
	LastCaughtUp time.Time
}

// Replicas returns tp's followers as this leadership sees them, in
// broker order; ok is false if the engine does not lead tp. A follower is
// caught up once its credited log end reaches the high watermark and the
// current epoch's start offset (Kafka's rule for joining the ISR).
func (c *Core) Replicas(tp metadata.TopicPartition) (rs []ReplicaState, ok bool) {
	ld := c.leading[tp]
	if ld == nil {
		return nil, false
	}
	var applied map[int32]int64
	if p := c.gc.applied[tp]; p != nil && p.gen == ld.gen {
		applied = p.applied
	}
	for _, f := range c.followers[tp] {
		s := ReplicaState{Broker: f, EndOffset: -1, InSync: slices.Contains(ld.commit.inSync, f)}
		if off, ok := applied[f]; ok {
			s.EndOffset = off
			s.CaughtUp = off >= ld.commit.hw && off >= ld.epochStart
		}
		if r := ld.replicas[f]; r != nil {
			s.LastCaughtUp = r.caughtUpAt
		}
		rs = append(rs, s)
	}
	return rs, true
}
