package followcore

import (
	"cmp"
	"slices"
	"time"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
)

// Ready returns what the core wants done and what it has to tell,
// gathered since the last Advance, and when it wants a Tick. It changes
// nothing: the events did the work (step), so that two calls give the
// same Ready.
//
// The slices of a Ready stay valid through its Advance, until the
// Advance after, which reuses their arrays: a driver calls Advance as
// soon as it has taken the Ready, performs it, feeding the answers to the
// core as they come, and copies what it keeps longer.
func (c *Core) Ready() Ready {
	rd := c.out
	rd.WakeAt = c.nextWake()
	return rd
}

// HasReady reports whether Ready holds anything new: requests, news, or
// a WakeAt other than the one Advance last acknowledged.
func (c *Core) HasReady() bool {
	return !c.out.Empty() || !c.nextWake().Equal(c.lastWake)
}

// Advance acknowledges the Ready last returned: its requests are the
// driver's to perform, and the next Ready holds only what the events
// after it bring. The driver takes no event between Ready and Advance:
// what such an event added would be acknowledged unseen.
func (c *Core) Advance() {
	c.lastWake = c.nextWake()
	rd := c.out
	c.out = c.handed.emptied()
	c.handed = rd
}

// step does all the work the core's state allows at the time of the
// event that ends with it, leaving its requests in c.out: it drops and
// skips entries fencing rules out, truncates diverged logs, appends
// fetched entries in offset order, starts fetches for the entries that
// come next, and hedges fetches that are slow. Every event ends with a
// step, so that a Ready is what the events decided.
func (c *Core) step() {
	c.timers.due(c.now, func(t timer) {
		if t.p.timerAt.Equal(t.at) {
			t.p.timerAt = time.Time{}
		}
		c.touch(t.p)
	})
	c.hedge()
	want := c.want[:0]
	visit := c.dirty
	c.dirty = c.visited[:0]
	for _, p := range visit {
		p.dirty = false
		if p.gone {
			continue
		}
		want = c.visit(p, want)
		c.Held += len(p.held) - p.counted
		p.counted = len(p.held)
	}
	// Cleared, so that an unfollowed partition is not kept from the
	// collector, and dropped past maxReused, as a Ready's slices are.
	c.visited = reused(visit)
	if c.Held > c.cfg.MaxHeld {
		c.evict(c.Held - c.cfg.MaxHeld)
	}
	if c.evicted && len(want) == 0 && len(c.rounds) == 0 && c.now.Sub(c.lastRewind) >= c.cfg.BackoffMax {
		// Nothing left to do with what is held: read the metadata again
		// for what was forgotten.
		c.evicted, c.lastRewind = false, c.now
		c.out.Rewind = true
	}
	c.startRounds(want)
	c.want = reused(want)
}

// hedge sends again the GETs unanswered for their bucket's learned
// threshold, within the budget, lets copies elsewhere be used for the
// entries of fetches unanswered for HedgeAfter, and notes when the next
// of either falls due.
func (c *Core) hedge() {
	c.retryAt = time.Time{}
	for i, n := 0, len(c.rounds); i < n; i++ {
		r := c.rounds[i]
		if hedge := r.start.Add(c.cfg.HedgeAfter); c.now.Before(hedge) {
			c.wakeAt(hedge)
		} else if t := c.now.Add(c.cfg.BackoffMax); t.After(c.bucketBackoff[r.bucket]) {
			c.bucketBackoff[r.bucket] = t
			for _, e := range r.entries {
				if p := c.parts[e.Partition]; p != nil {
					c.touch(p)
				}
			}
		}
		if !c.cfg.Hedge.Enabled() || r.hedge || r.hedged || r.denied {
			continue
		}
		if at := r.start.Add(c.threshold(r.bucket)); c.now.Before(at) {
			c.wakeAt(at)
			continue
		}
		if !c.budget.Take(c.cfg.Hedge) {
			r.denied = true
			c.HedgesDenied++
			continue
		}
		h := &round{id: c.id(), bucket: r.bucket, start: c.now, entries: r.entries, hedge: true, twin: r}
		r.twin, r.hedged = h, true
		c.rounds = append(c.rounds, h)
		c.wakeAt(h.start.Add(c.cfg.HedgeAfter))
		c.out.Fetches = append(c.out.Fetches, Fetch{ID: h.id, Bucket: h.bucket, Entries: h.entries, HedgeOf: r.id})
		c.Hedges++
	}
}

// threshold is how long a GET to bucket may go unanswered before it is
// hedged.
func (c *Core) threshold(bucket string) time.Duration {
	if e := c.latency[bucket]; e != nil {
		return e.Threshold(c.cfg.Hedge)
	}
	return c.cfg.Hedge.Max
}

// inFlight counts the fetches that take a concurrency slot: a hedge takes
// none while its twin is outstanding (the budget bounds hedges).
func (c *Core) inFlight() int {
	n := 0
	for _, r := range c.rounds {
		if !r.hedge || r.twin == nil {
			n++
		}
	}
	return n
}

// visit does the work p's state allows and appends to want the entries of
// p to fetch.
func (c *Core) visit(p *part, want []*pendingEntry) []*pendingEntry {
	if p.state == resting {
		if c.now.Before(p.restUntil) {
			c.timer(p, p.restUntil)
		} else {
			c.load(p) // its rest is over
		}
		return want
	}
	if p.state == ready && !p.quietAt.IsZero() && !c.now.Before(p.quietAt) {
		c.recovered(p)
	}
	if p.state == ready && p.op == 0 && p.reread != nil {
		c.verify(p, *p.reread)
		p.reread = nil
	}
	if p.state == ready && p.op == 0 {
		c.advance(p)
	}
	if p.state != ready {
		return want
	}
	c.remind(p)
	c.sweep(p)
	c.reportGap(p)
	want = c.chain(p, want)
	if lag := max(0, p.maxSeen+1-p.leo); lag != p.lag {
		p.lag = lag
		c.out.Lags = append(c.out.Lags, Lag{Partition: p.tp, Offsets: lag})
	}
	return want
}

// remind reports p's progress again if it has not for ReportInterval and
// its log is idle: a follower whose log does not move, because it holds
// everything or because nothing it has continues it, must still tell its
// leader where it is, or a leader that learns of it late (a report made
// before the leader knew it as a follower is not kept) never does, and
// never republishes what it lacks.
func (c *Core) remind(p *part) {
	if p.op != 0 {
		return // its answer reports
	}
	if due := p.reported.Add(c.cfg.ReportInterval); c.now.Before(due) {
		c.timer(p, due)
	} else {
		c.report(p)
	}
}

// advance takes p, whose log is idle, one step: markers waiting for the
// epoch the broker learned, a truncation where the log diverged, the start
// of an empty replica, or the next append.
func (c *Core) advance(p *part) {
	c.learnEpoch(p)
	if p.checkDiv {
		p.checkDiv = false
		// KIP-320: truncate where the local log disagrees with the leader
		// lineage, e.g. records of an old epoch applied before the
		// follower learned that a new leader started below them.
		if to, diverged := fencing.Divergence(p.leo, &p.local, &p.leader); diverged {
			c.truncate(p, opTruncateDiverged, to, true)
			return
		}
	}
	if _, ok := p.local.Latest(); !ok {
		// An empty log starts where the leader's lineage begins: a new
		// replica has nothing to continue from, and waiting at offset 0
		// for data the leader no longer retains would hold it forever.
		if first, ok := p.leader.Lineage().Earliest(); ok && first.StartOffset > p.leo {
			c.log.Info("activetier: starting empty replica at the leader's earliest epoch", "partition", p.tp.String(), "offset", first.StartOffset)
			c.truncate(p, opBootstrap, first.StartOffset, false)
			return
		}
	}
	c.appendNext(p)
}

// appendNext asks for the next fetched entry that continues p's log to be
// appended, re-deciding it against the current state first: markers that
// arrived during the fetch may have fenced it.
func (c *Core) appendNext(p *part) {
	for {
		pe, d, ok := c.candidate(p, p.leo)
		if !ok || pe.batches == nil {
			return
		}
		from, to, straddles := applyRange(pe, d)
		if straddles {
			// Batch boundaries are the leader's and every replica's; one
			// straddling the log end or an epoch boundary means the entry
			// does not describe this lineage.
			c.log.Warn("activetier: dropping entry whose batches straddle the apply range", "partition", p.tp.String(), "object", pe.e.Object.String(), "from", d.From, "limit", d.Limit)
			p.forget(pe)
			c.Dropped++
			continue
		}
		if from == to {
			p.forget(pe)
			continue
		}
		pe.applyFrom, pe.applyTo = from, to
		p.op, p.opKind, p.appending = c.id(), opAppend, pe
		c.ops[p.op] = p
		c.out.Appends = append(c.out.Appends, Append{ID: p.op, Partition: p.tp, Batches: pe.batches[from:to]})
		return
	}
}

// applyRange returns the batches of pe to append under d, as indices
// [from, to): those from the log end up to the end of the record epoch.
func applyRange(pe *pendingEntry, d fencing.Decision) (from, to int, straddles bool) {
	from = len(pe.batches)
	to = from
	for i, b := range pe.batches {
		if b.LastOffset < d.From {
			continue // below the log end: already applied
		}
		if b.FirstOffset >= d.Limit {
			break // past the end of the record epoch: superseded
		}
		if b.FirstOffset < d.From || b.LastOffset >= d.Limit {
			return 0, 0, true
		}
		from = min(from, i)
		to = i + 1
	}
	if to < from {
		to = from
	}
	return from, to, false
}

// sweep forgets entries fencing says are duplicates or stale.
func (c *Core) sweep(p *part) {
	kept := p.held[:0]
	for _, pe := range p.held {
		d := fencing.Decision{Action: fencing.Hold}
		if !pe.fetching && pe != p.appending {
			d = fencing.Decide(p.leo, &p.local, &p.leader, pe.e)
		}
		switch d.Action {
		case fencing.Skip:
			r := p.chain.Held(pe.e, p.leo, epochAt(&p.local, pe.e.LastOffset))
			c.counted(r)
			if r.Reread != nil {
				// Read back once the log is idle: an append under way
				// must not cost the check.
				p.reread = r.Reread
				c.touch(p)
			}
			delete(p.pending, pe.key())
			c.Skipped++
		case fencing.Drop:
			c.log.Debug("activetier: dropping stale entry", "partition", p.tp.String(), "first", pe.e.FirstOffset, "epoch", pe.e.RecordEpoch, "reason", d.Reason)
			delete(p.pending, pe.key())
			c.Dropped++
		default:
			kept = append(kept, pe)
		}
	}
	clear(p.held[len(kept):])
	p.held = kept
}

// candidate picks the entry to use for offset at: one fencing says to
// apply there, preferring one already fetched or being fetched, then one
// whose retry time and bucket allow a fetch now, newest publisher first (a
// republishing leader's bucket is the one most likely up).
func (c *Core) candidate(p *part, at int64) (*pendingEntry, fencing.Decision, bool) {
	if latest, ok := p.leader.Latest(); !ok || latest.Epoch < p.known {
		// The broker knows of a leader epoch whose markers have not
		// arrived: until they do, where the epochs before it ended is
		// unknown, and an entry of an earlier leader may be one that epoch
		// fenced (a zombie's). A Kafka follower likewise fetches only from
		// the leader of the epoch it was told.
		return nil, fencing.Decision{}, false
	}
	var best *pendingEntry
	var bestD fencing.Decision
	bestRank := 0
	for _, pe := range p.held {
		if pe.e.FirstOffset > at {
			break
		}
		if pe.e.LastOffset < at {
			continue
		}
		d := fencing.Decide(at, &p.local, &p.leader, pe.e)
		if d.Action != fencing.Apply {
			continue
		}
		r := c.rank(pe)
		if r == 0 {
			// Passed over for its backoff: look again when it ends.
			c.timer(p, c.readyAt(pe))
		}
		if best == nil || r > bestRank || (r == bestRank && pe.e.PublisherEpoch > best.e.PublisherEpoch) {
			best, bestD, bestRank = pe, d, r
		}
	}
	if best == nil || bestRank == 0 {
		return nil, fencing.Decision{}, false
	}
	return best, bestD, true
}

// readyAt is when pe may be fetched again, after its own and its bucket's
// backoff.
func (c *Core) readyAt(pe *pendingEntry) time.Time {
	if bt := c.bucketBackoff[pe.e.Object.Bucket]; bt.After(pe.notBefore) {
		return bt
	}
	return pe.notBefore
}

func (c *Core) rank(pe *pendingEntry) int {
	switch {
	case pe.batches != nil:
		return 3
	case pe.fetching && !c.now.Before(c.bucketBackoff[pe.e.Object.Bucket]):
		return 2
	case pe.fetching:
		return 0 // its bucket stopped answering: prefer a copy elsewhere
	case !c.now.Before(c.readyAt(pe)):
		return 1
	}
	return 0
}

// chain appends to want the entries of p to fetch now: the run of entries
// that continue the log from its end, up to Readahead of them, skipping
// ones already fetched or in flight.
func (c *Core) chain(p *part, want []*pendingEntry) []*pendingEntry {
	at := p.leo
	for range c.cfg.Readahead {
		pe, d, ok := c.candidate(p, at)
		if !ok {
			break
		}
		if pe.batches == nil && !pe.fetching {
			want = append(want, pe)
		}
		at = min(pe.e.LastOffset+1, d.Limit)
	}
	return want
}

// evict forgets n held entries, those furthest ahead of their partition's
// log end (the last to be needed), and returns how many it forgot.
func (c *Core) evict(n int) int {
	type ahead struct {
		p    *part
		pe   *pendingEntry
		dist int64
	}
	var cands []ahead
	for _, p := range c.list {
		for _, pe := range p.held {
			if !pe.fetching && pe.batches == nil {
				cands = append(cands, ahead{p, pe, pe.e.FirstOffset - p.leo})
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b ahead) int { return cmp.Compare(b.dist, a.dist) })
	n = min(n, len(cands))
	for _, a := range cands[:n] {
		a.p.forget(a.pe)
		c.Held--
		a.p.counted--
	}
	if n > 0 {
		c.evicted = true
		c.Evicted += uint64(n)
	}
	return n
}

// startRounds starts fetches for want, one per ranged GET (PlanReads),
// within the concurrency bound, so that a GET that is slow holds up only
// its own entries and can be hedged alone. Entries left out wait for a
// slot to free.
func (c *Core) startRounds(want []*pendingEntry) {
	if len(want) == 0 {
		return
	}
	entries := make([]metadata.Entry, len(want))
	idx := make([]int, len(want))
	for i, pe := range want {
		entries[i], idx[i] = pe.e, i
	}
	used := c.inFlight()
	for _, rd := range PlanReads(entries, idx, c.cfg.CoalesceGap) {
		if used >= c.cfg.FetchConcurrency {
			for _, i := range rd.Idx {
				if p := c.parts[want[i].e.Partition]; !p.starved {
					p.starved = true
					c.starved = append(c.starved, p)
				}
			}
			continue
		}
		used++
		r := &round{id: c.id(), bucket: rd.Object.Bucket, start: c.now, entries: make([]metadata.Entry, 0, len(rd.Idx))}
		for _, i := range rd.Idx {
			want[i].fetching = true
			r.entries = append(r.entries, want[i].e)
		}
		c.rounds = append(c.rounds, r)
		c.Fetches++
		if c.cfg.Hedge.Enabled() {
			c.budget.Earn(c.cfg.Hedge)
			c.wakeAt(r.start.Add(c.threshold(r.bucket)))
		}
		// A fetch unanswered by then lets copies elsewhere be used: that
		// takes a Tick, whether or not anything else happens.
		c.wakeAt(r.start.Add(c.cfg.HedgeAfter))
		c.out.Fetches = append(c.out.Fetches, Fetch{ID: r.id, Bucket: r.bucket, Entries: r.entries})
	}
}

// nextWake returns when the core wants a Tick: when the earliest entry
// the last step passed over for its backoff may be fetched, a hedge or a
// rest ends, or a re-read of forgotten entries is due. It changes
// nothing.
func (c *Core) nextWake() time.Time {
	earliest := c.retryAt
	if t := c.timers.next(); !t.IsZero() && (earliest.IsZero() || t.Before(earliest)) {
		earliest = t
	}
	if c.evicted && len(c.rounds) == 0 {
		// A re-read is due once the rate limit allows (a fetch in flight
		// wakes the driver by itself).
		if t := c.lastRewind.Add(c.cfg.BackoffMax); earliest.IsZero() || t.Before(earliest) {
			earliest = t
		}
	}
	return earliest
}
