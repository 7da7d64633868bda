package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/internal/leadcore"
	"github.com/activetier/activetier/internal/rolecore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// The drivers' timeouts the simulation leaves at walstore's defaults.
const (
	requestTimeout = 10 * time.Second // NodeConfig.RequestTimeout
	fetchTimeout   = 30 * time.Second // NodeConfig.FetchTimeout
)

// simNode is one incarnation of a broker's engines: a leadcore.Core and a
// followcore.Core (none when the reference follower follows instead),
// driven as walstore.Node drives them, but by events. Role changes reach
// the cores as walstore.Node's transitions do. What a core hands out is
// performed as events: store requests go through chaos and their results
// come back when their latency has passed; metadata appends complete after
// a latency and are then delivered to every follower that reads the
// partition; the follower core's local-log requests and the leader core's
// local reads are performed at once on the broker's log, as walstore's
// drivers do; a WakeAt schedules a Tick.
type simNode struct {
	w   *world
	b   *broker
	inc int
	lc  *leadcore.Core
	fc  *followcore.Core
	// digestChecks is fc's count of digest checks last added to the
	// run's.
	digestChecks uint64
	mgr          *walstore.Manager // the follower core's fetches
	read         *metaReader
	inst         *followerInst

	stopped bool
	ops     map[uint64]*leadOp // the leader core's store and log requests under way
	keys    uint64             // object keys drawn
	waiters []*durableWaiter   // acks-on-upload producers
	lag     map[metadata.TopicPartition]int64

	// roles are the roles in effect (walstore.Node.Role); following are
	// the partitions the follower core was told to follow and not to
	// stop, what the cores really do, for the model to compare.
	roles     rolecore.Roles
	following map[metadata.TopicPartition]bool
	// rules are walstore.Node's transitions, weakened as the run says.
	rules rolecore.Rules
	// failEnd and failEpochs make the local log's EndOffset (as a
	// transition reads it) fail once, and Epochs (as the leader core
	// reads it) fail until the time given: the adversary's doing.
	failEnd    map[metadata.TopicPartition]bool
	failEpochs map[metadata.TopicPartition]time.Time
	// failing is the leader side's partitions that a failure stopped, as
	// walstore.Node keeps them from the core's Failures for Health.
	failing map[metadata.TopicPartition]error
	// blocked are Appends waiting for buffer space (the Block overflow
	// policy); the adversary makes them.
	blocked []*blockedAppend
	cwaits  []*contractWait
	// unpublished are the objects the leader core was told it stored and
	// has not published, and opRefs the objects of each upload request
	// (a hedged one stores two); metaDownUntil is the end of the
	// adversary's metadata outage of this broker; lastReport is each
	// followed partition's last progress relayed (Weaken.CatchUp);
	// sweeping is the last Sweep.
	unpublished   map[metadata.ObjectRef]unpublishedObject
	opRefs        map[uint64][]metadata.ObjectRef
	metaDownUntil time.Time
	lastReport    map[metadata.TopicPartition]progressKey
	sweeping      sweepCall

	leadWake, followWake wake
}

// leadOp is one of the leader core's requests under way: try makes an
// attempt; gen invalidates a retry scheduled before a newer one.
type leadOp struct {
	id  uint64
	gen uint64
	try func()
}

// wake is a core's timer: the WakeAt it was last armed for.
type wake struct {
	at  time.Time
	gen uint64
}

// durableWaiter is an acks-on-upload producer waiting for its batch.
type durableWaiter struct {
	tp  metadata.TopicPartition
	m   batchMeta
	gen uint64
}

func newSimNode(b *broker, inc int, inst *followerInst) (*simNode, error) {
	w := b.w
	seed := w.cfg.Seed ^ uint64(b.id)<<40 ^ uint64(inc)<<48
	name := b.name("node#" + strconv.Itoa(inc))
	// The leader core runs with the drawn leader settings, the follower
	// core with the drawn follower ones, each completed as a Node
	// completes its config (walstore.CoreConfigs).
	lcfg, _, err := walstore.CoreConfigs(b.nodeConfig(w.p.leader, seed, name))
	if err != nil {
		return nil, err
	}
	lcfg.Hedge = w.p.putHedge
	lcfg.SweepUnpublished, lcfg.SkipCatchUp = w.cfg.Weaken.Sweep, w.cfg.Weaken.CatchUp
	lc, err := leadcore.New(lcfg)
	if err != nil {
		return nil, err
	}
	n := &simNode{w: w, b: b, inc: inc, lc: lc, inst: inst, ops: make(map[uint64]*leadOp), lag: make(map[metadata.TopicPartition]int64),
		roles: make(rolecore.Roles), following: make(map[metadata.TopicPartition]bool),
		rules: rolecore.Rules{BrokerID: b.id, StaleEpoch: walstore.ErrStaleEpoch, Weaken: rolecore.Weakening{
			UnfollowFirst: w.cfg.Weaken.Refused, AnyEpoch: w.cfg.Weaken.Late, ResignFirst: w.cfg.Weaken.Cancelled,
		}},
		failEnd: make(map[metadata.TopicPartition]bool), failEpochs: make(map[metadata.TopicPartition]time.Time),
		failing: make(map[metadata.TopicPartition]error), unpublished: make(map[metadata.ObjectRef]unpublishedObject),
		opRefs: make(map[uint64][]metadata.ObjectRef), lastReport: make(map[metadata.TopicPartition]progressKey)}
	if inst != nil {
		fp := w.p.follower
		var fcfg followcore.Config
		_, fcfg, err = walstore.CoreConfigs(b.nodeConfig(fp, seed, name))
		if err == nil {
			// The seed the recorded runs replay with.
			fcfg.Hedge, fcfg.Seed = w.p.getHedge, seed^0xf0110e
			n.fc, err = followcore.New(fcfg)
		}
		if err == nil {
			n.mgr, err = newFetcher(b)
		}
		if err != nil {
			lc.Close()
			return nil, err
		}
		inst.handled = func() uint64 { return n.fc.Messages }
		n.read = newMetaReader(w, inst, seed, fp.ReadBatch, func(recs []metadata.Record) {
			n.fc.Records(w.clock, recs)
			n.drive()
		}, n.live)
	}
	lc.Start(w.clock)
	n.drive()
	return n, nil
}

// nodeConfig is the config of a Node of b with the drawn settings
// tuning, for walstore.CoreConfigs.
func (b *broker) nodeConfig(tuning walstore.NodeConfig, seed uint64, name string) walstore.NodeConfig {
	cfg := tuning
	cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local = b.id, b.store, b.w.meta, b.log
	cfg.Seed, cfg.Logger = seed, b.w.logger(name)
	return cfg
}

// newFetcher returns the Manager that reads and verifies sections for b's
// followers: one GET at a time, each answered at once by the simStore,
// which keeps their latencies for the caller to wait out.
func newFetcher(b *broker) (*walstore.Manager, error) {
	return walstore.NewManager(walstore.ManagerConfig{
		Store: b.store, BrokerID: b.id, FetchConcurrency: 1, CoalesceGap: b.w.p.follower.CoalesceGap,
		Logger: slog.New(slog.DiscardHandler),
	})
}

func (n *simNode) live() bool { return !n.stopped }

// halt stops the node, as a crash does: its requests under way are
// forgotten and its waiters fail.
func (n *simNode) halt() {
	n.stopped = true
	n.waiters = nil
	n.haltContract()
	n.lc.Close()
	if n.mgr != nil {
		n.mgr.Close()
	}
}

// errCancelled is a context that ended while the transition waited.
var errCancelled = errors.New("context ended while waiting for the follower engine")

// role returns tp's role at the node: walstore.Node.Role.
func (n *simNode) role(tp metadata.TopicPartition) walstore.RoleState { return n.roles.Of(tp) }

// transition is walstore.Node.transition: do validates, prepares and, only
// if nothing can fail any more, changes the cores, returning the new role;
// or it returns an error, and the role in effect stays as it was.
// The model, if the run has one, judges the call and its result.
func (n *simNode) transition(c call, tp metadata.TopicPartition, do func(in walstore.RoleState) (walstore.RoleState, error)) (err error) {
	if n.w.model != nil {
		defer func() { n.w.model.transition(n, tp, c, err) }()
	}
	in := n.role(tp)
	out, err := do(in)
	n.drive()
	if err != nil {
		return &walstore.TransitionError{Transition: c.name, Partition: tp, InEffect: n.role(tp), Err: err}
	}
	n.roles.Set(tp, out)
	return nil
}

// unfollow stops the follower core following tp.
func (n *simNode) unfollow(tp metadata.TopicPartition) {
	if n.fc != nil {
		n.fc.Unfollow(n.w.clock, tp)
		delete(n.lag, tp)
	}
	delete(n.following, tp)
}

// endOffset is LocalLog.EndOffset as a transition reads it, failing once
// where an attack says so.
func (n *simNode) endOffset(tp metadata.TopicPartition) (int64, error) {
	if n.failEnd[tp] {
		delete(n.failEnd, tp)
		return 0, fmt.Errorf("sim: LocalLog.EndOffset of %s: injected failure", tp)
	}
	return n.b.log.EndOffset(tp)
}

// becomeLeader is walstore.Node.BecomeLeader, as the controller calls it:
// a refusal is an engine error.
func (n *simNode) becomeLeader(tp metadata.TopicPartition, epoch int32, followers []int32, from int64) {
	if err := n.tryBecomeLeader(tp, epoch, followers, from); err != nil {
		n.w.violate(KindEngineError, "b%d BecomeLeader(%s, e%d, republish from %d): %v", n.b.id, tp, epoch, from, err)
	}
}

// tryBecomeLeader is walstore.Node.BecomeLeader: the shared rule
// (rolecore.Rules.BecomeLeader) on the node's cores. Weaken.Refused stops
// following first, as the Node once did: a refusal after it leaves the
// partition neither led nor followed. Weaken.Late drops the refusal of an
// epoch not above the one followed.
func (n *simNode) tryBecomeLeader(tp metadata.TopicPartition, epoch int32, followers []int32, from int64) error {
	c := call{name: "BecomeLeader", epoch: epoch, leader: n.b.id, followers: followers, endFails: n.failEnd[tp]}
	return n.transition(c, tp, func(in walstore.RoleState) (walstore.RoleState, error) {
		return n.rules.BecomeLeader(&simCores{n: n}, in, tp, epoch, followers, from)
	})
}

// becomeFollower is walstore.Node.BecomeFollower, as the broker's view
// calls it: a refusal is an engine error.
func (n *simNode) becomeFollower(tp metadata.TopicPartition, epoch, leader int32) {
	if err := n.tryBecomeFollower(tp, epoch, leader, false); err != nil {
		n.w.violate(KindEngineError, "b%d BecomeFollower(%s, e%d, b%d): %v", n.b.id, tp, epoch, leader, err)
	}
}

// tryBecomeFollower is walstore.Node.BecomeFollower: the shared rule
// (rolecore.Rules.BecomeFollower) on the node's cores. cancelled is a
// context that ends while the transition waits for the follower engine:
// it gives up having changed nothing. Weaken.Cancelled resigns first, as
// the Node once did, so that giving up leaves the partition neither led
// nor followed.
func (n *simNode) tryBecomeFollower(tp metadata.TopicPartition, epoch, leader int32, cancelled bool) error {
	c := call{name: "BecomeFollower", epoch: epoch, leader: leader, cancelled: cancelled}
	return n.transition(c, tp, func(in walstore.RoleState) (walstore.RoleState, error) {
		return n.rules.BecomeFollower(&simCores{n: n, cancelled: cancelled}, in, tp, epoch, leader)
	})
}

// stopReplica is walstore.Node.StopReplica: neither side acts on tp any
// more. It cannot be refused.
func (n *simNode) stopReplica(tp metadata.TopicPartition) {
	_ = n.transition(call{name: "StopReplica", epoch: -1, leader: -1}, tp, func(in walstore.RoleState) (walstore.RoleState, error) {
		return n.rules.StopReplica(&simCores{n: n}, in, tp)
	})
}

// simCores is how a transition reaches the node's cores
// (rolecore.Cores), as walstore.Node's do: at once, but for a context
// that ends while it waits for the follower engine (cancelled).
type simCores struct {
	n         *simNode
	cancelled bool
}

// CheckLeader asks the leader core, as walstore's checkLeader does.
func (c *simCores) CheckLeader(tp metadata.TopicPartition, epoch int32, followers []int32) error {
	_, err := c.n.lc.CheckLeader(tp, epoch, followers)
	return err
}

// EndOffset reads the broker's log, failing where an attack says so.
func (c *simCores) EndOffset(tp metadata.TopicPartition) (int64, error) { return c.n.endOffset(tp) }

// Hold gives up, as a context that ends while it waits does, for a
// cancelled call.
func (c *simCores) Hold(change func() error) error {
	if c.cancelled {
		return errCancelled
	}
	return change()
}

// Lead begins the leadership on the leader core.
func (c *simCores) Lead(tp metadata.TopicPartition, epoch int32, followers []int32, from, leo int64) error {
	var chain digest.Chain
	switch ref := c.n.b.ref; {
	case c.n.fc != nil:
		chain, _ = c.n.fc.Digest(tp, leo)
	case ref != nil && ref.parts[tp] != nil && ref.parts[tp].leo == leo:
		chain, _ = ref.parts[tp].chain.Value(leo)
	}
	return c.n.lc.BecomeLeader(c.n.w.clock, tp, epoch, followers, from, leo, chain)
}

// Follow tells the follower core, and records what it follows for the
// model.
func (c *simCores) Follow(tp metadata.TopicPartition, epoch, leader int32) error {
	if err := c.n.fc.Follow(c.n.w.clock, tp, epoch, leader); err != nil {
		return err
	}
	c.n.following[tp] = true
	return nil
}

// Unfollow stops the follower core following tp.
func (c *simCores) Unfollow(tp metadata.TopicPartition) { c.n.unfollow(tp) }

// Resign ends the leader core's leadership.
func (c *simCores) Resign(tp metadata.TopicPartition) { c.n.lc.Resign(c.n.w.clock, tp) }

// append is walstore.Node.Append with the Reject overflow policy.
func (n *simNode) append(tp metadata.TopicPartition, b storage.Batch) error {
	err := n.lc.Append(n.w.clock, tp, b)
	n.drive()
	return err
}

// durableOffset is walstore.Node.DurableOffset.
func (n *simNode) durableOffset(tp metadata.TopicPartition) int64 {
	_, durable, _, _ := n.lc.Leadership(tp)
	return durable
}

// progress is walstore.Node.RecordProgress.
func (n *simNode) progress(tp metadata.TopicPartition, follower int32, end int64, lastEpoch int32) {
	var epochs []storage.EpochEntry
	var err error
	if n.lc.NeedLineage(tp, lastEpoch) {
		epochs, err = n.b.log.Epochs(tp)
	}
	n.lc.Progress(n.w.clock, tp, follower, end, lastEpoch, epochs, err)
}

// awaitDurable waits, as an acks-on-upload producer does with
// WaitDurable, for m to be durable, and then checks that it is.
func (n *simNode) awaitDurable(tp metadata.TopicPartition, m batchMeta) {
	gen, _, _, ok := n.lc.Leadership(tp)
	if !ok {
		return
	}
	n.waiters = append(n.waiters, &durableWaiter{tp: tp, m: m, gen: gen})
	n.checkWaiters()
}

// checkWaiters ends the waits that are over: the batch is durable, or
// the leadership that took it ended or failed.
func (n *simNode) checkWaiters() {
	kept := n.waiters[:0]
	for _, wt := range n.waiters {
		gen, durable, failed, ok := n.lc.Leadership(wt.tp)
		switch {
		case !ok || gen != wt.gen, failed != nil && durable <= wt.m.last:
		case durable > wt.m.last:
			n.w.stats.DurableClaims++
			n.w.checkDurable(n.b.id, wt.tp, wt.m, "WaitDurable")
		default:
			kept = append(kept, wt)
		}
	}
	clear(n.waiters[len(kept):])
	n.waiters = kept
}

// drive takes the cores' Readies and performs them until they ask for
// nothing more that is performed at once.
func (n *simNode) drive() {
	for !n.stopped {
		more := n.fc != nil && n.followReady()
		if !n.stopped && n.lc.HasReady() {
			more = n.leadReady() || more
		}
		if !more {
			return
		}
	}
}

// arm makes wk fire tick at at (zero: never), at least a millisecond from
// now, as walstore's drivers arm their timers. A timer that fires with
// the core's WakeAt unchanged is armed again for it.
func (n *simNode) arm(wk *wake, at time.Time, tick func(now time.Time)) {
	wk.gen++
	wk.at = at
	if at.IsZero() {
		return
	}
	gen := wk.gen
	n.w.at(maxTime(at, n.w.clock.Add(time.Millisecond)), func() {
		if n.stopped || wk.gen != gen {
			return
		}
		wk.gen++
		tick(n.w.clock)
		n.drive()
		if wk.gen == gen+1 && !n.stopped {
			n.arm(wk, wk.at, tick)
		}
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// followReady performs the follower core's Ready, if it has one, and
// reports whether it performed local-log requests, whose answers make a
// new one.
func (n *simNode) followReady() bool {
	if !n.fc.HasReady() {
		return false
	}
	rd := n.fc.Ready()
	n.fc.Advance()
	now := n.w.clock
	n.w.digests(fmt.Sprintf("broker %d", n.b.id), rd.Mismatches, n.fc.Counters.DigestChecks, &n.digestChecks)
	if rd.Rewind {
		n.read.rewind()
	}
	for _, l := range rd.Lags {
		n.lag[l.Partition] = l.Offsets
	}
	// Cancelled fetches are not stopped: their answers come, late, and
	// the core must ignore them.
	for _, f := range rd.Fetches {
		n.fetch(f)
	}
	for _, l := range rd.Loads {
		st, err := n.load(l.Partition)
		n.fc.Loaded(now, l.ID, st, err)
	}
	for _, t := range rd.Truncates {
		to, end, err := n.b.truncate(n.inst, t.Partition, t.To, t.AtBatch)
		n.fc.Truncated(now, t.ID, to, end, err)
	}
	for _, v := range rd.Verifies {
		n.fc.Verified(now, v.ID, n.readBack(v), nil)
	}
	for _, a := range rd.Appends {
		end, err := n.b.append(n.inst, a.Partition, a.Batches)
		n.fc.Appended(now, a.ID, end, err)
	}
	for _, p := range rd.Progress {
		if n.idleReport(p) {
			continue
		}
		n.w.relay(p.Partition, p.Leader, n.b.id, p.EndOffset, p.LastEpoch)
	}
	if !rd.WakeAt.Equal(n.followWake.at) {
		n.arm(&n.followWake, rd.WakeAt, n.fc.Tick)
	}
	return len(rd.Loads)+len(rd.Truncates)+len(rd.Appends) > 0
}

// load reads tp's local state for the follower core.
func (n *simNode) load(tp metadata.TopicPartition) (followcore.LocalState, error) {
	leo, err := n.b.log.EndOffset(tp)
	if err != nil {
		return followcore.LocalState{}, err
	}
	epochs, err := n.b.log.Epochs(tp)
	return followcore.LocalState{EndOffset: leo, Epochs: epochs}, err
}

// fetch performs a fetch round: its GETs are made now, and the results
// reach the core when the slowest has answered (with FetchConcurrency of
// them at a time), or the round times out.
func (n *simNode) fetch(f followcore.Fetch) {
	results, lat := fetchEntries(n.b, n.mgr, f.Entries, n.w.p.follower.FetchConcurrency)
	n.w.after(lat, func() {
		if n.stopped {
			return
		}
		if n.w.cfg.Verbose {
			n.w.tracef("b%d node#%d: fetch %d from %s answered: %s", n.b.id, n.inc, f.ID, f.Bucket, outcomes(results))
		}
		n.fc.Fetched(n.w.clock, f.ID, results)
		n.drive()
	})
}

// fetchEntries reads entries through mgr and classifies the results as
// walstore's Follower does; it returns them and how long the round takes.
func fetchEntries(b *broker, mgr *walstore.Manager, entries []metadata.Entry, parallel int) ([]followcore.Result, time.Duration) {
	res, err := mgr.Fetch(context.Background(), entries)
	lat := b.store.takeLatency(parallel)
	out := make([]followcore.Result, len(entries))
	for i, e := range entries {
		switch {
		case err != nil || lat > fetchTimeout:
			out[i] = followcore.Result{Entry: e, Outcome: followcore.Unavailable, Err: fmt.Errorf("sim: fetch: %w: no answer within %v", storage.ErrUnavailable, fetchTimeout)}
		case res[i].Err != nil:
			out[i] = followcore.Result{Entry: e, Outcome: followcore.OutcomeOf(res[i].Err), Err: res[i].Err}
		default:
			out[i] = followcore.Result{Entry: e, Batches: res[i].Batches}
		}
	}
	return out, min(lat, fetchTimeout)
}

// outcomes summarizes a fetch round's results for the trace.
func outcomes(results []followcore.Result) string {
	var counts [followcore.Failed + 1]int
	for _, r := range results {
		counts[r.Outcome]++
	}
	return fmt.Sprintf("%d fetched, %d gone, %d corrupt, %d unavailable, %d refused, %d failed",
		counts[followcore.Fetched], counts[followcore.Gone], counts[followcore.Corrupt],
		counts[followcore.Unavailable], counts[followcore.Refused], counts[followcore.Failed])
}

// leadReady performs the leader core's Ready and reports whether it
// performed requests at once (encodes, local reads, a Sweep's deletes),
// whose results make a new one.
func (n *simNode) leadReady() bool {
	rd := n.lc.Ready()
	n.lc.Advance()
	now := n.w.clock
	if rd.DurableChanged {
		n.checkWaiters()
	}
	n.leadNews(rd)
	if rd.HealthChanged {
		h := n.lc.Health()
		n.w.tracef("b%d node#%d: degraded %v (%v)", n.b.id, n.inc, h.Degraded, h.Err)
	}
	for _, e := range rd.Encodes {
		objs, err := e.Builder.Cut(nil)
		n.lc.Encoded(now, e.ID, objs, err)
	}
	for _, u := range rd.Uploads {
		n.start(u.ID, func(op *leadOp) { n.upload(op, u) })
	}
	for _, hg := range rd.Hedges {
		if op := n.ops[hg.ID]; op != nil {
			n.hedgeUpload(op, hg)
		}
	}
	for _, p := range rd.Publishes {
		n.start(p.ID, func(op *leadOp) { n.publish(op, p) })
	}
	for _, r := range rd.Reads {
		n.lc.Read(now, r.ID, r.What, n.localRead(r))
	}
	swept := 0
	for _, d := range rd.Deletes {
		if d.Call != 0 {
			n.sweepDelete(d)
			swept++
			continue
		}
		n.start(d.ID, func(op *leadOp) { n.delete(op, d) })
	}
	for _, d := range rd.Calls {
		n.swept(d)
	}
	for _, r := range rd.Retries {
		if op := n.ops[r.ID]; op != nil {
			op.gen++
			gen := op.gen
			n.w.at(r.At, func() {
				if !n.stopped && n.ops[op.id] == op && op.gen == gen {
					op.try()
				}
			})
		}
	}
	for _, id := range rd.Cancels {
		delete(n.ops, id)
	}
	if !rd.WakeAt.Equal(n.leadWake.at) {
		n.arm(&n.leadWake, rd.WakeAt, n.lc.Tick)
	}
	return len(rd.Encodes)+len(rd.Reads)+swept > 0
}

// start registers request id and makes its first attempt.
func (n *simNode) start(id uint64, attempt func(op *leadOp)) {
	op := &leadOp{id: id}
	op.try = func() { attempt(op) }
	n.ops[id] = op
	op.try()
}

// finish schedules the result of an attempt of op after lat: result
// feeds it to the core, unless the request was cancelled or the node
// stopped meanwhile. A request the core no longer wants after its result
// is over; one it retries waits for the Retry the core hands out.
func (n *simNode) finish(op *leadOp, lat time.Duration, result func(now time.Time)) {
	n.w.after(lat, func() {
		if n.stopped || n.ops[op.id] != op {
			return
		}
		result(n.w.clock)
		if !n.lc.Live(op.id) {
			delete(n.ops, op.id)
		}
		n.drive()
	})
}

// hedgeUpload makes a hedged attempt of upload op, alongside the one in
// flight, as walstore's Leader does.
func (n *simNode) hedgeUpload(op *leadOp, hg leadcore.Hedge) {
	n.attemptUpload(op, hg, func(now time.Time, ref metadata.ObjectRef, err error) { n.lc.HedgeUploaded(now, op.id, ref, err) })
}

// upload makes one attempt to store an object under a fresh key.
func (n *simNode) upload(op *leadOp, u leadcore.Upload) {
	n.attemptUpload(op, u, func(now time.Time, ref metadata.ObjectRef, err error) {
		n.lc.Uploaded(now, op.id, ref, err, leadcore.KindOf(err))
	})
}

// attemptUpload stores u's data under a fresh key and gives the result to
// report.
func (n *simNode) attemptUpload(op *leadOp, u leadcore.Upload, report func(time.Time, metadata.ObjectRef, error)) {
	n.keys++
	key := fmt.Sprintf("%d/%d-%d.wal", n.b.id, n.inc, n.keys)
	lat, put := n.b.store.put(key, u.Data)
	if lat > requestTimeout {
		lat, put = requestTimeout, func() (metadata.ObjectRef, error) {
			return metadata.ObjectRef{}, fmt.Errorf("sim: PUT %s: %w: no answer within %v", key, storage.ErrUnavailable, requestTimeout)
		}
	}
	n.finish(op, lat, func(now time.Time) {
		ref, err := put()
		if err != nil && n.w.cfg.Verbose {
			n.w.tracef("b%d node#%d: upload %d failed: %v", n.b.id, n.inc, op.id, err)
		}
		if err == nil && u.What == leadcore.WhatUpload {
			n.uploadedOK(op.id, ref)
		}
		report(now, ref, err)
	})
}

// publish makes one attempt to append a message to the metadata log; once
// appended, it is on its way to every follower that reads the partition.
func (n *simNode) publish(op *leadOp, p leadcore.Publish) {
	d := draws{state: identity(n.w.cfg.Seed, 0x6d657461, uint64(n.b.id), messageID(p.Data))}
	lat := time.Millisecond + time.Duration(d.float()*float64(4*time.Millisecond))
	n.finish(op, lat, func(now time.Time) {
		off, err := n.metaAppend(p)
		if err == nil {
			if n.w.cfg.Verbose {
				n.w.tracef("b%d node#%d: published to metadata partition %d at %d", n.b.id, n.inc, p.Partition, off)
			}
			n.w.published(metadata.Record{Partition: p.Partition, Offset: off, Value: p.Data})
		}
		n.lc.Published(now, op.id, off, err, leadcore.KindOf(err))
	})
}

// delete makes the attempt to delete objects.
func (n *simNode) delete(op *leadOp, d leadcore.Delete) {
	lat, del := n.b.store.delete(d.Refs)
	n.finish(op, lat, func(now time.Time) {
		err := del()
		if err != nil {
			err = fmt.Errorf("sim: collecting garbage: %w", err)
		}
		n.lc.Deleted(now, op.id, err)
	})
}

// localRead performs a leader core's read of the broker's log.
func (n *simNode) localRead(r leadcore.LocalRead) leadcore.LocalResult {
	var res leadcore.LocalResult
	l := n.b.log
	switch r.What {
	case leadcore.ReadLineage:
		res.Epochs, res.EpochsErr = l.Epochs(r.Partition)
		if until, ok := n.failEpochs[r.Partition]; ok && n.w.clock.Before(until) {
			res.Epochs, res.EpochsErr = nil, fmt.Errorf("sim: LocalLog.Epochs of %s: injected failure", r.Partition)
			n.w.model.epochsFailed(n, r.Partition)
		}
		if res.EpochsErr == nil {
			res.End, res.EndErr = l.EndOffset(r.Partition)
		}
	case leadcore.ReadEnd:
		res.End, res.EndErr = l.EndOffset(r.Partition)
	case leadcore.ReadBatches:
		res.Batches, res.ReadErr = l.Read(context.Background(), r.Partition, r.From, r.MaxBytes)
	}
	return res
}

// published delivers a record just appended to the metadata log to every
// follower that reads its partition.
func (w *world) published(rec metadata.Record) {
	for _, id := range w.ids {
		b := w.brokers[id]
		if b.node != nil && b.node.read != nil && b.node.read.partition == rec.Partition {
			b.node.read.appended(rec)
		}
		if b.ref != nil && b.ref.read.partition == rec.Partition {
			b.ref.read.appended(rec)
		}
	}
	w.learnCommits(rec)
	for _, r := range w.readers {
		r.reads[rec.Partition].appended(rec)
	}
}

// truncate performs a follower's truncation of tp as walstore's Follower
// does, and returns where it truncated and where the log ends.
func (b *broker) truncate(inst *followerInst, tp metadata.TopicPartition, to int64, atBatch bool) (int64, int64, error) {
	ctx := context.Background()
	if atBatch {
		// A batch holding the first divergent offset goes whole.
		bs, err := b.log.Read(ctx, tp, to, 1)
		if err != nil {
			return 0, 0, err
		}
		if len(bs) > 0 && bs[0].FirstOffset < to && to <= bs[0].LastOffset {
			to = bs[0].FirstOffset
		}
	}
	from := b.log.end(tp)
	if err := b.log.Truncate(ctx, tp, to); err != nil {
		return 0, 0, err
	}
	if to < from {
		b.w.tracef("b%d follower#%d truncates %s from %d to %d", b.id, inst.n, tp, from, to)
		b.w.stats.Truncations++
	}
	end, err := b.log.EndOffset(tp)
	return to, end, err
}

// append performs a follower's append of batches to tp, judged first, and
// returns where the log ends.
func (b *broker) append(inst *followerInst, tp metadata.TopicPartition, batches []storage.Batch) (int64, error) {
	inst.checkAppend(tp, batches)
	if err := b.log.Append(context.Background(), tp, batches); err != nil {
		return 0, err
	}
	b.w.stats.Applied += len(batches)
	return b.log.EndOffset(tp)
}

// noRole is what walstore.Node.Role says of a partition it neither leads
// nor follows.
var noRole = rolecore.None

// readBack reads the batches of [v.From, v.To) back from the broker's log,
// as walstore's follower does for its core's Verify.
func (n *simNode) readBack(v followcore.Verify) []storage.Batch {
	var out []storage.Batch
	for from := v.From; from < v.To; {
		bs, err := n.b.log.Read(context.Background(), v.Partition, from, 1<<20)
		if err != nil || len(bs) == 0 || bs[0].LastOffset < from {
			break
		}
		for _, b := range bs {
			if b.FirstOffset >= v.To {
				return out
			}
			out = append(out, b)
			from = b.LastOffset + 1
		}
	}
	return out
}
