package leadcore

import (
	"slices"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
)

// slot is one of the two builders: Append adds to the active one while the
// other is being cut by the driver.
type slot struct {
	b *combiner.Builder
	// gens is the leadership each pending partition's data was accepted
	// under.
	gens map[metadata.TopicPartition]uint64
	// digests is each pending partition's rolling digest after each of
	// its batches in the slot, ascending: a section publishes the value
	// after its last batch (a slot may hold sections of two epochs).
	digests map[metadata.TopicPartition][]chainAt
	// followers is the placement of the partitions in gens as it was when
	// the slot was handed out for encoding, read by the builder during the
	// driver's Cut.
	followers map[metadata.TopicPartition][]int32
	encode    uint64    // the Encode request while handed out
	oldest    time.Time // when its oldest batch was appended
}

func (c *Core) newSlot() (*slot, error) {
	s := &slot{gens: make(map[metadata.TopicPartition]uint64), digests: make(map[metadata.TopicPartition][]chainAt)}
	b, err := combiner.NewBuilder(combiner.BuilderConfig{
		Interval:      c.cfg.Interval,
		TargetBytes:   c.cfg.ObjectBytes,
		MaxPartitions: c.cfg.MaxPartitions,
		Encoder:       combiner.EncoderOptions{Codec: c.cfg.Codec},
		Followers:     func(tp metadata.TopicPartition) []int32 { return s.followers[tp] },
		Buffer:        c.cfg.ObjectBuffer,
	})
	s.b = b
	return s, err
}

// upload is one cut object on its way to being stored and published.
type upload struct {
	obj        combiner.Object
	gens       []uint64 // per section: the leadership that accepted its data
	digests    []uint64 // per section: the partition's digest after it
	bytes      int      // buffer bytes this object accounts for
	appendedAt time.Time
	ref        metadata.ObjectRef
	uploaded   bool
}

// chainAt is a partition's rolling digest after the batch ending at last.
type chainAt struct {
	last  int64
	value uint64
}

// valueAt returns the value after the batch of cs ending at last, or 0
// (none published) if there is none.
func valueAt(cs []chainAt, last int64) uint64 {
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].last == last {
			return cs[i].value
		}
	}
	return 0
}

// maybeCut hands the active builder out for encoding if a cut is due and
// an upload slot is free; the slot goes to the cut's first object.
func (c *Core) maybeCut(now time.Time) {
	if !c.started || c.spare == nil || c.slotsUse >= c.cfg.MaxInflight || !c.active.b.Due(now) && !c.flushDue(now) {
		return
	}
	full := c.active
	c.active, c.spare = c.spare, nil
	// Only the partitions with data in it: the placement of every led
	// partition would cost each cut as much as the broker leads.
	full.followers = make(map[metadata.TopicPartition][]int32, len(full.gens))
	for tp := range full.gens {
		full.followers[tp] = c.followers[tp]
	}
	full.oldest = full.b.Stats().Oldest
	c.flushCut(full)
	c.encoding = full
	r := c.newRequest(now, whatEncode)
	full.encode = r.id
	c.slotsUse++
	c.rd.Encodes = append(c.rd.Encodes, Encode{ID: r.id, Builder: full.b})
}

// Encoded takes the objects the driver cut from the builder of Encode id
// and queues them for upload. An error is a bug in the engine or the
// combiner (every batch was validated on Add): the data stays in the
// builder, to be cut again later.
func (c *Core) Encoded(now time.Time, id uint64, objs []combiner.Object, err error) {
	full := c.encoding
	if c.take(id) == nil || full == nil || full.encode != id {
		return
	}
	c.encoding, c.spare = nil, full
	full.encode = 0
	c.slotsUse--
	if err != nil {
		c.cfg.Logger.Error("activetier: cutting an object failed", "err", err)
		c.startUploads(now)
		return
	}
	for _, o := range objs {
		u := &upload{obj: o, appendedAt: full.oldest, gens: make([]uint64, len(o.Sections)), digests: make([]uint64, len(o.Sections))}
		for i, s := range o.Sections {
			u.gens[i] = full.gens[s.Partition]
			u.digests[i] = valueAt(full.digests[s.Partition], s.LastOffset)
			u.bytes += int(s.UncompressedSize)
		}
		c.queue = append(c.queue, u)
		c.waiting = append(c.waiting, u)
	}
	clear(full.gens)
	for tp, d := range full.digests {
		full.digests[tp] = d[:0] // the partition is likely pending again
	}
	full.followers = nil
	c.stats.UploadsInFlight += len(objs)
	c.startUploads(now)
	c.maybeCut(now)
}

// startUploads hands out the waiting objects' uploads, oldest first, while
// slots are free.
func (c *Core) startUploads(now time.Time) {
	for len(c.waiting) > 0 && c.slotsUse < c.cfg.MaxInflight {
		u := c.waiting[0]
		c.waiting = c.waiting[1:]
		r := c.newRequest(now, WhatUpload)
		r.up, r.tried = u, now
		c.putting = append(c.putting, r)
		if c.cfg.Hedge.Enabled() {
			c.putBudget.Earn(c.cfg.Hedge)
		}
		c.slotsUse++
		c.rd.Uploads = append(c.rd.Uploads, Upload{ID: r.id, What: WhatUpload, Data: u.obj.Data})
	}
	c.judgeHealth(now)
}

// Uploaded is the result of an attempt of Upload id: the object's
// reference, or the error and its kind. A cut object's upload is retried
// until it succeeds: failures keep the data queued, count against the
// buffer, and degrade the engine after DegradedAfter. A republish copy is
// retried only while the store is unavailable.
func (c *Core) Uploaded(now time.Time, id uint64, ref metadata.ObjectRef, err error, kind Kind) {
	r := c.take(id)
	if r == nil {
		return
	}
	if err != nil {
		if r.what == WhatCopy && kind != Unavailable {
			c.rd.Cancels = append(c.rd.Cancels, id)
			c.judgeHealth(now)
			c.copyFailed(now, r.task, err)
			return
		}
		c.failedAttempt(now, r, err, kind)
		if r.what == WhatUpload {
			c.cfg.Logger.Warn("activetier: upload failed; retrying", "attempt", r.attempts+1, "err", err)
		}
		c.retry(now, r)
		return
	}
	if r.what == WhatUpload {
		c.putLatency.Observe(now.Sub(r.tried))
	}
	c.succeeded(now, r)
	if r.what == WhatCopy {
		c.copied(now, r.task, ref)
		return
	}
	c.stored(now, r, ref)
}

// stored takes the reference of an object upload r stored.
func (c *Core) stored(now time.Time, r *request, ref metadata.ObjectRef) {
	if i := slices.Index(c.putting, r); i >= 0 {
		c.putting = slices.Delete(c.putting, i, i+1)
	}
	u := r.up
	u.ref, u.uploaded = ref, true
	c.stats.ObjectBytes += uint64(len(u.obj.Data))
	c.stats.Objects++
	c.stats.UploadsInFlight--
	u.obj.Data = nil
	c.slotsUse--
	c.rd.UploadLatency = append(c.rd.UploadLatency, now.Sub(r.start))
	c.startUploads(now)
	c.maybeCut(now)
	c.pumpEntries(now)
}

// hedgeUploads hands out a hedge of every upload whose attempt has gone
// unanswered for the learned threshold, within the budget, once per
// upload: a store that is slow for everyone gets at most one extra
// request per object.
func (c *Core) hedgeUploads(now time.Time) {
	if !c.cfg.Hedge.Enabled() {
		return
	}
	threshold := c.putLatency.Threshold(c.cfg.Hedge)
	for _, r := range c.putting {
		if !r.hedged.IsZero() || now.Before(r.tried.Add(threshold)) {
			continue
		}
		r.hedged = now
		if !c.putBudget.Take(c.cfg.Hedge) {
			c.stats.UploadHedgesDenied++
			continue
		}
		c.stats.UploadHedges++
		c.rd.Hedges = append(c.rd.Hedges, Hedge{ID: r.id, What: r.what, Data: r.up.obj.Data})
	}
}

// HedgeUploaded is the result of Hedge id. The first success of an
// upload's attempts wins: the others are cancelled. A failed hedge
// changes nothing: the attempt it hedged is still under way, or has
// failed and been retried.
func (c *Core) HedgeUploaded(now time.Time, id uint64, ref metadata.ObjectRef, err error) {
	r := c.reqs[id]
	if r == nil || r.hedged.IsZero() || r.what != WhatUpload {
		return // the upload is done: the hedge's object, if stored, is Sweep's
	}
	if err != nil {
		c.cfg.Logger.Debug("activetier: hedged upload failed", "err", err)
		return
	}
	c.take(id)
	c.stats.UploadHedgeWins++
	c.putLatency.Observe(now.Sub(r.hedged))
	c.putLatency.Observe(now.Sub(r.tried)) // at least: it had not answered
	c.rd.Cancels = append(c.rd.Cancels, id)
	c.succeeded(now, r)
	c.stored(now, r, ref)
}
