package leadcore

import (
	"slices"
	"time"
)

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
