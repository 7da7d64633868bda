package leadcore

import (
	"slices"
	"time"

	"github.com/activetier/activetier/metadata"
)

// Failure is a led partition whose replication a failure has stopped: its
// leadership cannot take it up (publishing its epoch markers, or the
// republish it owes its followers, keeps failing) or can never publish
// data it accepted. In Ready.Failures, an Err of nil says the partition
// recovered, or is no longer led.
type Failure struct {
	Partition metadata.TopicPartition
	// Since is when it began failing.
	Since time.Time
	// Err is the latest error; it names the dependency that failed.
	Err error
}

// fault records that tp's leadership ld is failing with err, from now if
// it was not already.
func (c *Core) fault(now time.Time, tp metadata.TopicPartition, ld *leadership, err error) {
	if ld.faultSince.IsZero() {
		ld.faultSince = now
		c.rd.HealthChanged = true
	}
	c.rd.Failures = append(c.rd.Failures, Failure{Partition: tp, Since: ld.faultSince, Err: err})
}

// unfault records that tp's leadership ld takes its partition up again,
// unless it can never publish what it accepted.
func (c *Core) unfault(tp metadata.TopicPartition, ld *leadership) {
	if ld.faultSince.IsZero() || ld.failed != nil {
		return
	}
	ld.faultSince = time.Time{}
	c.rd.HealthChanged = true
	c.rd.Failures = append(c.rd.Failures, Failure{Partition: tp})
}

// failChore records that t, the chore of a leadership, failed with err;
// a leadership that failed for good keeps reporting why.
func (c *Core) failChore(now time.Time, t *task, err error) {
	if ld := c.leading[t.tp]; ld != nil && (ld.chore == t || ld.catchup == t) && ld.failed == nil {
		ld.choreFault = true
		c.fault(now, t.tp, ld, err)
	}
}

// choreProgressed records that t, the chore or catch-up of a leadership, published
// what it owes (markers, or a republished chunk), or is done.
func (c *Core) choreProgressed(t *task) {
	if ld := c.leading[t.tp]; ld != nil && (ld.chore == t || ld.catchup == t) {
		ld.choreFault = false
		if !ld.progressFault {
			c.unfault(t.tp, ld)
		}
	}
}

// failLeadership records that tp's leadership ld can never publish some
// of the data it accepted: waits beyond its durable offset fail with err,
// and it stays failing until it ends.
func (c *Core) failLeadership(now time.Time, tp metadata.TopicPartition, ld *leadership, err error) {
	if ld.failed == nil {
		ld.failed = err
		c.fault(now, tp, ld, err)
	}
	c.rd.DurableChanged = true
}

// failedAttempt records a failed attempt of r: its error, a retry count,
// and the health it may change.
func (c *Core) failedAttempt(now time.Time, r *request, err error, kind Kind) {
	c.reqs[r.id] = r // still under way: it counts for health
	r.err, r.kind, r.backoff = err, kind, false
	switch r.what {
	case WhatPublish:
		c.stats.PublishRetries++
	default:
		c.stats.UploadRetries++
	}
	c.judgeHealth(now)
}

// succeeded records that r succeeded. Retries of the same kind waiting in
// their backoff go at once: the dependency answers again, and an operation
// asleep when it recovered would otherwise keep the engine degraded, or
// degrade it anew, after every other succeeded.
func (c *Core) succeeded(now time.Time, r *request) {
	var wake []uint64
	for id, o := range c.reqs {
		if o.what == r.what && o.backoff {
			wake = append(wake, id)
		}
	}
	slices.Sort(wake) // in request order, as they were made
	for _, id := range wake {
		o := c.reqs[id]
		o.backoff, o.tried = false, now
		c.rd.Retries = append(c.rd.Retries, Retry{ID: id, At: now})
	}
	c.judgeHealth(now)
}

// judgeHealth recomputes the health at now. The engine is degraded while
// some upload or publish has gone DegradedAfter without succeeding: data
// that cannot be uploaded, or uploaded data followers cannot learn of,
// both mean the broker should replicate the ordinary way. A store that
// refuses for good will not answer otherwise later: the broker hears of
// it at once, and why.
func (c *Core) judgeHealth(now time.Time) {
	var oldest *request
	older := func(a, b *request) bool { return a.start.Before(b.start) || a.start.Equal(b.start) && a.id < b.id }
	for _, r := range c.reqs {
		if !r.health {
			continue
		}
		switch {
		case oldest == nil:
			oldest = r
		case (r.kind == Permanent) != (oldest.kind == Permanent):
			if r.kind == Permanent {
				oldest = r
			}
		case older(r, oldest):
			oldest = r
		}
	}
	before := c.health.Degraded
	c.health, c.healthDue = Health{}, time.Time{}
	switch {
	case oldest != nil && (now.Sub(oldest.start) >= c.cfg.DegradedAfter || oldest.kind == Permanent):
		c.health = Health{Degraded: true, Since: oldest.start, Err: oldest.err}
		if oldest.err == nil {
			c.health.Err = c.cfg.NoAnswer(oldest.what, now.Sub(oldest.start))
		}
	case oldest != nil:
		// Look again when the oldest may cross DegradedAfter.
		c.healthDue = oldest.start.Add(c.cfg.DegradedAfter)
	}
	if c.health.Degraded != before {
		c.rd.HealthChanged = true
	}
}
