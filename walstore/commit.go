package walstore

import (
	"context"
	"fmt"
	"time"

	"github.com/activetier/activetier/internal/leadcore"
	"github.com/activetier/activetier/metadata"
)

// High watermark: the leader computes, per partition it leads, the offset
// below which every in-sync follower has applied its log (from the
// progress RecordProgress takes), and publishes it in the metadata log as
// a metadata.Commit, for direct readers (package directread) to serve
// consumers up to. The decisions are the core's (leadcore); the waiting is
// done here.

// HighWatermark is Node.HighWatermark of the leader side.
func (l *leaderEngine) HighWatermark(tp metadata.TopicPartition) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	hw, _, _ := l.core.HighWatermark(tp)
	return hw
}

// SetInSync is Node.SetInSync of the leader side.
func (l *leaderEngine) SetInSync(tp metadata.TopicPartition, inSync []int32) error {
	var err error
	l.step(func(c *leadcore.Core, now time.Time) { err = c.SetInSync(now, tp, inSync) })
	if err != nil {
		return fmt.Errorf("walstore: set in-sync followers of %s: %w", tp, refusal(err))
	}
	return nil
}

// WaitReplicated is Node.WaitReplicated of the leader side.
func (l *leaderEngine) WaitReplicated(ctx context.Context, tp metadata.TopicPartition, epoch int32, offset int64) error {
	return l.waitFor(ctx, tp, epoch, offset, "replicated", func(c *leadcore.Core) (int64, error) {
		hw, _, _ := c.HighWatermark(tp)
		return hw, nil
	}, &l.commit)
}

// ReplicaState is a follower of a partition as its leader sees it: what a
// broker needs to grow and shrink the partition's in-sync replica set by
// Kafka's rules (see docs/broker-integration.md).
type ReplicaState struct {
	// Broker is the follower's broker id.
	Broker int32
	// EndOffset is the follower's log end as credited in this
	// leadership: it holds the leader's log below it, as its last report
	// was judged (see RecordProgress). -1 if it has not reported in this
	// leadership, or its last report could not be judged (it must
	// truncate first).
	EndOffset int64
	// CaughtUp: EndOffset has reached the high watermark and the offset
	// the current leader epoch starts at, Kafka's condition for adding a
	// follower to the in-sync replicas: it holds every record
	// acknowledged with acks=all so far, in this leadership and before.
	// For a follower that is not InSync, the high watermark may pass it
	// again at any time: add it with SetInSync before acting on this.
	CaughtUp bool
	// InSync: the high watermark waits for it (SetInSync).
	InSync bool
	// LastCaughtUp is the last time it held everything this leadership
	// had published, at a report or at the one before it (Kafka's
	// lastCaughtUpTime); zero if never. An in-sync follower whose
	// LastCaughtUp is older than the broker's replica.lag.time.max.ms
	// has fallen behind. Followers report at least every
	// NodeConfig.ProgressInterval, so an idle partition's stays fresh.
	LastCaughtUp time.Time
}

// Replicas is Node.Replicas of the leader side.
func (l *leaderEngine) Replicas(tp metadata.TopicPartition) []ReplicaState {
	l.mu.Lock()
	rs, ok := l.core.Replicas(tp)
	l.mu.Unlock()
	if !ok {
		return nil
	}
	out := make([]ReplicaState, len(rs))
	for i, r := range rs {
		out[i] = ReplicaState(r)
	}
	return out
}

// Replicas returns tp's followers as this leadership sees them, in broker
// order, or nil if the Node does not lead tp.
func (n *Node) Replicas(tp metadata.TopicPartition) []ReplicaState { return n.leader.Replicas(tp) }

// HighWatermark returns tp's high watermark: the offset below which every
// in-sync follower (see SetInSync) has applied tp's log in this
// leadership, capped by the leader's own log end; with no follower in
// sync, the leader's log end. It is -1 if the Node does not lead tp, or
// while some in-sync follower has not reported progress in this
// leadership. It never goes back within a leadership.
func (n *Node) HighWatermark(tp metadata.TopicPartition) int64 { return n.leader.HighWatermark(tp) }

// SetInSync sets the followers of tp whose progress the high watermark
// waits for: Kafka's in-sync replica set, without the leader. Call it when
// the broker shrinks the set (a follower fell behind) or grows it again (a
// follower caught up); BecomeLeader resets it to all of tp's followers.
// Every member must be one of the followers given to BecomeLeader. It
// fails with ErrNotLeader if the Node does not lead tp.
//
// Adding a follower that is not caught up (see Replicas) is safe for the
// high watermark, which never goes back: it stops growing, and acks=all
// waits, until that follower reaches it. It is not safe for the broker's
// in-sync set as its controller sees it, from which a leader may be
// elected: propose a follower there only once it is in this set and
// Replicas says it is caught up, in that order, and take one out of this
// set only once the controller has taken it out of its own
// (docs/broker-integration.md).
func (n *Node) SetInSync(tp metadata.TopicPartition, inSync []int32) error {
	return n.leader.SetInSync(tp, inSync)
}

// WaitReplicated blocks until tp's high watermark is past offset, appended
// at epoch, that is, until every in-sync follower has applied it (what
// Kafka's acks=all waits for), or ctx ends. As for WaitDurable, epoch is
// the epoch of the batch that holds offset, and the wait fails with an
// error matching ErrNotLeader unless the leadership that accepted it is
// the current one and lasts until the offset is replicated: a leader that
// lost its leadership can no longer say what its followers will keep.
func (n *Node) WaitReplicated(ctx context.Context, tp metadata.TopicPartition, epoch int32, offset int64) error {
	return n.leader.WaitReplicated(ctx, tp, epoch, offset)
}
