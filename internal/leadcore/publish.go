package leadcore

import (
	"fmt"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
)

// message is one metadata.Message being published: one routed part per
// metadata partition, appended one after another.
type message struct {
	parts   []part
	next    int // the part in flight
	offsets map[int32]int64
	// For the entries of a cut object: the object, and per entry its
	// section, followers and leadership.
	up        *upload
	entries   []metadata.Entry
	sections  []combiner.SectionInfo
	followers [][]int32
	gens      []uint64
	// For a task: the task that waits for it. For markers: the tasks
	// whose markers it carries.
	task  *task
	tasks []*task
	// The commits it carries, with an object's entries or alone.
	commits []metadata.Commit
}

type part struct {
	partition int32
	data      []byte
}

// pumpEntries starts publishing the next object whose entries may go: one
// object at a time, so that the metadata log sees each partition's entries
// in offset order.
func (c *Core) pumpEntries(now time.Time) {
	for c.entryPub == nil {
		u := c.publishable()
		if u == nil {
			return
		}
		m := c.entriesOf(now, u)
		if len(m.entries) == 0 {
			// Every section was withheld: no entry names the object,
			// which is left for Sweep. Publishing nothing is not an error.
			c.remove(u)
			continue
		}
		c.entryPub = m
		m.commits = c.takeCommits()
		c.startMessage(now, m, &metadata.Message{Object: u.ref, WriterBrokerID: c.cfg.BrokerID, Entries: m.entries, Commits: m.commits})
	}
}

// publishable returns the first uploaded object, in cut order, none of
// whose partitions has data in an earlier object still unpublished. That
// keeps each partition's entries in offset order when uploads finish out
// of order, without making unrelated partitions wait.
func (c *Core) publishable() *upload {
	var blocked map[metadata.TopicPartition]bool
	for _, u := range c.queue {
		ok := u.uploaded
		for _, s := range u.obj.Sections {
			if blocked[s.Partition] {
				ok = false
			}
		}
		if ok {
			return u
		}
		if blocked == nil {
			blocked = make(map[metadata.TopicPartition]bool)
		}
		for _, s := range u.obj.Sections {
			blocked[s.Partition] = true
		}
	}
	return nil
}

// entriesOf returns the message of u's sections whose leadership is still
// on, at its current epoch. An entry the metadata codec rejects (an engine
// bug) fails its own partition's leadership, not the others'.
func (c *Core) entriesOf(now time.Time, u *upload) *message {
	n := len(u.obj.Sections)
	m := &message{up: u, entries: make([]metadata.Entry, 0, n), sections: make([]combiner.SectionInfo, 0, n),
		followers: make([][]int32, 0, n), gens: make([]uint64, 0, n)}
	for i, s := range u.obj.Sections {
		ld := c.leading[s.Partition]
		if ld == nil || ld.gen != u.gens[i] {
			// The leadership that accepted the data is over: it is no
			// longer this broker's to publish. Followers would fence it.
			c.stats.Fenced++
			continue
		}
		e := s.Entry(u.ref, ld.epoch, c.cfg.BrokerID)
		if e.Digest = u.digests[i]; e.Digest != 0 {
			e.DigestFrom = ld.chain.From
		}
		if err := e.Validate(); err != nil {
			c.failLeadership(now, s.Partition, ld, fmt.Errorf("%s: entry for offsets %d-%d cannot be published: %w", s.Partition, s.FirstOffset, s.LastOffset, err))
			c.cfg.Logger.Error("activetier: withholding an entry the metadata codec rejects", "partition", s.Partition.String(), "err", err)
			continue
		}
		m.entries = append(m.entries, e)
		m.sections = append(m.sections, s)
		m.followers = append(m.followers, u.obj.Followers[i])
		m.gens = append(m.gens, ld.gen)
	}
	return m
}

// unpublished returns the stored objects a live leadership still means
// to publish: cut objects queued for their entries (the metadata log may
// refuse them for longer than any sweep age) with a section of a
// leadership still on, and republish copies whose entries are being
// published. Nothing tracks them yet, and Sweep must not take them for
// orphans.
func (c *Core) unpublished() map[metadata.ObjectRef]bool {
	keep := make(map[metadata.ObjectRef]bool)
	for _, u := range c.queue {
		if u.uploaded && c.stillLed(u) {
			keep[u.ref] = true
		}
	}
	for _, tp := range c.ledPartitions() {
		// A leadership's chore and its catch-up both publish copies.
		for _, t := range c.leading[tp].duties() {
			if t != nil && !t.stopped && len(t.entries) > 0 {
				keep[t.entries[0].Object] = true
			}
		}
	}
	for _, t := range c.tasks {
		if !t.stopped && len(t.entries) > 0 {
			keep[t.entries[0].Object] = true
		}
	}
	return keep
}

// stillLed reports whether some section of u was accepted by a leadership
// that is still on: entriesOf publishes those.
func (c *Core) stillLed(u *upload) bool {
	for i, s := range u.obj.Sections {
		if ld := c.leading[s.Partition]; ld != nil && ld.gen == u.gens[i] {
			return true
		}
	}
	return false
}

// oldestAttempt returns when the oldest upload attempt still in flight
// began, a hedge included: the object it stores lands after that, and is
// known to the core only once the attempt reports it. ok is false when no
// attempt is in flight.
func (c *Core) oldestAttempt() (at time.Time, ok bool) {
	for _, r := range c.reqs {
		if r.what != WhatUpload && r.what != WhatCopy {
			continue
		}
		// While backing off, tried is the next attempt's time: the last
		// has returned, though a hedge of it may not have.
		for _, t := range []time.Time{r.tried, r.hedged} {
			if !t.IsZero() && (!ok || t.Before(at)) {
				at, ok = t, true
			}
		}
	}
	return at, ok
}

// remove takes u off the queue, published or withheld, and frees its
// buffer space: space is held until then, not only until the upload, so
// that a metadata log that stops accepting pushes back on Append instead
// of letting the queue of stored, unpublished objects grow without bound.
func (c *Core) remove(u *upload) {
	for i, q := range c.queue {
		if q == u {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			c.release(u.bytes)
			return
		}
	}
}

// startMessage routes msg to the metadata partitions of the followers of
// its entries' and markers' partitions and hands out its first part.
func (c *Core) startMessage(now time.Time, m *message, msg *metadata.Message) {
	routed, err := c.part.Split(msg, func(tp metadata.TopicPartition) []int32 { return c.followers[tp] })
	if err != nil {
		c.messageFailed(now, m, fmt.Errorf("routing metadata: %w", err))
		return
	}
	for _, e := range msg.Entries {
		// What is routed from now on reaches a follower that joins.
		if ld := c.leading[e.Partition]; ld != nil {
			ld.routed = max(ld.routed, e.LastOffset+1)
		}
	}
	m.offsets = make(map[int32]int64, len(routed))
	for _, r := range routed {
		data, err := metadata.AppendMessage(nil, r.Message)
		if err != nil {
			c.messageFailed(now, m, fmt.Errorf("encoding metadata: %w", err))
			return
		}
		m.parts = append(m.parts, part{partition: r.Partition, data: data})
	}
	c.nextPart(now, m)
}

// nextPart hands out m's next part, or finishes m.
func (c *Core) nextPart(now time.Time, m *message) {
	if m.next == len(m.parts) {
		c.messageDone(now, m)
		return
	}
	r := c.newRequest(now, WhatPublish)
	r.msg = m
	if m.task != nil {
		m.task.req = r.id
	}
	p := m.parts[m.next]
	c.rd.Publishes = append(c.rd.Publishes, Publish{ID: r.id, Partition: p.partition, Data: p.data})
	c.judgeHealth(now)
}

// Published is the result of an attempt of Publish id: the offset the
// metadata log gave the message, or the error and its kind. Publishing is
// retried until it succeeds, except into a closed log.
func (c *Core) Published(now time.Time, id uint64, offset int64, err error, kind Kind) {
	r := c.take(id)
	if r == nil {
		return
	}
	if err == nil && offset < 0 {
		err, kind = c.cfg.Violation("metadata.Log.Append", fmt.Sprintf("negative offset %d", offset)), Other
	}
	m := r.msg
	if err != nil {
		p := m.parts[m.next].partition
		if kind == Closed {
			c.rd.Cancels = append(c.rd.Cancels, id)
			c.judgeHealth(now)
			c.messageFailed(now, m, fmt.Errorf("publishing to metadata partition %d: %w", p, err))
			return
		}
		c.failedAttempt(now, r, err, kind)
		c.cfg.Logger.Warn("activetier: publishing metadata failed; retrying", "partition", p, "err", err)
		c.retry(now, r)
		return
	}
	c.succeeded(now, r)
	m.offsets[m.parts[m.next].partition] = offset
	m.next++
	c.nextPart(now, m)
}

// messageDone finishes a message all of whose parts are appended.
func (c *Core) messageDone(now time.Time, m *message) {
	if m.tasks != nil {
		c.markersDone(now, m, nil)
		return
	}
	c.commitsDone(now, m.commits, true)
	if m == c.commitPub {
		c.commitPub = nil
		return
	}
	if m.task != nil {
		c.taskPublished(now, m.task, m.offsets)
		return
	}
	u := m.up
	c.entryPub = nil
	c.rd.PublishLatency = append(c.rd.PublishLatency, now.Sub(u.appendedAt))
	c.gc.track(now, u.ref, m.sections, m.followers, m.gens, m.offsets)
	c.remove(u)
	for i, e := range m.entries {
		if ld := c.leading[e.Partition]; ld != nil && ld.gen == m.gens[i] && ld.published(e.FirstOffset, e.LastOffset+1) {
			c.queueCommit(now, e.Partition, ld)
		}
	}
	c.rd.DurableChanged = true
	c.pumpEntries(now)
}

// messageFailed gives up on m: its entries' leaderships fail, since what
// they accepted will never be published; a task retries or fails.
func (c *Core) messageFailed(now time.Time, m *message, err error) {
	if m.tasks != nil {
		c.markersDone(now, m, err)
		return
	}
	c.commitsDone(now, m.commits, false)
	if m == c.commitPub {
		c.commitPub = nil
		c.cfg.Logger.Warn("activetier: publishing committed offsets failed; they go with the next message", "err", err)
		return
	}
	if m.task != nil {
		c.taskFailed(now, m.task, err)
		return
	}
	u := m.up
	c.cfg.Logger.Error("activetier: publishing an object's entries failed", "object", u.ref.String(), "err", err)
	c.entryPub = nil
	c.remove(u)
	for _, e := range m.entries {
		if ld := c.leading[e.Partition]; ld != nil {
			c.failLeadership(now, e.Partition, ld, err)
		}
	}
	c.rd.DurableChanged = true
	c.pumpEntries(now)
}
