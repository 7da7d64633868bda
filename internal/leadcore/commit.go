package leadcore

import (
	"fmt"
	"slices"
	"time"

	"github.com/activetier/activetier/metadata"
)

// Committed offsets. A leadership's high watermark is the offset below
// which every in-sync follower has applied its log (Kafka's high
// watermark): the minimum of what those followers reported applied in
// this leadership, capped by the leader's own log end. It only grows. The
// core publishes it, up to what the leadership has published itself (its
// durable offset), as a metadata.Commit whenever that grows: riding in the
// next object's entry message, or, when no object is published within
// Interval, in a message of commits alone. Direct readers serve consumers
// up to it; records below it are never truncated by a leader elected from
// the in-sync set.

// commitState is a leadership's high watermark and how much of it is
// published.
type commitState struct {
	// inSync are the followers the high watermark waits for: the
	// followers given to BecomeLeader until SetInSync says otherwise.
	inSync []int32
	// hw is the high watermark; -1 until every in-sync follower reported.
	hw int64
	// sent is the highest commit published; sending the one in flight.
	sent, sending int64
}

func newCommitState(followers []int32) commitState {
	return commitState{inSync: slices.Clone(followers), hw: -1, sent: -1, sending: -1}
}

// commitTarget is the commit ld may publish: its high watermark, but no
// further than ld's durable offset. In-sync followers applied only what was
// published, so that caps nothing while any follower is in sync; with none,
// the high watermark is the leader's log end, ahead of the entries being
// cut and stored, and a direct reader that learned a commit past every
// entry describing its next records would judge them gone.
func (ld *leadership) commitTarget() int64 { return min(ld.commit.hw, ld.durable) }

// commitPending reports whether ld's commit target is ahead of what is
// published or being published.
func (ld *leadership) commitPending() bool {
	return ld.commitTarget() > max(ld.commit.sent, ld.commit.sending)
}

// SetInSync sets the followers of tp whose progress the high watermark
// waits for: Kafka's in-sync replica set without the leader. A broker
// calls it when the set shrinks (a follower fell behind) or grows again
// (it caught up); BecomeLeader resets it to all the followers. Every
// member must be one of tp's followers. The high watermark never goes
// back: a follower that rejoins is expected to have caught up.
func (c *Core) SetInSync(now time.Time, tp metadata.TopicPartition, inSync []int32) error {
	ld := c.leading[tp]
	if ld == nil {
		return refuse(NotLeader, "not the leader of %s", tp)
	}
	inSync = slices.Compact(slices.Sorted(slices.Values(inSync)))
	for _, f := range inSync {
		if !slices.Contains(c.followers[tp], f) {
			return fmt.Errorf("broker %d is not a follower of %s (followers %v)", f, tp, c.followers[tp])
		}
	}
	ld.commit.inSync = inSync
	c.advanceHW(now, tp, ld)
	return nil
}

// HighWatermark returns tp's high watermark and leadership generation,
// with ok false if the engine does not lead tp. The high watermark is -1
// until every in-sync follower has reported progress in this leadership.
func (c *Core) HighWatermark(tp metadata.TopicPartition) (hw int64, gen uint64, ok bool) {
	ld := c.leading[tp]
	if ld == nil {
		return -1, 0, false
	}
	return ld.commit.hw, ld.gen, true
}

// advanceHW recomputes ld's high watermark after a change of progress,
// in-sync set or log end, and schedules its publication if it grew.
func (c *Core) advanceHW(now time.Time, tp metadata.TopicPartition, ld *leadership) {
	hw := ld.next
	var applied map[int32]int64
	if p := c.gc.applied[tp]; p != nil && p.gen == ld.gen {
		applied = p.applied
	}
	for _, f := range ld.commit.inSync {
		off, ok := applied[f]
		if !ok {
			return
		}
		hw = min(hw, off)
	}
	if hw <= ld.commit.hw {
		return
	}
	ld.commit.hw = hw
	c.rd.CommitChanged = true
	c.queueCommit(now, tp, ld)
}

// queueCommit queues tp's commit for publication if it is pending and
// some metadata partition carries tp's messages (it has followers).
func (c *Core) queueCommit(now time.Time, tp metadata.TopicPartition, ld *leadership) {
	if len(c.followers[tp]) == 0 || !ld.commitPending() {
		return
	}
	c.commitQueue[tp] = struct{}{}
	if c.commitDue.IsZero() {
		c.commitDue = now.Add(c.cfg.Interval)
	}
}

// takeCommits returns the queued commits, marking them as being sent, in
// partition order so that the same events give the same messages.
func (c *Core) takeCommits() []metadata.Commit {
	if len(c.commitQueue) == 0 {
		return nil
	}
	tps := make([]metadata.TopicPartition, 0, len(c.commitQueue))
	for tp := range c.commitQueue {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, metadata.TopicPartition.Compare)
	out := make([]metadata.Commit, 0, len(tps))
	for _, tp := range tps {
		ld := c.leading[tp]
		if ld != nil && ld.commitPending() {
			target := ld.commitTarget()
			out = append(out, metadata.Commit{Partition: tp, Epoch: ld.epoch, Offset: target})
			ld.commit.sending = target
		}
	}
	clear(c.commitQueue)
	c.commitDue = time.Time{}
	return out
}

// commitsDone records that commits were published (ok) or given up on.
func (c *Core) commitsDone(now time.Time, commits []metadata.Commit, ok bool) {
	for _, cm := range commits {
		ld := c.leading[cm.Partition]
		if ld == nil || ld.epoch != cm.Epoch {
			continue
		}
		if ok {
			ld.commit.sent = max(ld.commit.sent, cm.Offset)
		}
		if ld.commit.sending == cm.Offset {
			ld.commit.sending = -1
		}
		c.queueCommit(now, cm.Partition, ld)
	}
}

// commitsAlone is when queued commits go in a message of their own: at
// commitDue, or, while an object is being cut or stored (its entry message
// will take them), up to commitWait later. Zero: none queued.
func (c *Core) commitsAlone() time.Time {
	if c.commitDue.IsZero() || c.commitPub != nil {
		return time.Time{}
	}
	if c.encoding != nil || len(c.queue) > 0 {
		return c.commitDue.Add(commitWait * c.cfg.Interval)
	}
	return c.commitDue
}

// commitWait bounds, in Intervals, how long commits wait for an object in
// flight before they go alone: an upload that keeps failing must not hold
// readers back for long.
const commitWait = 4

// publishCommits starts a message of commits alone when they are due and
// no entry message has taken them.
func (c *Core) publishCommits(now time.Time) {
	if at := c.commitsAlone(); at.IsZero() || now.Before(at) {
		return
	}
	commits := c.takeCommits()
	if len(commits) == 0 {
		return
	}
	m := &message{commits: commits}
	c.commitPub = m
	c.startMessage(now, m, &metadata.Message{WriterBrokerID: c.cfg.BrokerID, Commits: commits})
}
