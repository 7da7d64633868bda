package walstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
)

// Progress is what a follower has applied of a partition: its log end
// offset and the epoch of its last record, as Kafka's fetch request
// carries them. A follower's Node produces it (NodeConfig.OnProgress); the
// broker delivers it to the Node of Leader, whose RecordProgress judges it.
type Progress struct {
	Partition metadata.TopicPartition
	// Leader is the broker the follower's Node was told leads the
	// partition: where the report goes.
	Leader int32
	// Follower is the reporting broker.
	Follower int32
	// EndOffset is the follower's log end offset: it holds every offset
	// below it.
	EndOffset int64
	// LastEpoch is the leader epoch of the follower's last record; -1
	// for a log that holds no epoch.
	LastEpoch int32
}

// NodeConfig configures a Node. The nested engine configurations tune the
// leader and the follower; their BrokerID, Store, Log, Local, Clock, Seed,
// Logger, OnHealth and OnApplied are the Node's own and must be left
// unset there.
type NodeConfig struct {
	// BrokerID is this broker's id. Must be >= 0.
	BrokerID int32
	// Store reads and writes the object store from this broker's AZ.
	// Required.
	Store ObjectStore
	// Log carries the metadata. Required.
	Log metadata.Log
	// Local is the broker's log. Required.
	Local LocalLog
	// Leader and Follower tune the two engines; zero values are their
	// documented defaults.
	Leader   LeaderConfig
	Follower FollowerConfig
	// OnProgress, if set, is called with a followed partition's progress
	// after each append, when it starts following, and again every
	// Follower.ProgressInterval while its log does not change (see
	// FollowerConfig.OnApplied). The broker delivers it to the Node of
	// Progress.Leader (RecordProgress), which needs it to collect
	// garbage, to advance the high watermark and to republish what a
	// follower lacks. It is called on the engine's goroutine and must not
	// block.
	OnProgress func(Progress)
	// OnHealth, if set, is called when the leader side becomes degraded or
	// recovers (see LeaderConfig.DegradedAfter). It must not block.
	OnHealth func(Health)
	// Clock and Seed make runs reproducible. Default: the wall clock, seed 0.
	Clock Clock
	Seed  uint64
	// Logger receives the node's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c *NodeConfig) validate() error {
	switch {
	case c.BrokerID < 0:
		return fmt.Errorf("walstore: NodeConfig.BrokerID %d is negative", c.BrokerID)
	case c.Store == nil:
		return errors.New("walstore: NodeConfig.Store is required")
	case c.Log == nil:
		return errors.New("walstore: NodeConfig.Log is required")
	case c.Local == nil:
		return errors.New("walstore: NodeConfig.Local is required")
	}
	lc, fc := &c.Leader, &c.Follower
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Leader.BrokerID", lc.BrokerID != 0}, {"Leader.Store", lc.Store != nil}, {"Leader.Log", lc.Log != nil},
		{"Leader.Local", lc.Local != nil}, {"Leader.Clock", lc.Clock != nil}, {"Leader.Seed", lc.Seed != 0},
		{"Leader.Logger", lc.Logger != nil}, {"Leader.OnHealth", lc.OnHealth != nil},
		{"Follower.BrokerID", fc.BrokerID != 0}, {"Follower.Store", fc.Store != nil}, {"Follower.Log", fc.Log != nil},
		{"Follower.Local", fc.Local != nil}, {"Follower.Clock", fc.Clock != nil}, {"Follower.Seed", fc.Seed != 0},
		{"Follower.Logger", fc.Logger != nil}, {"Follower.OnApplied", fc.OnApplied != nil},
	} {
		if f.set {
			return fmt.Errorf("walstore: NodeConfig.%s is the node's own: leave it unset", f.name)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Node is one broker's replication through activetier: its leader engine
// for the partitions the broker leads and its follower engine for those it
// follows, behind the transitions a broker really has. Create it with
// NewNode, drive it with Run, and tell it of every role change:
//
//   - BecomeLeader when the controller makes the broker a partition's
//     leader (Kafka's makeLeader),
//   - BecomeFollower when it makes the broker a follower (makeFollower),
//     and again whenever the broker learns of a later leader epoch,
//   - StopReplica when the broker no longer holds the partition.
//
// Each returns once the new role is in effect; the Node keeps the leader
// and follower sides of a partition from ever acting at once. Between
// them, the broker appends what producers send (Append, WaitDurable),
// relays its followers' progress (OnProgress to RecordProgress) and its
// tiered-storage mark (ReportTiered).
//
// A broker calls the transitions of one partition one at a time, in the
// order its controller decided them; different partitions may change role
// concurrently. The Node runs transitions one after another: one that
// waits (for an append its local log has not finished) makes the others
// wait at most until their own context ends, and one given up before it
// began changes nothing.
type Node struct {
	cfg      NodeConfig
	leader   *Leader
	follower *Follower

	// transitions serializes transitions. A transition may wait long (for
	// an append of the local log), so the others wait for it only as long
	// as their own context allows.
	transitions roleLock
}

// NewNode validates cfg and returns a Node. Nothing runs until Run.
func NewNode(cfg NodeConfig) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	lc, fc := cfg.Leader, cfg.Follower
	lc.BrokerID, lc.Store, lc.Log, lc.Local = cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local
	lc.Clock, lc.Seed, lc.Logger, lc.OnHealth = cfg.Clock, cfg.Seed, cfg.Logger.With("engine", "leader"), cfg.OnHealth
	fc.BrokerID, fc.Store, fc.Log, fc.Local = cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local
	fc.Clock, fc.Seed, fc.Logger, fc.OnApplied = cfg.Clock, cfg.Seed^0xf0110e, cfg.Logger.With("engine", "follower"), cfg.OnProgress
	l, err := NewLeader(lc)
	if err != nil {
		return nil, err
	}
	f, err := NewFollower(fc)
	if err != nil {
		l.release()
		return nil, err
	}
	return &Node{cfg: cfg, leader: l, follower: f, transitions: make(roleLock, 1)}, nil
}

// Run drives both engines until ctx ends, then waits for their goroutines
// and returns nil. Call it once.
func (n *Node) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = n.leader.Run(ctx) }()
	go func() { defer wg.Done(); errs[1] = n.follower.Run(ctx) }()
	wg.Wait()
	return errors.Join(errs...)
}

// BecomeLeader makes this broker tp's leader at epoch, with followers as
// the partition's follower brokers, and returns once appends are accepted:
// the follower side has stopped (no append of its own to tp is in flight),
// and the leader side has begun (see Leader.BecomeLeader for what it
// publishes and republishes in the background, and for republishFrom:
// the lowest offset some follower may lack, or -1 if every follower holds
// the whole log). Calling it again at a later epoch without a role change
// in between continues the same leadership; at the same epoch it updates
// the followers.
func (n *Node) BecomeLeader(ctx context.Context, tp metadata.TopicPartition, epoch int32, followers []int32, republishFrom int64) error {
	if err := n.transitions.lockContext(ctx); err != nil {
		return fmt.Errorf("walstore: BecomeLeader %s: waiting for another transition: %w", tp, err)
	}
	defer n.transitions.unlock()
	if err := n.follower.Unfollow(ctx, tp); err != nil {
		return err
	}
	return n.leader.BecomeLeader(ctx, tp, epoch, followers, republishFrom)
}

// BecomeFollower makes this broker a follower of tp, whose leader at epoch
// is broker leader, and returns once in effect: the leader side has
// resigned (its unpublished data of tp is withheld, and WaitDurable calls
// for it fail with ErrNotLeader) and the follower side replicates tp.
// Call it again when the broker learns of a later epoch: the follower
// acts on epoch markers only up to the epoch its broker knows.
func (n *Node) BecomeFollower(ctx context.Context, tp metadata.TopicPartition, epoch, leader int32) error {
	if err := n.transitions.lockContext(ctx); err != nil {
		return fmt.Errorf("walstore: BecomeFollower %s: waiting for another transition: %w", tp, err)
	}
	defer n.transitions.unlock()
	n.leader.Resign(tp)
	return n.follower.Follow(ctx, tp, epoch, leader)
}

// StopReplica makes this broker stop replicating tp, in either role, and
// returns once no append to tp by the Node is in flight.
func (n *Node) StopReplica(ctx context.Context, tp metadata.TopicPartition) error {
	if err := n.transitions.lockContext(ctx); err != nil {
		return fmt.Errorf("walstore: StopReplica %s: waiting for another transition: %w", tp, err)
	}
	defer n.transitions.unlock()
	n.leader.Resign(tp)
	return n.follower.Unfollow(ctx, tp)
}

// Append queues a batch of a partition this broker leads; see
// Leader.Append.
func (n *Node) Append(ctx context.Context, tp metadata.TopicPartition, b combiner.Batch) error {
	return n.leader.Append(ctx, tp, b)
}

// WaitDurable waits until tp's data up to and including offset, appended
// at epoch, is stored and published (acks-on-upload); see
// Leader.WaitDurable.
func (n *Node) WaitDurable(ctx context.Context, tp metadata.TopicPartition, epoch int32, offset int64) error {
	return n.leader.WaitDurable(ctx, tp, epoch, offset)
}

// DurableOffset returns the offset below which tp's log is durable in this
// broker's leadership, or -1 if the broker does not lead tp.
func (n *Node) DurableOffset(tp metadata.TopicPartition) int64 {
	return n.leader.DurableOffset(tp)
}

// Republish copies tp's local log from offset from into this broker's
// bucket and publishes it, for followers that cannot read the earlier
// objects (an AZ outage); see Leader.Republish.
func (n *Node) Republish(ctx context.Context, tp metadata.TopicPartition, from int64) error {
	return n.leader.Republish(ctx, tp, from)
}

// RecordProgress takes a follower's progress, delivered by the broker
// from that follower's OnProgress; see Leader.RecordProgress.
func (n *Node) RecordProgress(p Progress) { n.leader.RecordProgress(p) }

// ReportTiered records that tp's records below offset are in long-term
// storage or past retention; see Leader.ReportTiered.
func (n *Node) ReportTiered(tp metadata.TopicPartition, offset int64) {
	n.leader.ReportTiered(tp, offset)
}

// CollectGarbage deletes this broker's objects that every follower has
// applied; Run does it every LeaderConfig.GCInterval.
func (n *Node) CollectGarbage(ctx context.Context) (int, error) {
	return n.leader.CollectGarbage(ctx)
}

// Sweep deletes this broker's objects older than age that no leadership
// of this Node still needs; see Leader.Sweep.
func (n *Node) Sweep(ctx context.Context, age time.Duration) (int, error) {
	return n.leader.Sweep(ctx, age)
}

// MetadataLowMarks returns, per metadata partition, the lowest offset this
// broker still needs kept; see Leader.MetadataLowMarks and TrimMetadata.
func (n *Node) MetadataLowMarks() map[int32]int64 { return n.leader.MetadataLowMarks() }

// Health returns the leader side's health.
func (n *Node) Health() Health { return n.leader.Health() }

// NodeStats is a snapshot of a Node's counters.
type NodeStats struct {
	Leader   LeaderStats
	Follower FollowerStats
}

// Stats returns a snapshot of both engines' counters.
func (n *Node) Stats() NodeStats {
	return NodeStats{Leader: n.leader.Stats(), Follower: n.follower.Stats()}
}
