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

// HighWatermark returns tp's high watermark: the offset below which every
// in-sync follower (see SetInSync) has applied tp's log in this
// leadership, capped by the leader's own log end; with no follower in
// sync, the leader's log end. It is -1 if the engine does not lead tp, or
// while some in-sync follower has not reported progress in this
// leadership. It never goes back within a leadership.
func (l *Leader) HighWatermark(tp metadata.TopicPartition) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	hw, _, _ := l.core.HighWatermark(tp)
	return hw
}

// SetInSync sets the followers of tp whose progress the high watermark
// waits for: Kafka's in-sync replica set, without the leader. Call it when
// the broker shrinks the set (a follower fell behind) or grows it again (a
// follower caught up); BecomeLeader resets it to all of tp's followers.
// Every member must be one of the followers given to BecomeLeader. It
// fails with ErrNotLeader if the engine does not lead tp.
func (l *Leader) SetInSync(tp metadata.TopicPartition, inSync []int32) error {
	var err error
	l.step(func(c *leadcore.Core, now time.Time) { err = c.SetInSync(now, tp, inSync) })
	if err != nil {
		return fmt.Errorf("walstore: set in-sync followers of %s: %w", tp, refusal(err))
	}
	return nil
}

// WaitReplicated blocks until tp's high watermark is past offset, that is,
// until every in-sync follower has applied it (what Kafka's acks=all
// waits for), or ctx ends. It fails with an error matching ErrNotLeader
// if the engine does not lead tp, or if the leadership it found ends
// first: the offset may then never be replicated by this leader.
func (l *Leader) WaitReplicated(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	var gen uint64
	for {
		l.mu.Lock()
		hw, g, ok := l.core.HighWatermark(tp)
		stopped, ch := l.stopped, l.commit.wait()
		l.mu.Unlock()
		switch {
		case stopped:
			return ErrStopped
		case !ok || gen != 0 && g != gen:
			return fmt.Errorf("walstore: waiting for %s offset %d to be replicated: %w", tp, offset, ErrNotLeader)
		case hw > offset:
			return nil
		}
		gen = g
		select {
		case <-ctx.Done():
			return fmt.Errorf("walstore: waiting for %s offset %d to be replicated: %w", tp, offset, ctx.Err())
		case <-ch:
		}
	}
}

// HighWatermark returns tp's high watermark; see Leader.HighWatermark.
func (n *Node) HighWatermark(tp metadata.TopicPartition) int64 { return n.leader.HighWatermark(tp) }

// SetInSync sets tp's in-sync followers; see Leader.SetInSync.
func (n *Node) SetInSync(tp metadata.TopicPartition, inSync []int32) error {
	return n.leader.SetInSync(tp, inSync)
}

// WaitReplicated waits until every in-sync follower has applied tp's
// offset (acks=all); see Leader.WaitReplicated.
func (n *Node) WaitReplicated(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	return n.leader.WaitReplicated(ctx, tp, offset)
}
