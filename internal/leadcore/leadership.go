package leadcore

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// leadership is the state of one partition the engine leads. A leadership
// spans re-elections of this broker at higher epochs as long as the broker
// never stopped leading in between: the log is the same, so data accepted
// at the earlier epoch is published at the later one.
type leadership struct {
	epoch int32
	// epochs are the epochs this leadership has held, ascending: the
	// epochs its appends were accepted at, and so the only ones a wait
	// may name.
	epochs []int32
	gen    uint64
	// next is the offset the next Append must start at.
	next int64
	// durable: every offset below it is stored and published by this
	// leadership, or was on every follower when it began. above holds the
	// ranges published beyond a hole (a republish still under way),
	// merged and ascending.
	durable int64
	above   []offsetRange
	// failed is set when data of this leadership can never be published;
	// WaitDurable beyond durable then returns it.
	failed error
	// faultSince is when the leadership began failing to replicate its
	// partition (see Failure); zero while it does not.
	faultSince time.Time
	// choreFault and progressFault say which steps fail: its chore (or
	// catch-up), or judging its followers' progress. It stops failing
	// once neither does.
	choreFault, progressFault bool
	chore                     *task
	commit                    commitState
	// epochStart is the offset the current epoch starts at.
	epochStart int64
	// replicas are the followers' progress in this leadership; catchup
	// is the republish under way for those nothing continues; routed is
	// the end of the highest entry handed to the metadata log (see
	// catchup.go).
	replicas map[int32]*replica
	catchup  *task
	routed   int64
	// catchupQueued: it waits in Core.catchupQueue for a catch-up.
	catchupQueued bool
	// chain is the log's rolling digest (package digest) at next, and
	// where it began: continued from the broker's follower, or begun at
	// the leadership's start.
	chain digest.Chain
}

type offsetRange struct{ from, to int64 } // [from, to)

// published records that [from, to) is stored and published and reports
// whether the durable offset advanced.
func (ld *leadership) published(from, to int64) bool {
	if to <= ld.durable {
		return false
	}
	if from > ld.durable {
		ld.above = mergeRange(ld.above, offsetRange{from, to})
		return false
	}
	ld.durable = to
	for len(ld.above) > 0 && ld.above[0].from <= ld.durable {
		ld.durable = max(ld.durable, ld.above[0].to)
		ld.above = ld.above[1:]
	}
	return true
}

func mergeRange(rs []offsetRange, r offsetRange) []offsetRange {
	i, _ := slices.BinarySearchFunc(rs, r, func(a, b offsetRange) int { return cmp.Compare(a.from, b.from) })
	rs = slices.Insert(rs, i, r)
	out := rs[:1]
	for _, r := range rs[1:] {
		if last := &out[len(out)-1]; r.from <= last.to {
			last.to = max(last.to, r.to)
			continue
		}
		out = append(out, r)
	}
	return out
}

// CheckLeader validates the arguments of BecomeLeader that come from the
// broker, before the driver reads the local log for it, and returns the
// followers sorted and without duplicates.
func (c *Core) CheckLeader(tp metadata.TopicPartition, epoch int32, followers []int32) ([]int32, error) {
	if err := tp.Validate(); err != nil {
		return nil, err
	}
	if epoch < 0 {
		return nil, fmt.Errorf("negative epoch %d", epoch)
	}
	if last, ok := c.led[tp]; ok && c.leading[tp] == nil && epoch <= last {
		// An epoch names one leadership: a wait naming epoch must never be
		// answered by a later leadership that happens to hold the offset.
		return nil, refuse(StaleEpoch, "epoch %d is not above epoch %d, which this broker led before", epoch, last)
	}
	followers = slices.Compact(slices.Sorted(slices.Values(followers)))
	if slices.Contains(followers, c.cfg.BrokerID) {
		return nil, fmt.Errorf("the leader, broker %d, is among its followers %v", c.cfg.BrokerID, followers)
	}
	if len(followers) > 0 && followers[0] < 0 {
		return nil, fmt.Errorf("negative follower id in %v", followers)
	}
	return followers, nil
}

// BecomeLeader makes the engine tp's leader at epoch with followers, the
// local log ending at leo; see walstore.Node.BecomeLeader for the
// protocol. chain is the log's rolling digest at leo (package digest),
// as the broker's follower knew it, or the zero Chain if unknown: a new
// leadership continues it, or begins a chain at leo. Errors do not change
// anything.
func (c *Core) BecomeLeader(now time.Time, tp metadata.TopicPartition, epoch int32, followers []int32, republishFrom, leo int64, chain digest.Chain) error {
	followers, err := c.CheckLeader(tp, epoch, followers)
	if err != nil {
		return err
	}
	if leo < 0 {
		return c.cfg.Violation("LocalLog.EndOffset", fmt.Sprintf("negative end offset %d", leo))
	}
	ld := c.leading[tp]
	if ld != nil && epoch < ld.epoch {
		return fmt.Errorf("epoch %d is below the current epoch %d", epoch, ld.epoch)
	}
	// The same leadership with other followers does not look at leo: the
	// broker may have appended since it read it.
	sameLog := ld != nil && epoch == ld.epoch && republishFrom < 0
	if ld != nil && !sameLog && leo < ld.next {
		// The log lost records this leadership accepted, some perhaps
		// acknowledged durable: a leadership begun there would publish
		// markers that make every follower truncate them.
		return c.cfg.Violation("LocalLog.EndOffset", fmt.Sprintf("end offset %d is below %d, up to which this leadership accepted records", leo, ld.next))
	}
	before := c.followers[tp]
	c.followers[tp] = followers
	if ld != nil {
		ld.commit.inSync = followers
		// A follower that joins may have held the partition before and
		// deleted it since (a reassignment): what it reported then is
		// not what it holds now. One that lacks the log from
		// republishFrom holds nothing above it.
		c.gc.followersChanged(tp, before, followers, republishFrom)
		c.replicasChanged(ld, followers)
	}
	switch {
	case sameLog:
		return nil
	case ld != nil:
		// Re-elected without a break: the same log goes on. A republish
		// asked for now is for followers that lack the log from there (a
		// reassignment): until it is done, only this broker is sure to
		// hold it, so the durable offset goes back to where it starts.
		if epoch > ld.epoch {
			ld.epochs = append(ld.epochs, epoch)
			ld.epochStart = leo
		}
		ld.epoch = epoch
		ld.commit.sent, ld.commit.sending = -1, -1 // published anew at the new epoch
		if republishFrom >= 0 && republishFrom < ld.durable {
			ld.durable, ld.above = max(republishFrom, 0), nil
		}
	default:
		c.gens++
		start := leo
		if republishFrom >= 0 {
			start = min(republishFrom, leo)
		}
		ld = &leadership{epoch: epoch, epochs: []int32{epoch}, gen: c.gens, next: leo, durable: start, commit: newCommitState(followers),
			epochStart: leo, replicas: newReplicas(followers, start), chain: chain}
		if chain.Value == 0 {
			ld.chain = digest.Chain{From: leo, Value: digest.Origin}
		}
		c.leading[tp] = ld
		c.gc.newLeadership(tp, ld.gen)
	}
	c.newChore(now, tp, ld, republishFrom, leo)
	c.rd.DurableChanged = true
	c.advanceHW(now, tp, ld)
	c.queueCommit(now, tp, ld) // a new epoch publishes its commit anew
	c.catchUp(now, tp, ld)
	return nil
}

// Resign ends the leadership of tp, if any: its pending data is withheld
// and waiters learn of it.
func (c *Core) Resign(now time.Time, tp metadata.TopicPartition) {
	if c.leading[tp] != nil {
		c.endLeadership(now, tp)
		// Objects cut while leading keep their followers; the collector
		// needs no current ones for a partition it no longer leads.
		delete(c.followers, tp)
	}
}

// endLeadership ends tp's leadership: its buffered data is dropped, its
// chore, catch-up, marker refresh and Republish calls stopped; waiters
// learn of it.
func (c *Core) endLeadership(now time.Time, tp metadata.TopicPartition) {
	ld := c.leading[tp]
	if ld.chore != nil {
		c.stopTask(ld.chore)
	}
	if ld.catchup != nil {
		c.caughtUpDone(now, ld, true)
	}
	if ld.catchupQueued {
		c.catchupQueue = slices.DeleteFunc(c.catchupQueue, func(q metadata.TopicPartition) bool { return q == tp })
	}
	for _, id := range c.sortedTasks() {
		if t := c.tasks[id]; t.tp == tp {
			c.finishTask(now, t, refuse(NotLeader, "republish %s: leadership ended", tp))
		}
	}
	delete(c.leading, tp)
	c.led[tp] = ld.epoch
	c.stopRefresh(now, tp) // once tp is not led: the next group leaves it out
	if !ld.faultSince.IsZero() {
		c.rd.HealthChanged = true
		c.rd.Failures = append(c.rd.Failures, Failure{Partition: tp})
	}
	if n := c.active.b.Remove(tp); n > 0 {
		delete(c.active.gens, tp)
		c.active.digests[tp] = c.active.digests[tp][:0]
		c.stats.Fenced++
		c.release(n)
	}
	c.gc.endLeadership(tp)
	delete(c.commitQueue, tp)
	c.rd.DurableChanged = true
	c.rd.CommitChanged = true
}

// release frees n bytes of buffer space.
func (c *Core) release(n int) {
	c.stats.BufferedBytes -= n
	c.rd.SpaceFreed = true
}

// Leadership returns tp's leadership: its generation (which changes when
// a new leadership begins), durable offset, and the error that fails
// waits beyond it; ok is false if the engine does not lead tp.
func (c *Core) Leadership(tp metadata.TopicPartition) (gen uint64, durable int64, failed error, ok bool) {
	ld := c.leading[tp]
	if ld == nil {
		return 0, -1, nil, false
	}
	return ld.gen, ld.durable, ld.failed, true
}

// Accepted returns the generation of tp's current leadership if it is
// the one that accepts appends at epoch (it held epoch, and has not ended
// since); ok is false otherwise. A wait names the epoch of the records it
// waits for, so that a later leadership, which may hold other records at
// the same offsets, never answers it.
func (c *Core) Accepted(tp metadata.TopicPartition, epoch int32) (gen uint64, ok bool) {
	ld := c.leading[tp]
	if ld == nil {
		return 0, false
	}
	if _, found := slices.BinarySearch(ld.epochs, epoch); !found {
		return 0, false
	}
	return ld.gen, true
}

// Append buffers batch b of tp. Refusals are *Error: NotLeader,
// InvalidBatch, TooLarge, or BufferFull (the caller may wait for
// SpaceFreed and call again).
func (c *Core) Append(now time.Time, tp metadata.TopicPartition, b storage.Batch) error {
	n := len(b.Data)
	switch {
	case n == 0:
		return refuse(InvalidBatch, "no data")
	case b.FirstOffset < 0 || b.LastOffset < b.FirstOffset || b.LastOffset == math.MaxInt64:
		return refuse(InvalidBatch, "offsets %d-%d", b.FirstOffset, b.LastOffset)
	case b.Epoch < 0:
		return refuse(InvalidBatch, "negative epoch %d", b.Epoch)
	case n > c.cfg.BufferBytes:
		return refuse(TooLarge, "batch of %d bytes exceeds BufferBytes %d", n, c.cfg.BufferBytes)
	}
	ld := c.leading[tp]
	switch {
	case ld == nil:
		return refuse(NotLeader, "not the leader of %s", tp)
	case b.Epoch != ld.epoch:
		return refuse(InvalidBatch, "batch epoch %d is not the leader epoch %d", b.Epoch, ld.epoch)
	case b.FirstOffset != ld.next:
		return refuse(InvalidBatch, "batch starts at %d, the log continues at %d", b.FirstOffset, ld.next)
	case c.stats.BufferedBytes+n > c.cfg.BufferBytes:
		return refuse(BufferFull, "%d bytes buffered of %d", c.stats.BufferedBytes, c.cfg.BufferBytes)
	}
	if err := c.active.b.Add(tp, b, now); err != nil {
		return &Error{Code: InvalidBatch, Err: err}
	}
	c.active.gens[tp] = ld.gen
	if !c.cfg.NoDigests {
		ld.chain.Value = digest.Next(ld.chain.Value, b)
		c.active.digests[tp] = append(c.active.digests[tp], chainAt{b.LastOffset, ld.chain.Value})
	}
	ld.next = b.LastOffset + 1
	if len(ld.commit.inSync) == 0 {
		c.advanceHW(now, tp, ld) // the leader alone is in sync
	}
	c.stats.BufferedBytes += n
	c.stats.Appends++
	c.stats.AppendedBytes += uint64(n)
	c.maybeCut(now)
	return nil
}

// NeedLineage reports whether judging p needs tp's epochs from the local
// log: the follower's last epoch is an earlier one than the leader's.
func (c *Core) NeedLineage(tp metadata.TopicPartition, lastEpoch int32) bool {
	ld := c.leading[tp]
	return ld != nil && lastEpoch >= 0 && lastEpoch < ld.epoch
}

// Progress records that follower's log ends at endOffset, its last record
// at lastEpoch (-1 for a log without records), judged as Kafka's leader
// does: a follower whose last epoch is not one of this leader's log, or
// whose log runs past the end of that epoch here, may still truncate, so
// only what it holds of this leader's log counts; nor is it credited past
// the end of what was appended here, and a log without records holds
// nothing. The latest report is what the follower holds: one lower than
// the last (a follower that lost its log) lowers its credit, and one that
// cannot be judged withdraws it until the follower reports again. The
// high watermark advances with it (see SetInSync), and a follower that no
// entry continues is caught up (see catchup.go). epochs is tp's local
// lineage when NeedLineage said so (epochsErr if it could not be read).
// Other reports are ignored.
func (c *Core) Progress(now time.Time, tp metadata.TopicPartition, follower int32, endOffset int64, lastEpoch int32, epochs []storage.EpochEntry, epochsErr error) {
	ld := c.leading[tp]
	if endOffset < 0 || lastEpoch < -1 || ld == nil || lastEpoch > ld.epoch || !slices.Contains(c.followers[tp], follower) {
		// A report of a broker that is not a follower (yet) would be
		// forgotten when it becomes one (see followersChanged), and kept
		// until then, memory for any broker id a report names.
		return
	}
	// No follower holds more than the leader's log: a report past its
	// end is not believed beyond it, or one such report would make every
	// later object look applied by that follower.
	if lastEpoch >= 0 && lastEpoch < ld.epoch && epochsErr != nil {
		// Unjudged, the follower's credit cannot grow, nor the high
		// watermark with it: the partition does not replicate.
		c.cfg.Logger.Warn("activetier: cannot judge a follower's progress", "partition", tp.String(), "err", epochsErr)
		ld.progressFault = true
		c.fault(now, tp, ld, fmt.Errorf("judging the progress of follower %d of %s: %w", follower, tp, epochsErr))
		return
	}
	if ld.progressFault {
		ld.progressFault = false
		if !ld.choreFault {
			c.unfault(tp, ld)
		}
	}
	pos := min(endOffset, max(ld.next, ld.durable))
	credit := pos
	switch {
	case lastEpoch < 0:
		credit = 0 // it goes on at its end, holding nothing
	case lastEpoch < ld.epoch:
		lin, err := fencing.NewLineage(epochs...)
		if err != nil {
			return
		}
		e, end := lin.EndOffsetFor(lastEpoch, math.MaxInt64)
		if e != lastEpoch {
			// The follower's last epoch is not in this log: it truncates
			// first, to an offset its next report tells.
			c.gc.withdraw(tp, ld.gen, follower)
			ld.unjudged(follower)
			return
		}
		pos = min(pos, end)
		credit = pos
	}
	c.gc.progress(tp, ld.gen, follower, credit)
	c.advanceHW(now, tp, ld)
	c.reported(now, tp, ld, follower, pos, credit)
}

// Tiered records that tp's records below offset are in long-term storage.
func (c *Core) Tiered(tp metadata.TopicPartition, offset int64) {
	if offset >= 0 {
		c.gc.tiered[tp] = max(c.gc.tiered[tp], offset)
	}
}
