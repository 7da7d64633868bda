package walstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/internal/rolecore"
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

// NodeConfig configures a Node: its dependencies, then how its leader
// side and its follower side are tuned. Zero durations and sizes mean the
// documented default; negative ones are rejected by NewNode.
type NodeConfig struct {
	// BrokerID is this broker's id; its follower side reads metadata
	// partition BrokerID % Log.Partitions(). Must be >= 0.
	BrokerID int32
	// Store reads and writes the object store from this broker's AZ: the
	// leader side writes its objects there, the follower side reads the
	// objects entries name. Required.
	Store storage.ObjectStore
	// Log carries the metadata. Required.
	Log metadata.Log
	// Local is the broker's log: the follower side appends to it and
	// truncates it, the leader side reads it to take partitions up and to
	// republish. Required.
	Local storage.LocalLog
	// OnProgress, if set, is called with a followed partition's progress
	// after each append and truncation, once the partition starts from its
	// local log, when its leader or epoch changes, and again every
	// ProgressInterval while its log does not change (a follower that
	// holds everything appends nothing, nor does one that nothing
	// continues, and its leader must still learn where it is). The broker
	// delivers it to the Node of Progress.Leader (RecordProgress), which
	// needs it to collect garbage, to advance the high watermark and to
	// republish what a follower lacks. It is called on the engine's
	// goroutine and must not block.
	OnProgress func(Progress)
	// OnHealth, if set, is called with the Node's health (Node.Health)
	// when it changes: the leader side becomes degraded or recovers (see
	// DegradedAfter), or a partition begins or stops failing on either
	// side (Health.Partitions). Calls are made one at a time, the last
	// with the current health. It must not block, nor call the Node's
	// transitions.
	OnHealth func(Health)
	// OnDigestMismatch, if set, is called when the follower side finds
	// that a followed partition's local log differs from its leader's:
	// the rolling digest of what it applied (package digest) is not the
	// one the leader published at the same offset. The Mismatch names the
	// partition, the publisher's epoch and the range of offsets where the
	// logs differ. Replication goes on (the local log is the broker's to
	// repair or rebuild); FollowerStats counts the checks and mismatches
	// and keeps the latest. It is called on the engine's goroutine and
	// must not block.
	OnDigestMismatch func(*digest.Mismatch)
	// Clock and Seed make runs reproducible. Default: the wall clock, seed 0.
	Clock Clock
	Seed  uint64
	// Logger receives the node's logs. Default slog.Default().
	Logger *slog.Logger
	// Backoff paces retries of uploads, publishes, fetches and metadata
	// reads.
	Backoff Backoff

	// The leader side: how appended batches become objects and entries.

	// KeyPrefix is prepended to object keys.
	KeyPrefix string
	// Codec for sections. Default none.
	Codec metadata.Codec
	// Interval is the longest a batch waits before its object is cut.
	// Default 100ms.
	Interval time.Duration
	// WaitCutDelay, if positive, is the longest a batch waits before its
	// object is cut once a WaitDurable or WaitReplicated call waits for
	// it: the acknowledgement of a producer that waits (acks=all) then
	// costs about one PUT instead of up to Interval and a PUT, for at
	// most one more PUT per WaitCutDelay while callers keep waiting
	// (see costmodel's WaitCut). The waits of one WaitCutDelay share a
	// cut. 2-5ms suits S3 Express One Zone. It may not exceed Interval.
	// Default 0: cuts at Interval, as without waiters.
	WaitCutDelay time.Duration
	// NoDigests, if set, stops the leader side publishing its logs'
	// rolling digests (package digest) with its entries, so that its
	// metadata stays in a message version a broker of the release before
	// digests reads: set it on every Node until all of them run a
	// release that checks digests, then clear it. Followers check what
	// is published either way; with nothing published they check
	// nothing. Default false: digests are published.
	NoDigests bool
	// ObjectBytes is the size at which an object is cut early. Default 4 MiB.
	ObjectBytes int
	// MaxPartitions caps the partitions in one object. Default 1000.
	MaxPartitions int
	// BufferBytes bounds the batch bytes appended but not yet published:
	// buffered, uploading, or stored and waiting for the metadata log.
	// Default 64 MiB.
	BufferBytes int
	// Overflow is the policy when BufferBytes is reached. Default Block.
	Overflow Overflow
	// MaxInflight bounds concurrent uploads. Default 4.
	MaxInflight int
	// DegradedAfter is how long an upload or a metadata publish may go
	// without succeeding, whether its attempts fail or never return, before
	// the Node reports itself degraded (the broker's cue to fall back to
	// ordinary replication). Default 5s.
	DegradedAfter time.Duration
	// RequestTimeout bounds one attempt of a PUT or of a metadata append;
	// an attempt that runs out counts as a transient failure and is
	// retried. It bounds the leader side's LocalLog calls too, whether or
	// not the log observes its context: each Read of a republish, the
	// Epochs and EndOffset BecomeLeader reads to take its partition up,
	// and the Epochs RecordProgress reads to judge a report. Default 10s.
	RequestTimeout time.Duration
	// UploadHedge is when an object upload that has not answered is
	// attempted again alongside it (once per object; see HedgeConfig).
	// Each attempt stores the same bytes under a fresh key, only if no
	// object has it, so none overwrites another; only the first to succeed
	// is published, and the other's object, if it lands, is named by no
	// entry and deleted by Sweep. Hedging is on by default.
	UploadHedge HedgeConfig
	// MarkerRefresh is how often the epoch markers of every led partition
	// are published again, so that trimming the metadata log never leaves a
	// restarted follower without them. Default 30s.
	MarkerRefresh time.Duration
	// GCInterval is how often Run collects garbage. Default 1s.
	GCInterval time.Duration
	// RetainFor keeps every object at least this long after its entries
	// were published, even once every follower has applied it. Direct
	// readers (package directread) serve consumers from the objects and
	// trail the followers by their poll interval and a GET; an object
	// deleted before they read it sends them back to the broker
	// (directread.GoneError). Storage for the extra time is the price: at
	// S3 Express One Zone's storage rate, keeping 10 s of a 100 MB/s
	// stream costs well under a dollar a month. Default 0: an object goes
	// as soon as every follower applied it and the tiered mark passed it.
	RetainFor time.Duration

	// The follower side: how entries are read, fetched and appended.

	// FetchConcurrency bounds concurrent GETs. Default 8.
	FetchConcurrency int
	// HedgeAfter is how long a fetch may go unanswered before its bucket
	// is treated as backing off: entries it holds may then be fetched from
	// copies in other buckets (a republishing leader's), rather than wait
	// for a request to an unreachable AZ to time out. Default 1s.
	HedgeAfter time.Duration
	// FetchHedge is when a ranged GET that has not answered is sent again
	// to the same bucket. Hedging is on by default.
	FetchHedge HedgeConfig
	// FetchTimeout bounds one fetch (a ranged GET, and the per-section
	// reads it falls back to). Default 30s.
	FetchTimeout time.Duration
	// LocalTimeout bounds each LocalLog call the follower side makes
	// (Append, Truncate, Read, EndOffset, Epochs), whether or not the log
	// observes its context: the engine appends on one goroutine, so a
	// partition whose log stops answering would otherwise hold up every
	// other. One that runs out counts as a failure of that partition's
	// log, which rests; a call that has still not returned is left
	// running, and the partition's later calls fail at once until it
	// returns (see LocalLog). Each call has at least LocalTimeout and at
	// most LocalTimeout/64 more: calls made in quick succession share one
	// deadline, which spares a timer per append. Default 30s.
	LocalTimeout time.Duration
	// CoalesceGap: see ManagerConfig.CoalesceGap.
	CoalesceGap int64
	// Readahead is how many entries per partition are fetched ahead of the
	// one being applied. Default 16.
	Readahead int
	// ReadBatch is how many metadata records one read asks for. Default 256.
	ReadBatch int
	// MaxHeld bounds the entries held in memory waiting for a gap to
	// fill or a marker to arrive. Past it, the entries furthest ahead of
	// their partition's log end are forgotten, and the retained metadata
	// is read again once the follower has nothing else to do. Default
	// 100,000 (tens of MB).
	MaxHeld int
	// PollInterval is the pause after a metadata read that found nothing
	// and did not wait itself. Default 10ms.
	PollInterval time.Duration
	// ProgressInterval is how often a partition whose log does not change
	// reports its progress again (OnProgress): what it costs is a report
	// per followed partition per interval; what it bounds is how long a
	// leader that missed a report (made before it knew the follower)
	// takes to learn where the follower is. Default 1s.
	ProgressInterval time.Duration
}

// validate checks c and applies its defaults.
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
	case c.Log.Partitions() <= 0:
		return fmt.Errorf("walstore: NodeConfig.Log: %w", &DependencyError{Dependency: "metadata.Log.Partitions",
			Err: fmt.Errorf("%w: %d partitions", ErrContractViolation, c.Log.Partitions())})
	case !c.Codec.Valid():
		return fmt.Errorf("walstore: NodeConfig.Codec %v is not a known codec", c.Codec)
	case c.Overflow != Block && c.Overflow != Reject:
		return fmt.Errorf("walstore: NodeConfig.Overflow %d is not Block or Reject", c.Overflow)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Backoff.Initial", int64(c.Backoff.Initial)}, {"Backoff.Max", int64(c.Backoff.Max)},
		{"Interval", int64(c.Interval)}, {"WaitCutDelay", int64(c.WaitCutDelay)}, {"ObjectBytes", int64(c.ObjectBytes)},
		{"MaxPartitions", int64(c.MaxPartitions)}, {"BufferBytes", int64(c.BufferBytes)},
		{"MaxInflight", int64(c.MaxInflight)}, {"DegradedAfter", int64(c.DegradedAfter)},
		{"MarkerRefresh", int64(c.MarkerRefresh)}, {"GCInterval", int64(c.GCInterval)}, {"RetainFor", int64(c.RetainFor)},
		{"RequestTimeout", int64(c.RequestTimeout)},
		{"FetchConcurrency", int64(c.FetchConcurrency)}, {"Readahead", int64(c.Readahead)},
		{"ReadBatch", int64(c.ReadBatch)}, {"PollInterval", int64(c.PollInterval)},
		{"MaxHeld", int64(c.MaxHeld)}, {"HedgeAfter", int64(c.HedgeAfter)},
		{"FetchTimeout", int64(c.FetchTimeout)}, {"LocalTimeout", int64(c.LocalTimeout)}, {"ProgressInterval", int64(c.ProgressInterval)},
	} {
		if f.v < 0 {
			return fmt.Errorf("walstore: NodeConfig.%s %d is negative", f.name, f.v)
		}
	}
	c.Backoff = c.Backoff.withDefaults()
	c.Interval = orDefault(c.Interval, 100*time.Millisecond)
	c.ObjectBytes = orDefault(c.ObjectBytes, 4<<20)
	c.MaxPartitions = orDefault(c.MaxPartitions, 1000)
	c.BufferBytes = orDefault(c.BufferBytes, 64<<20)
	c.MaxInflight = orDefault(c.MaxInflight, 4)
	c.DegradedAfter = orDefault(c.DegradedAfter, 5*time.Second)
	c.MarkerRefresh = orDefault(c.MarkerRefresh, 30*time.Second)
	c.GCInterval = orDefault(c.GCInterval, time.Second)
	c.RequestTimeout = orDefault(c.RequestTimeout, 10*time.Second)
	c.FetchConcurrency = orDefault(c.FetchConcurrency, 8)
	c.Readahead = orDefault(c.Readahead, 16)
	c.ReadBatch = orDefault(c.ReadBatch, 256)
	c.MaxHeld = orDefault(c.MaxHeld, 100_000)
	c.HedgeAfter = orDefault(c.HedgeAfter, time.Second)
	c.FetchTimeout = orDefault(c.FetchTimeout, 30*time.Second)
	c.LocalTimeout = orDefault(c.LocalTimeout, 30*time.Second)
	c.PollInterval = orDefault(c.PollInterval, 10*time.Millisecond)
	c.ProgressInterval = orDefault(c.ProgressInterval, time.Second)
	if c.WaitCutDelay > c.Interval {
		return fmt.Errorf("walstore: NodeConfig.WaitCutDelay %v exceeds Interval %v, which cuts first", c.WaitCutDelay, c.Interval)
	}
	if c.ObjectBytes > c.BufferBytes {
		return fmt.Errorf("walstore: NodeConfig.ObjectBytes %d exceeds BufferBytes %d", c.ObjectBytes, c.BufferBytes)
	}
	for _, h := range []struct {
		name string
		cfg  HedgeConfig
	}{{"UploadHedge", c.UploadHedge}, {"FetchHedge", c.FetchHedge}} {
		if _, err := h.cfg.policy(h.name); err != nil {
			return err
		}
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
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
//     append, up to NodeConfig.LocalTimeout), only as long as its
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
	leader   *leaderEngine
	follower *followerEngine

	// locals holds a partition for each transition, which thereby runs
	// alone among the partition's transitions and local-log calls, and
	// bounds those calls (see localCalls): shared with both engines, so a
	// transition waits for the calls of its own partition only, and one
	// whose log hangs holds up nothing else.
	locals *localCalls

	rolesMu sync.Mutex
	roles   rolecore.Roles // the roles in effect
	// rules are the transitions' rules, which the Node drives on its
	// engines (nodeCores).
	rules rolecore.Rules

	reportMu sync.Mutex // serializes OnHealth calls
	reported Health     // the health last given to OnHealth
	// ran is set by the first Run, so that a second one leaves the
	// engines to it rather than drive one of them each.
	ran atomic.Bool
}

// Role is what a Node does for a partition: NoRole, Leading or
// Following. It is the type of internal/rolecore, where the transitions'
// rules are defined once for the Node and the simulation that checks it,
// under walstore's name.
type Role = rolecore.Role

// The roles.
const (
	// NoRole: the Node neither leads nor follows the partition.
	NoRole = rolecore.NoRole
	// Leading: the Node leads the partition.
	Leading = rolecore.Leading
	// Following: the Node follows the partition.
	Following = rolecore.Following
)

// RoleState is a partition's role at a Node, as the last transition that
// took effect left it: its Role, the leader Epoch it is at (-1 for
// NoRole) and the Leader broker as the role knows it (this broker while
// leading; -1 for NoRole). It is internal/rolecore's, under walstore's
// name; its String says the role in a few words, as TransitionError's
// message does.
type RoleState = rolecore.RoleState

// noRole is the RoleState of a partition the Node neither leads nor
// follows.
var noRole = rolecore.None

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
	n := &Node{cfg: cfg, roles: make(rolecore.Roles), rules: rolecore.Rules{BrokerID: cfg.BrokerID, StaleEpoch: ErrStaleEpoch}}
	var onHealth func(Health)
	if cfg.OnHealth != nil {
		// Either side's news is the Node's: OnHealth gets the health of
		// both.
		onHealth = func(Health) { n.reportHealth() }
	}
	l, err := newLeaderEngine(&n.cfg, onHealth)
	if err != nil {
		return nil, err
	}
	f, err := newFollowerEngine(&n.cfg, onHealth)
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
// and returns nil. A ctx already ended stops them at once, and the
// garbage collections called before Run end with ErrStopped. Call it
// once: a second call, while the first runs or after it returned, returns
// at once an error wrapping ErrStopped and changes nothing.
func (n *Node) Run(ctx context.Context) error {
	if !n.ran.CompareAndSwap(false, true) {
		return fmt.Errorf("walstore: node: Run called twice: %w", ErrStopped)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	// Each engine's goroutines, and those they start, carry the pprof
	// label activetier=leader or activetier=follower, so that a CPU
	// profile of a process running Nodes tells the engines apart.
	go pprof.Do(ctx, pprof.Labels("activetier", "leader"), func(ctx context.Context) {
		defer wg.Done()
		errs[0] = n.leader.Run(ctx)
	})
	go pprof.Do(ctx, pprof.Labels("activetier", "follower"), func(ctx context.Context) {
		defer wg.Done()
		errs[1] = n.follower.Run(ctx)
	})
	wg.Wait()
	return errors.Join(errs...)
}

// Role returns tp's role at this Node: what the last transition of tp that
// took effect made it.
func (n *Node) Role(tp metadata.TopicPartition) RoleState {
	n.rolesMu.Lock()
	defer n.rolesMu.Unlock()
	return n.roles.Of(tp)
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
	n.roles.Set(tp, out)
	n.rolesMu.Unlock()
	return nil
}

// BecomeLeader makes this broker tp's leader at epoch, with followers as
// the partition's follower brokers, and returns once appends are accepted:
// the follower side has stopped (no append of its own to tp is in flight),
// and the leader side has begun. The broker's local log must already hold
// epoch in its epoch cache, starting at its end offset, as Kafka's
// makeLeader leaves it. In the background the Node then publishes tp's
// epoch lineage as markers and, if republishFrom >= 0 (the lowest offset
// some follower may lack; -1 if every follower holds the whole log),
// republishes the local log from that offset (see Republish), retrying
// until done or the leadership ends; failures of that work are reported
// meanwhile as tp's failure (Health.Partitions, PartitionError).
//
// Calling it again at a later epoch without a role change in between
// continues the same leadership: data appended at the old epoch and not
// yet published is published at the new one, since it is the same log.
// At the same epoch it updates the followers. Otherwise a new leadership
// begins: its durable offset starts at republishFrom, or at the log end
// if republishFrom is negative.
//
// It is refused, and tp goes on as it was (see Node), for invalid
// arguments (this broker among the followers, a negative id or epoch), an
// epoch below the one it leads tp at, or not above one this Node led tp
// at before or follows it at (ErrStaleEpoch), and a local log whose
// EndOffset fails, or does not answer before ctx ends (a *DependencyError
// naming LocalLog.EndOffset that matches ctx's error), or answers a
// negative end or, leading already and going on at a later epoch or with
// a republish, one below what this leadership accepted (one matching
// ErrContractViolation: the log lost records, which a leadership begun
// there would make its followers truncate), or has an earlier call given
// up on that has not returned (one matching storage.ErrUnavailable). It
// waits for the follower engine to finish the local-log call of tp it may
// be making (as long as ctx allows), validates, then, with tp's local-log
// calls held, reads the log end, begins the leadership and only then
// stops following, which cannot fail.
func (n *Node) BecomeLeader(ctx context.Context, tp metadata.TopicPartition, epoch int32, followers []int32, republishFrom int64) error {
	return n.transition(ctx, "BecomeLeader", tp, func(in RoleState) (RoleState, error) {
		return n.rules.BecomeLeader(&nodeCores{n: n, ctx: ctx}, in, tp, epoch, followers, republishFrom)
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
// epoch below the one it follows or leads tp at (ErrStaleEpoch): a stale
// transition never ends a later role. It gives up only while it waits
// for its turn or for the engines to finish the local-log call of tp they
// may be making, and is refused at once while such a call given up on
// has not returned; with the follower engine held it validates and
// follows tp, and resigns last: resigning cannot be undone, and nothing
// after it can fail or wait.
func (n *Node) BecomeFollower(ctx context.Context, tp metadata.TopicPartition, epoch, leader int32) error {
	return n.transition(ctx, "BecomeFollower", tp, func(in RoleState) (RoleState, error) {
		return n.rules.BecomeFollower(&nodeCores{n: n, ctx: ctx}, in, tp, epoch, leader)
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
// nothing will be. Either way tp's failure, if it had one, ends with its
// role (Health, PartitionError, OnHealth).
func (n *Node) StopReplica(ctx context.Context, tp metadata.TopicPartition) error {
	return n.transition(ctx, "StopReplica", tp, func(in RoleState) (RoleState, error) {
		out, err := n.rules.StopReplica(&nodeCores{n: n, ctx: ctx}, in, tp)
		if errors.Is(err, ErrStopped) {
			// The engines no longer act on tp, nor would they clear its
			// failure: the role ends, and its failure with it.
			n.follower.forgetFailure(tp)
			n.leader.forgetFailure(tp)
			return noRole, nil
		}
		return out, err
	})
}

// nodeCores is how a transition of the Node, with its context, reaches
// the engines (rolecore.Cores). The caller holds the partition's
// local-log calls (Node.transition), so the follower engine makes no call
// of it meanwhile.
type nodeCores struct {
	n   *Node
	ctx context.Context
	// now is the follower engine's time while Hold holds it.
	now time.Time
}

// CheckLeader validates BecomeLeader's arguments; it refuses once Run has
// returned (ErrStopped).
func (c *nodeCores) CheckLeader(tp metadata.TopicPartition, epoch int32, followers []int32) error {
	return c.n.leader.checkLeader(tp, epoch, followers)
}

// EndOffset reads tp's log end as long as ctx allows. The follower engine
// makes no call of tp meanwhile, so the log end is still the log's when
// the leadership begins.
func (c *nodeCores) EndOffset(tp metadata.TopicPartition) (int64, error) {
	leo, err := c.n.leader.endOffset(c.ctx, tp)
	if cerr := c.ctx.Err(); err == nil && cerr != nil {
		// Answered as ctx ended: it gave up all the same, with the error
		// it would have given a moment later.
		err = &DependencyError{Dependency: "LocalLog.EndOffset", Err: &noAnswerError{err: cerr}}
	}
	if err != nil {
		return 0, err
	}
	return leo, nil
}

// Hold runs change holding the follower engine, which it waits for as
// long as ctx allows (see followerEngine.withCore); it fails with
// ErrStopped once Run has returned.
func (c *nodeCores) Hold(change func() error) error {
	return c.n.follower.withCore(c.ctx, func(_ *followcore.Core, now time.Time) error {
		c.now = now
		return change()
	})
}

// Lead begins tp's leadership on the leader engine, continuing the
// rolling digest the follower engine kept of the log, if it knows its
// value at leo.
func (c *nodeCores) Lead(tp metadata.TopicPartition, epoch int32, followers []int32, republishFrom, leo int64) error {
	chain, _ := c.n.follower.core.Digest(tp, leo)
	return c.n.leader.begin(tp, epoch, followers, republishFrom, leo, chain)
}

// Follow makes the follower engine follow tp; it refuses once the leader
// engine has stopped (ErrStopped). Refused here, it changed nothing; the
// follower side acts on tp only once the engine is released, after the
// resign.
func (c *nodeCores) Follow(tp metadata.TopicPartition, epoch, leader int32) error {
	if c.n.leader.isStopped() {
		return ErrStopped
	}
	return c.n.follower.core.Follow(c.now, tp, epoch, leader)
}

// Unfollow stops the follower engine following tp.
func (c *nodeCores) Unfollow(tp metadata.TopicPartition) { c.n.follower.unfollowLocked(c.now, tp) }

// Resign ends the leader engine's leadership of tp.
func (c *nodeCores) Resign(tp metadata.TopicPartition) { c.n.leader.Resign(tp) }

// Append queues one batch of tp for upload. The broker appends the batch
// to its local log first; the batch's Data must not be modified until the
// engine has uploaded it (WaitDurable tells when). Batches must continue
// one another: the first one of a leadership starts at the local log's end
// offset when BecomeLeader was called, each next one right after the last,
// all with the leadership's epoch; anything else is storage.ErrInvalidBatch, and
// the batch is not queued. A partition the Node does not lead is
// ErrNotLeader; one no BecomeLeader would take (see
// metadata.TopicPartition.Validate) also matches the reason, such as
// metadata.ErrInvalidTopicName. When the buffer is full, Append blocks
// (Overflow Block) until space frees, or returns ErrBufferFull (Overflow
// Reject). A blocked Append gives up when ctx ends, fails with
// ErrNotLeader when the leadership it waits in ends (even if another
// begins at once), and with ErrStopped when Run ends; the batch is then
// not queued.
//
// Before Run it is accepted while the buffer has room; after Run has
// returned it fails with ErrStopped. Concurrently with a transition of tp,
// the leadership in effect when it is made accepts it, or it fails with
// ErrNotLeader. ctx bounds only the wait for buffer space.
func (n *Node) Append(ctx context.Context, tp metadata.TopicPartition, b storage.Batch) error {
	return n.leader.Append(ctx, tp, b)
}

// WaitDurable blocks until tp's data up to and including offset, appended
// at epoch, is stored and published (the acks-on-upload mode), or ctx
// ends. epoch is the epoch of the batch that holds offset, as given to
// Append: it binds the wait to the leadership that accepted the records.
// The wait fails with an error matching ErrNotLeader unless the Node's
// current leadership of tp is that one, and if that leadership ends
// before the offset is durable, whether before the call or during it:
// data accepted under a leadership that ended is never published by it,
// and a later leadership may hold other records at the same offsets.
//
// A transition made concurrently ends the leadership or not, all or
// nothing. After Run has returned the wait fails with ErrStopped; with a
// context that has ended, it returns nil if the data is durable, and the
// context's error otherwise.
func (n *Node) WaitDurable(ctx context.Context, tp metadata.TopicPartition, epoch int32, offset int64) error {
	return n.leader.WaitDurable(ctx, tp, epoch, offset)
}

// DurableOffset returns the offset below which tp's log is stored in
// object storage and its metadata published by this Node's current
// leadership (or was on every follower when it began), or -1 if the Node
// does not lead tp.
func (n *Node) DurableOffset(tp metadata.TopicPartition) int64 {
	return n.leader.DurableOffset(tp)
}

// Republish copies tp's local log from offset from to its end into this
// broker's own bucket and publishes it at the current epoch, for followers
// that could not read the previous leader's objects (an AZ outage) or that
// start empty (a reassignment). Records keep their original epochs; the
// entries name this leader's epoch as publisher. It returns when all of it
// is published, or ctx ends, or the leadership does; the work is done by
// Run.
func (n *Node) Republish(ctx context.Context, tp metadata.TopicPartition, from int64) error {
	return n.leader.Republish(ctx, tp, from)
}

// RecordProgress records that a follower has applied a partition up to,
// not including, p.EndOffset (its log end offset), and that the last
// record it holds has epoch p.LastEpoch (-1: it holds none): what Kafka's
// fetch request carries. The broker relays it from the follower; the
// engine judges it as Kafka's leader does. A follower whose last epoch is
// not one of this leader's log, or whose log runs past the end of that
// epoch here, may still truncate: only what it holds of this leader's log
// counts, and garbage collection never deletes what it may still need;
// nor is a follower credited past the end of what was appended here. The
// latest report is what the follower holds, even if lower than an earlier
// one (it lost its log); one whose last epoch is not in this log
// withdraws its credit until it reports again, truncated.
//
// A follower of this leadership whose log end is below what this
// leadership's entries still reach (what was collected, or published
// before it became a follower) is republished for, from its log end, in
// the background: one republish at a time per partition, from the lowest
// such follower up to where they are reached again, never twice for what
// it covers. The broker need not notice.
//
// Reports for a partition this Node does not lead, of a follower it
// does not have, or with negative values (but LastEpoch -1) are ignored,
// and reports are forgotten when a new leadership begins.
//
// A report whose last epoch is an earlier one than the leadership's is
// judged against the local log's epochs (LocalLog.Epochs). That read
// waits at most RequestTimeout; one that fails, or does not answer, or
// whose earlier call given up on has not returned, leaves the report
// unjudged and the partition reported failing until a report is judged
// again (Health.Partitions). A report that comes while a transition of
// the partition, or a read of the Node's, is calling the log is
// ignored: the next one counts.
func (n *Node) RecordProgress(p Progress) { n.leader.RecordProgress(p) }

// ReportTiered records that tp's records below offset are in long-term
// storage or past retention, so the WAL copy is no longer needed for them.
// Until a mark is reported for a partition, only follower progress gates
// the deletion of its objects.
func (n *Node) ReportTiered(tp metadata.TopicPartition, offset int64) {
	n.leader.ReportTiered(tp, offset)
}

// CollectGarbage deletes every tracked object whose sections are all safe
// to delete and returns how many it deleted. Deletes are idempotent, so a
// failed call (a *DependencyError naming ObjectStore.Delete) is simply
// repeated; objects stay tracked until deleted. Run does it every
// GCInterval.
//
// The delete is Run's, as the periodic collection's is: a call made
// before Run starts waits for it, and once Run has returned the call
// fails with ErrStopped. A call whose ctx ends first returns ctx's error;
// if its delete was under way, the delete goes on within Run.
func (n *Node) CollectGarbage(ctx context.Context) (int, error) {
	return n.leader.CollectGarbage(ctx)
}

// Sweep deletes objects under this broker's key prefix in its own bucket
// that the collector does not track and that are older than age: uploads
// whose acknowledgement was lost, a hedged upload's losing copy, and
// objects of a previous incarnation of the broker. Choose age well above
// the longest a follower may lag. Whatever age says, it never deletes an
// object a leadership of this Node still means to publish: one stored
// while the metadata log refuses its entries, a republish copy whose
// entries are being published, or one stored since the oldest upload
// attempt still in flight began (as the store's clock and the Node's
// tell), which that attempt may yet report.
// Objects the store lists outside that bucket and prefix (a store that
// breaks the List contract) are never deleted; Sweep then also returns an
// error matching ErrContractViolation.
//
// The delete is Run's, as CollectGarbage's is, with the same errors
// (ErrStopped once Run has returned, ctx's). The listing is not: Sweep
// lists the bucket itself, with ctx, before it hands the listing to the
// engine, even before Run starts. A List only reads, so when it runs
// orders nothing against the engine's own work, and what it found is
// judged when the engine takes the call, against the uploads and
// publishes under way then.
func (n *Node) Sweep(ctx context.Context, age time.Duration) (int, error) {
	return n.leader.Sweep(ctx, age)
}

// MetadataLowMarks returns, per metadata partition this leader has
// published to, the lowest offset it still needs kept: the oldest message
// naming an object not yet collected, or else its latest epoch markers.
// The log may be trimmed below the minimum of every leader's mark (see
// TrimMetadata).
func (n *Node) MetadataLowMarks() map[int32]int64 { return n.leader.MetadataLowMarks() }

// Health returns the Node's health: the leader side's judgement of its
// uploads and publishes (Degraded, Since, Err), and the partitions whose
// replication a failure has stopped on either side (Partitions,
// FailingPartitions; see PartitionError).
func (n *Node) Health() Health {
	// A partition with a stuck call is listed as stuck, whatever its
	// engine says meanwhile, so that its entry stays the same while the
	// call runs. The stuck partitions are taken first, and each engine
	// then counts and lists its failing partitions but for those, each in
	// one look: the engines move on meanwhile, and a partition an engine
	// reports only between two looks of one Health must not be counted
	// twice, nor not at all.
	stuck, except := n.stuckFailures()
	h, fh := n.leader.healthExcept(except), n.follower.healthExcept(except)
	if fh.FailingPartitions == 0 && len(stuck) == 0 {
		return h
	}
	// Each side lists its first partitions: the first of all are among
	// them.
	h.Partitions = firstFailing(slices.Concat(h.Partitions, fh.Partitions, stuck))
	h.FailingPartitions += fh.FailingPartitions + len(stuck)
	return h
}

// stuckFailures returns the partitions this Node leads or follows whose
// local-log call was given up on and has not returned, and the set of
// them (nil if none): every other call of such a partition is refused
// until that one returns, so its replication has stopped, even when the
// call given up on was the broker's own (a Republish whose context
// ended) and no engine retries anything.
func (n *Node) stuckFailures() (stuck []*PartitionError, set map[metadata.TopicPartition]bool) {
	for _, s := range n.locals.stuckCalls() {
		role := n.Role(s.tp).Role
		if role == NoRole {
			continue
		}
		if set == nil {
			set = make(map[metadata.TopicPartition]bool)
		}
		set[s.tp] = true
		stuck = append(stuck, s.failure(role))
	}
	return stuck, set
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
