package walstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
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
	Store storage.ObjectStore
	// Log carries the metadata. Required.
	Log metadata.Log
	// Local is the broker's log. Required.
	Local storage.LocalLog
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
	// OnHealth, if set, is called with the Node's health (Node.Health)
	// when it changes: the leader side becomes degraded or recovers (see
	// LeaderConfig.DegradedAfter), or a partition begins or stops failing
	// on either side (Health.Partitions). Calls are made one at a time,
	// the last with the current health. It must not block, nor call the
	// Node's transitions.
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
		{"Follower.Logger", fc.Logger != nil}, {"Follower.OnApplied", fc.OnApplied != nil}, {"Follower.OnHealth", fc.OnHealth != nil},
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
// Each returns nil once the new role is in effect; the Node keeps the
// leader and follower sides of a partition from ever acting at once.
// Between them, the broker appends what producers send (Append,
// WaitDurable, WaitReplicated), relays its followers' progress
// (OnProgress to RecordProgress) and its tiered-storage mark
// (ReportTiered), and watches Health.
//
// A transition is all or nothing. It validates its arguments and
// prepares (reads what it needs of the local log, waits for its turn and
// for the engines to finish the local-log call of its partition they are
// making) before it changes anything; one that is refused or gives up returns a
// *TransitionError, and the partition's previous role stays in effect
// (TransitionError.InEffect, Role). The one step that cannot be undone,
// the leader side resigning (its unpublished data is withheld for good),
// comes last, when nothing is left that can fail or wait.
//
// What a transition promises whenever it is called:
//
//   - Before Run: it takes effect; the engines begin the work it implies
//     (publishing a leadership's markers, loading a followed partition's
//     log) when Run starts.
//   - After Run has returned: BecomeLeader and BecomeFollower are refused
//     with an error matching ErrStopped; StopReplica succeeds (unless a
//     local-log call of the partition is stuck, below).
//   - With a context that has already ended: it is refused, with an
//     error matching the context's error; a context that ends while the
//     transition waits makes it give up the same way. Once it no longer
//     waits, it completes whatever its context does.
//   - Concurrently with another transition: the Node runs the
//     transitions of a partition one after another, and those of
//     different partitions independently; a transition waits for its
//     turn, and for a local-log call of its partition in flight (an
//     append, up to FollowerConfig.LocalTimeout), only as long as its
//     context allows. A broker calls the transitions of one partition
//     one at a time, in the order its controller decided them; if two
//     race, the Node runs them in some order, each all or nothing.
//   - While a local-log call of the partition hangs: the transition gives
//     up when its context ends, with a *DependencyError naming the call
//     (matching storage.ErrUnavailable and the context's error); the call is
//     left running, and until it returns every transition of the
//     partition is refused at once with such an error, since the Node
//     cannot tell what the call will still do. Other partitions are not
//     held up (see LocalLog).
//   - After a refusal: the previous role goes on as if the call had not
//     been made; the broker may call again.
type Node struct {
	cfg      NodeConfig
	leader   *Leader
	follower *Follower

	// locals holds a partition for each transition, which thereby runs
	// alone among the partition's transitions and local-log calls, and
	// bounds those calls (see localCalls): shared with both engines, so a
	// transition waits for the calls of its own partition only, and one
	// whose log hangs holds up nothing else.
	locals *localCalls

	rolesMu sync.Mutex
	roles   map[metadata.TopicPartition]RoleState // the roles in effect; NoRole is absent

	reportMu sync.Mutex // serializes OnHealth calls
	reported Health     // the health last given to OnHealth
	// ran is set by the first Run, so that a second one leaves the
	// engines to it rather than drive one of them each.
	ran atomic.Bool
}

// Role is what a Node does for a partition.
type Role int

const (
	// NoRole: the Node neither leads nor follows the partition.
	NoRole Role = iota
	// Leading: the Node leads the partition.
	Leading
	// Following: the Node follows the partition.
	Following
)

// String returns "none", "leading" or "following".
func (r Role) String() string {
	switch r {
	case Leading:
		return "leading"
	case Following:
		return "following"
	}
	return "none"
}

// RoleState is a partition's role at a Node, as the last transition that
// took effect left it.
type RoleState struct {
	Role Role
	// Epoch is the leader epoch the role is at; -1 for NoRole.
	Epoch int32
	// Leader is the partition's leader broker as the role knows it: this
	// broker while leading; -1 for NoRole.
	Leader int32
}

// String says the role in a few words, as TransitionError's message does.
func (s RoleState) String() string {
	switch s.Role {
	case Leading:
		return fmt.Sprintf("leading at epoch %d", s.Epoch)
	case Following:
		return fmt.Sprintf("following broker %d at epoch %d", s.Leader, s.Epoch)
	}
	return "neither leading nor following"
}

// noRole is the RoleState of a partition the Node neither leads nor
// follows.
var noRole = RoleState{Role: NoRole, Epoch: -1, Leader: -1}

// TransitionError is a transition of a Node (BecomeLeader,
// BecomeFollower, StopReplica) that did not take effect: it was refused
// (an invalid argument, a stale epoch, a local log that failed while it
// prepared, a Node whose Run has returned) or gave up (its context ended
// while it waited). Nothing changed: InEffect is the partition's role, the
// same as before the call. Err says why; errors.Is and errors.As see
// through to it (ErrStaleEpoch, ErrStopped, context.DeadlineExceeded, a
// *DependencyError, ...).
type TransitionError struct {
	// Transition is the call: "BecomeLeader", "BecomeFollower" or
	// "StopReplica".
	Transition string
	Partition  metadata.TopicPartition
	// InEffect is the partition's role, which the call left as it was.
	InEffect RoleState
	Err      error
}

// Error says which transition did not take effect, the role still in
// effect, and why.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("walstore: %s %s did not take effect; still %s: %v", e.Transition, e.Partition, e.InEffect, e.Err)
}

// Unwrap returns why the transition did not take effect.
func (e *TransitionError) Unwrap() error { return e.Err }

// NewNode validates cfg and returns a Node. Nothing runs until Run.
func NewNode(cfg NodeConfig) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, roles: make(map[metadata.TopicPartition]RoleState)}
	lc, fc := cfg.Leader, cfg.Follower
	lc.BrokerID, lc.Store, lc.Log, lc.Local = cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local
	lc.Clock, lc.Seed, lc.Logger = cfg.Clock, cfg.Seed, cfg.Logger.With("engine", "leader")
	fc.BrokerID, fc.Store, fc.Log, fc.Local = cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local
	fc.Clock, fc.Seed, fc.Logger, fc.OnApplied = cfg.Clock, cfg.Seed^0xf0110e, cfg.Logger.With("engine", "follower"), cfg.OnProgress
	if cfg.OnHealth != nil {
		// Either engine's news is the Node's: OnHealth gets the health of
		// both.
		lc.OnHealth = func(Health) { n.reportHealth() }
		fc.OnHealth = lc.OnHealth
	}
	l, err := NewLeader(lc)
	if err != nil {
		return nil, err
	}
	f, err := NewFollower(fc)
	if err != nil {
		l.release()
		return nil, err
	}
	n.leader, n.follower = l, f
	n.locals = f.locals
	l.locals = n.locals
	if cfg.OnHealth != nil {
		n.locals.stuckChanged = n.reportHealth
	}
	return n, nil
}

// Run drives both engines until ctx ends, then waits for their goroutines
// and returns nil. Call it once: a second call, while the first runs or
// after it returned, returns at once an error wrapping ErrStopped and
// changes nothing.
func (n *Node) Run(ctx context.Context) error {
	if !n.ran.CompareAndSwap(false, true) {
		return fmt.Errorf("walstore: node: Run called twice: %w", ErrStopped)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = n.leader.Run(ctx) }()
	go func() { defer wg.Done(); errs[1] = n.follower.Run(ctx) }()
	wg.Wait()
	return errors.Join(errs...)
}

// Role returns tp's role at this Node: what the last transition of tp that
// took effect made it.
func (n *Node) Role(tp metadata.TopicPartition) RoleState {
	n.rolesMu.Lock()
	defer n.rolesMu.Unlock()
	if s, ok := n.roles[tp]; ok {
		return s
	}
	return noRole
}

// transition runs transition name of tp: once it is tp's turn (no other
// transition of tp, and no local-log call of tp, is in flight), do
// validates, prepares and, only if nothing can fail any more, changes the
// engines, returning the new role; or it returns an error having changed
// nothing. It waits for its turn as long as ctx allows, and is refused at
// once while a local-log call of tp that was given up on has not
// returned: the Node cannot tell what that call will still do.
func (n *Node) transition(ctx context.Context, name string, tp metadata.TopicPartition, do func(in RoleState) (RoleState, error)) error {
	refuse := func(err error) error {
		return &TransitionError{Transition: name, Partition: tp, InEffect: n.Role(tp), Err: err}
	}
	// A context already ended is refused every time: hold would pick at
	// random between it and a free partition.
	if err := ctx.Err(); err != nil {
		return refuse(err)
	}
	if err := n.locals.hold(ctx, tp, ""); err != nil {
		return refuse(err)
	}
	defer n.locals.release(tp)
	out, err := do(n.Role(tp))
	if err != nil {
		return refuse(err)
	}
	n.rolesMu.Lock()
	if out.Role == NoRole {
		delete(n.roles, tp)
	} else {
		n.roles[tp] = out
	}
	n.rolesMu.Unlock()
	return nil
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
//
// It is refused, and tp goes on as it was (see Node), for invalid
// arguments (this broker among the followers, a negative id or epoch), an
// epoch not above one this Node led tp at or follows it at
// (ErrStaleEpoch), and a local log whose EndOffset fails, or does not
// answer before ctx ends (a *DependencyError naming LocalLog.EndOffset
// that matches ctx's error), or has an earlier call given up on that has
// not returned (one matching storage.ErrUnavailable). It waits for the follower
// engine to finish the local-log call of tp it may be making (as long as
// ctx allows), validates, then, with tp's local-log calls held, reads the
// log end, begins the leadership and only then stops following, which
// cannot fail.
func (n *Node) BecomeLeader(ctx context.Context, tp metadata.TopicPartition, epoch int32, followers []int32, republishFrom int64) error {
	return n.transition(ctx, "BecomeLeader", tp, func(in RoleState) (RoleState, error) {
		if in.Role == Following && epoch <= in.Epoch {
			return in, fmt.Errorf("%w: epoch %d is not above epoch %d, which broker %d leads", ErrStaleEpoch, epoch, in.Epoch, in.Leader)
		}
		if err := n.leader.checkLeader(tp, epoch, followers); err != nil {
			return in, err
		}
		// Read holding neither engine: only tp waits for it. The
		// follower engine makes no call of tp meanwhile, so the log end
		// is still the log's when the leadership begins.
		leo, err := n.leader.endOffset(ctx, tp)
		if err == nil {
			// Answered as ctx ended: it gave up all the same, as it would
			// a moment later.
			err = ctx.Err()
		}
		if err != nil {
			return in, err
		}
		err = n.follower.withCore(ctx, func(c *followcore.Core, now time.Time) error {
			if err := n.leader.begin(tp, epoch, followers, republishFrom, leo); err != nil {
				return err
			}
			n.follower.unfollowLocked(now, tp)
			return nil
		})
		return RoleState{Role: Leading, Epoch: epoch, Leader: n.cfg.BrokerID}, err
	})
}

// BecomeFollower makes this broker a follower of tp, whose leader at epoch
// is broker leader, and returns once in effect: the leader side has
// resigned (its unpublished data of tp is withheld, and WaitDurable and
// WaitReplicated calls for it, and Appends waiting for buffer space, fail
// with ErrNotLeader) and the follower side replicates tp. Call it again
// when the broker learns of a later epoch: the follower acts on epoch
// markers only up to the epoch its broker knows.
//
// It is refused, and tp goes on as it was (see Node), for invalid
// arguments (this broker as the leader, a negative id or epoch) and an
// epoch below the one it follows tp at. It gives up only while it waits
// for its turn or for the engines to finish the local-log call of tp they
// may be making, and is refused at once while such a call given up on
// has not returned; with the follower engine held it validates and
// follows tp, and resigns last: resigning cannot be undone, and nothing
// after it can fail or wait.
func (n *Node) BecomeFollower(ctx context.Context, tp metadata.TopicPartition, epoch, leader int32) error {
	return n.transition(ctx, "BecomeFollower", tp, func(in RoleState) (RoleState, error) {
		err := n.follower.withCore(ctx, func(c *followcore.Core, now time.Time) error {
			if n.leader.isStopped() {
				return ErrStopped
			}
			// Refused here, it changed nothing. The follower side acts
			// on tp only once the engine is released, after the resign.
			if err := c.Follow(now, tp, epoch, leader); err != nil {
				return err
			}
			n.leader.Resign(tp)
			return nil
		})
		return RoleState{Role: Following, Epoch: epoch, Leader: leader}, err
	})
}

// StopReplica makes this broker stop replicating tp, in either role, and
// returns once no append to tp by the Node is in flight. It is refused for
// a partition no transition could have given a role (see
// metadata.TopicPartition.Validate: a topic name Kafka would refuse
// matches metadata.ErrInvalidTopicName). It gives up only while it waits
// for its turn or for the engines to finish the local-log call of tp they
// may be making, and is refused at once while such a call given up on has
// not returned (it may still append); after that nothing can fail: it
// stops following tp and resigns its leadership. After Run has returned it
// succeeds at once, but for that refusal: nothing is in flight, and
// nothing will be.
func (n *Node) StopReplica(ctx context.Context, tp metadata.TopicPartition) error {
	return n.transition(ctx, "StopReplica", tp, func(in RoleState) (RoleState, error) {
		if err := tp.Validate(); err != nil {
			return in, err
		}
		err := n.follower.withCore(ctx, func(_ *followcore.Core, now time.Time) error {
			n.follower.unfollowLocked(now, tp)
			n.leader.Resign(tp)
			return nil
		})
		if errors.Is(err, ErrStopped) {
			err = nil
		}
		return noRole, err
	})
}

// Append queues a batch of a partition this broker leads; see
// Leader.Append. Before Run it is accepted while the buffer has room;
// after Run has returned it fails with ErrStopped. Concurrently with a
// transition of tp, the leadership in effect when it is made accepts it,
// or it fails with ErrNotLeader; one blocked on a full buffer fails with
// ErrNotLeader when the leadership it waits in ends. ctx bounds only the
// wait for buffer space.
func (n *Node) Append(ctx context.Context, tp metadata.TopicPartition, b storage.Batch) error {
	return n.leader.Append(ctx, tp, b)
}

// WaitDurable waits until tp's data up to and including offset, appended
// at epoch, is stored and published (acks-on-upload); see
// Leader.WaitDurable. It fails with ErrNotLeader once the leadership that
// accepted the data ends, even if another begins (a transition made
// concurrently ends it or not, all or nothing), and with ErrStopped after
// Run has returned; with a context that has ended, it returns nil if the
// data is durable, and the context's error otherwise.
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

// Health returns the Node's health: the leader side's judgement of its
// uploads and publishes (Degraded, Since, Err), and the partitions whose
// replication a failure has stopped on either side (Partitions,
// FailingPartitions; see PartitionError).
func (n *Node) Health() Health {
	h, fh := n.leader.Health(), n.follower.Health()
	stuck, counted := n.stuckFailures()
	if fh.FailingPartitions == 0 && len(stuck) == 0 {
		return h
	}
	// Each side lists its first partitions: the first of all are among
	// them. A partition with a stuck call is listed as stuck, whatever
	// its engine says meanwhile, so that its entry stays the same while
	// the call runs.
	listed := slices.Concat(h.Partitions, fh.Partitions)
	listed = slices.DeleteFunc(listed, func(e *PartitionError) bool {
		return slices.ContainsFunc(stuck, func(s *PartitionError) bool { return s.Partition == e.Partition })
	})
	h.Partitions = firstFailing(append(listed, stuck...))
	h.FailingPartitions += fh.FailingPartitions + len(stuck) - counted
	return h
}

// stuckFailures returns the partitions this Node leads or follows whose
// local-log call was given up on and has not returned: every other call
// of such a partition is refused until that one returns, so its
// replication has stopped, even when the call given up on was the
// broker's own (a Republish whose context ended) and no engine retries
// anything. counted is how many of them an engine reports too.
func (n *Node) stuckFailures() (stuck []*PartitionError, counted int) {
	for _, s := range n.locals.stuckCalls() {
		role := n.Role(s.tp).Role
		if role == NoRole {
			continue
		}
		if n.leader.PartitionError(s.tp) != nil || n.follower.PartitionError(s.tp) != nil {
			counted++
		}
		stuck = append(stuck, s.failure(role))
	}
	return stuck, counted
}

// PartitionError returns why this broker does not replicate tp, in the
// role it has (a *PartitionError naming the failing dependency), or nil
// if it does, or neither leads nor follows tp.
func (n *Node) PartitionError(tp metadata.TopicPartition) error {
	if s, ok := n.locals.stuckOf(tp); ok {
		if role := n.Role(tp).Role; role != NoRole {
			return s.failure(role)
		}
	}
	if err := n.leader.PartitionError(tp); err != nil {
		return err
	}
	return n.follower.PartitionError(tp)
}

// reportHealth calls OnHealth with the Node's health if it says anything
// new, one call at a time, so that the last call is of the current health.
func (n *Node) reportHealth() {
	n.reportMu.Lock()
	defer n.reportMu.Unlock()
	h := n.Health()
	if sameHealth(h, n.reported) {
		return
	}
	n.reported = h
	n.cfg.OnHealth(h)
}

// NodeStats is a snapshot of a Node's counters.
type NodeStats struct {
	Leader   LeaderStats
	Follower FollowerStats
	// Health is the Node's health, both sides (Node.Health).
	Health Health
}

// Stats returns a snapshot of both engines' counters.
func (n *Node) Stats() NodeStats {
	return NodeStats{Leader: n.leader.Stats(), Follower: n.follower.Stats(), Health: n.Health()}
}
