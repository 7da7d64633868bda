package leadcore

import (
	"time"

	"github.com/activetier/activetier/metadata"
)

// A caller that waits for an offset to become durable or replicated waits
// for the cut that carries it: up to Interval, and then an upload. With
// Config.WaitCutDelay the driver tells the core when such a wait starts
// (Wait) and when it is given up (Unwait); while one waits on records still
// in the active builder, the core cuts it by WaitCutDelay after the wait
// began, so that the acknowledgement costs about one upload. The waits that
// fall in one WaitCutDelay share the cut, whatever partitions they are on.

// cutMark is how far a leadership's records have been handed out for
// encoding: every offset of leadership gen below end is in a cut.
type cutMark struct {
	gen uint64
	end int64
}

// flushState is the waits the active builder owes a prompt cut.
type flushState struct {
	// waits maps each wait on records of the active builder to when its
	// cut is due; a cut empties it, as the records it waited on are cut.
	waits map[uint64]time.Time
	// due is the earliest of waits, zero with none.
	due  time.Time
	seq  uint64
	cuts map[metadata.TopicPartition]cutMark
}

// Wait tells the core that a caller, from now, waits for tp's offset to
// become durable or replicated. It returns the wait's id, to give Unwait
// when the caller stops waiting, or zero if the wait asks nothing of the
// cut: WaitCutDelay is zero, tp is not led, the offset is not appended
// yet, or it is already cut (its object is on its way). The driver calls
// Wait again for an offset that was not appended when it last asked.
func (c *Core) Wait(now time.Time, tp metadata.TopicPartition, offset int64) uint64 {
	ld := c.leading[tp]
	if c.cfg.WaitCutDelay == 0 || ld == nil || offset >= ld.next {
		return 0
	}
	if gen, ok := c.active.gens[tp]; !ok || gen != ld.gen {
		return 0 // nothing of this leadership waits to be cut
	}
	if m, ok := c.flush.cuts[tp]; ok && m.gen == ld.gen && offset < m.end {
		return 0
	}
	if c.flush.waits == nil {
		c.flush.waits = make(map[uint64]time.Time)
		c.flush.cuts = make(map[metadata.TopicPartition]cutMark)
	}
	c.flush.seq++
	at := now.Add(c.cfg.WaitCutDelay)
	c.flush.waits[c.flush.seq] = at
	if c.flush.due.IsZero() || at.Before(c.flush.due) {
		c.flush.due = at
	}
	c.maybeCut(now)
	return c.flush.seq
}

// Unwait ends wait id: its caller stopped waiting (it was answered, failed,
// or its context ended). A wait whose records were cut since is already
// forgotten; nothing else waiting, the active builder is cut at Interval
// again.
func (c *Core) Unwait(now time.Time, id uint64) {
	if _, ok := c.flush.waits[id]; !ok {
		return
	}
	delete(c.flush.waits, id)
	c.flush.due = time.Time{}
	for _, at := range c.flush.waits { // the earliest: order does not matter
		if c.flush.due.IsZero() || at.Before(c.flush.due) {
			c.flush.due = at
		}
	}
	c.maybeCut(now)
}

// flushDue reports whether a wait makes the active builder due at now.
func (c *Core) flushDue(now time.Time) bool {
	return !c.flush.due.IsZero() && !now.Before(c.flush.due) && c.active.b.Stats().Batches > 0
}

// flushCut records that s, the active builder, was handed out for
// encoding: the waits on it are answered by this cut, and its
// leaderships' records up to their next offset are cut.
func (c *Core) flushCut(s *slot) {
	if c.cfg.WaitCutDelay == 0 {
		return
	}
	clear(c.flush.waits)
	c.flush.due = time.Time{}
	if c.flush.cuts == nil {
		c.flush.cuts = make(map[metadata.TopicPartition]cutMark)
	}
	for tp, gen := range s.gens {
		if ld := c.leading[tp]; ld != nil && ld.gen == gen {
			c.flush.cuts[tp] = cutMark{gen: gen, end: ld.next}
		} else {
			delete(c.flush.cuts, tp)
		}
	}
}
