package sim

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// broker is one simulated broker: its store, its local log, its own view of
// leadership (which a zombie keeps after the controller moved on), and its
// leader and follower engines.
type broker struct {
	w     *world
	id    int32
	az    string
	store simStore
	log   *brokerLog
	up    bool // driver only

	vmu  sync.Mutex
	view map[metadata.TopicPartition]viewEntry

	// Driver-only engine state.
	leader      *walstore.Leader
	leaderInc   int
	leaderCtx   context.Context
	leaderStop  func()
	tasks       map[metadata.TopicPartition][]*task
	waiters     sync.WaitGroup // acks-on-upload producers waiting on WaitDurable
	follower    *followerInst
	followerInc int
}

// viewEntry is what a broker believes about one partition.
type viewEntry struct {
	replicas []int32
	leader   int32
	epoch    int32
}

// task is a leadership chore running on its own goroutine: BecomeLeader or
// Republish. The driver cancels and waits for it when leadership moves.
type task struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// LeaderEpoch implements walstore.EpochView from the broker's own belief.
func (b *broker) LeaderEpoch(tp metadata.TopicPartition) (int32, bool) {
	b.vmu.Lock()
	defer b.vmu.Unlock()
	v, ok := b.view[tp]
	return v.epoch, ok && v.leader == b.id
}

// followersOf is the broker's placement: the replicas it believes follow
// tp's leader.
func (b *broker) followersOf(tp metadata.TopicPartition) []int32 {
	b.vmu.Lock()
	defer b.vmu.Unlock()
	v := b.view[tp]
	out := make([]int32, 0, len(v.replicas))
	for _, r := range v.replicas {
		if r != v.leader {
			out = append(out, r)
		}
	}
	return out
}

// follows reports whether the broker believes it follows tp.
func (b *broker) follows(tp metadata.TopicPartition) bool {
	b.vmu.Lock()
	defer b.vmu.Unlock()
	v, ok := b.view[tp]
	return ok && followsLocked(b.id, v)
}

// setView changes what the broker believes about tp. If that makes it
// follow tp while its follower engine runs (Config.FollowsOnly), the checks
// learn of it before the engine can: the engine reads Follows under the
// same lock.
func (b *broker) setView(tp metadata.TopicPartition, v viewEntry) {
	b.vmu.Lock()
	defer b.vmu.Unlock()
	before := followsLocked(b.id, b.view[tp])
	v.replicas = slices.Clone(v.replicas)
	b.view[tp] = v
	if !before && followsLocked(b.id, v) && b.follower != nil {
		b.follower.followsAgain(tp)
	}
}

func followsLocked(id int32, v viewEntry) bool {
	return v.leader != id && slices.Contains(v.replicas, id)
}

// startLeader starts a new incarnation of the leader engine.
func (b *broker) startLeader() {
	w := b.w
	b.leaderInc++
	cfg := w.p.leader
	cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local, cfg.View = b.id, b.store, w.meta, b.log, b
	cfg.Followers = b.followersOf
	cfg.Seed = w.cfg.Seed ^ uint64(b.id)<<40 ^ uint64(b.leaderInc)<<48
	cfg.Logger = w.logger(b.name("leader"))
	l, err := walstore.NewLeader(cfg)
	if err != nil {
		w.violate(KindHarness, "b%d: NewLeader: %v", b.id, err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		if err := l.Run(ctx); err != nil || ctx.Err() == nil {
			w.violate(KindEngineError, "b%d leader engine: Run returned %v before it was stopped", b.id, err)
		}
		close(done)
	}()
	b.leader, b.leaderCtx = l, ctx
	b.tasks = make(map[metadata.TopicPartition][]*task)
	b.leaderStop = func() {
		cancel()
		<-done
	}
}

// stopLeader stops the leader engine and its chores, as a crash would.
func (b *broker) stopLeader() {
	if b.leader == nil {
		return
	}
	for tp := range b.tasks {
		b.stopTasks(tp)
	}
	b.leaderStop()
	b.leader, b.leaderStop = nil, nil
}

// startTask runs a leadership chore for tp on its own goroutine.
func (b *broker) startTask(tp metadata.TopicPartition, what string, fn func(ctx context.Context) error) {
	w := b.w
	ctx, cancel := context.WithCancel(b.leaderCtx)
	t := &task{cancel: cancel, done: make(chan struct{})}
	b.tasks[tp] = append(b.tasks[tp], t)
	go func() {
		defer close(t.done)
		err := fn(ctx)
		switch {
		case err == nil:
			w.tracef("b%d %s %s: done", b.id, what, tp)
		case ctx.Err() != nil, errors.Is(err, walstore.ErrStopped):
		default:
			w.violate(KindEngineError, "b%d %s %s: %v", b.id, what, tp, err)
		}
	}()
}

// stopTasks cancels tp's leadership chores and waits for them.
func (b *broker) stopTasks(tp metadata.TopicPartition) {
	for _, t := range b.tasks[tp] {
		t.cancel()
		<-t.done
	}
	delete(b.tasks, tp)
}

func (b *broker) name(engine string) string {
	return "b" + strconv.Itoa(int(b.id)) + " " + engine
}

// followerEngine is what the world needs of a follower engine: the real
// walstore.Follower, or the reference follower.
type followerEngine interface {
	Run(ctx context.Context) error
	Stats() walstore.FollowerStats
}

// followerInst is one incarnation of a broker's follower engine, with what
// the checks need to judge its appends: the messages it has been handed and
// the legitimate epoch starts among them.
type followerInst struct {
	w    *world
	b    *broker
	n    int
	eng  followerEngine
	stop func()

	mu      sync.Mutex
	markers [][]metadata.EpochStart // per message handed out, in order
	cursor  int                     // messages folded into fences
	fences  map[metadata.TopicPartition][]metadata.EpochStart
	// from is, per partition the broker started following while this
	// engine ran, the first message that counts for it: the engine
	// ignored the partition's markers before and starts it afresh.
	from map[metadata.TopicPartition]int
}

// startFollower starts a new incarnation of the follower engine. Its local
// log is the broker's, kept across incarnations; everything else is new.
func (b *broker) startFollower() {
	w := b.w
	b.followerInc++
	inst := &followerInst{w: w, b: b, n: b.followerInc,
		fences: make(map[metadata.TopicPartition][]metadata.EpochStart), from: make(map[metadata.TopicPartition]int)}
	cfg := w.p.follower
	cfg.BrokerID, cfg.Store, cfg.Local, cfg.Follows = b.id, b.store, followerLog{b.log, inst}, b.follows
	cfg.Log = newMetaView(w, inst, w.cfg.Seed^uint64(b.id)<<40^uint64(b.followerInc)<<48)
	cfg.Seed = w.cfg.Seed ^ uint64(b.id)<<32 ^ uint64(b.followerInc)<<52
	cfg.Logger = w.logger(b.name("follower#" + strconv.Itoa(b.followerInc)))
	cfg.OnApplied = func(tp metadata.TopicPartition, end int64) { w.relay(b, tp, end) }
	var eng followerEngine
	switch {
	case w.cfg.WeakFencing || w.cfg.ReferenceFollower:
		eng = newRefFollower(cfg, w.cfg.WeakFencing)
	default:
		f, err := walstore.NewFollower(cfg)
		if err != nil {
			w.violate(KindHarness, "b%d: NewFollower: %v", b.id, err)
			return
		}
		eng = f
	}
	inst.eng = eng
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		if err := eng.Run(ctx); err != nil || ctx.Err() == nil {
			w.violate(KindEngineError, "b%d follower#%d: Run returned %v before it was stopped", b.id, inst.n, err)
		}
		close(done)
	}()
	inst.stop = func() {
		cancel()
		<-done
	}
	b.follower = inst
}

func (b *broker) stopFollower() {
	if b.follower == nil {
		return
	}
	b.follower.stop()
	b.follower = nil
}

// roleChanging and roleChanged bracket a change of the broker's role for a
// partition (its view): the broker stops its follower engine before and
// starts a new one after, so that no engine runs with state from before the
// change; or, with Config.FollowsOnly, it relies on the engine asking Follows
// again.
func (b *broker) roleChanging() {
	if b.up && !b.w.p.followsOnly {
		b.stopFollower()
	}
}

func (b *broker) roleChanged() {
	if b.up && !b.w.p.followsOnly && b.follower == nil {
		b.startFollower()
	}
}

// delivered records the messages the view handed to the engine's reader,
// in order; the engine handles them in that order.
func (inst *followerInst) delivered(recs []metadata.Record) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	for _, r := range recs {
		m, err := metadata.DecodeMessage(r.Value)
		if err != nil {
			continue // the engine skips it too
		}
		inst.markers = append(inst.markers, m.Markers)
	}
}

// fencesFor returns the legitimate epoch starts of tp among the messages
// the engine has handled: (epoch, start) pairs the controller decided.
// Stats().Messages counts messages whose handling began; it is read on the
// engine's goroutine (at append time) or at a quiescent point, when no
// handling is under way.
func (inst *followerInst) fencesFor(tp metadata.TopicPartition) []metadata.EpochStart {
	handled := int(inst.eng.Stats().Messages)
	inst.mu.Lock()
	defer inst.mu.Unlock()
	for ; inst.cursor < handled && inst.cursor < len(inst.markers); inst.cursor++ {
		for _, mk := range inst.markers[inst.cursor] {
			if inst.cursor < inst.from[mk.Partition] {
				continue
			}
			if inst.w.legitStart(mk.Partition, mk.Epoch, mk.StartOffset) && !slices.Contains(inst.fences[mk.Partition], mk) {
				inst.fences[mk.Partition] = append(inst.fences[mk.Partition], mk)
			}
		}
		inst.markers[inst.cursor] = nil
	}
	return slices.Clone(inst.fences[tp])
}

// followsAgain notes that the broker follows tp again (Follows turned
// true while this engine runs): what the engine handled of tp before does
// not count, and neither, conservatively, do messages already handed out.
func (inst *followerInst) followsAgain(tp metadata.TopicPartition) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	inst.from[tp] = len(inst.markers)
	delete(inst.fences, tp)
}

// fenced returns a legitimate epoch start among fences that excludes a
// record of epoch at offset, if there is one.
func fenced(fences []metadata.EpochStart, epoch int32, offset int64) (metadata.EpochStart, bool) {
	for _, f := range fences {
		if f.Epoch > epoch && f.StartOffset <= offset {
			return f, true
		}
	}
	return metadata.EpochStart{}, false
}

// checkAppend judges batches a follower engine is about to append: each
// must be byte for byte a batch some leader produced, and none may lie past
// a fence the engine has handled.
func (inst *followerInst) checkAppend(tp metadata.TopicPartition, batches []combiner.Batch) {
	fences := inst.fencesFor(tp)
	w := inst.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range batches {
		got := metaOf(b)
		want, ok := w.registry[batchKey{tp, b.Epoch, b.FirstOffset}]
		if !ok || want != got {
			w.violateLocked(KindCorruptAppend, "b%d follower#%d appended %s of %s (hash %x), which no leader produced (want %v, known %v)",
				inst.b.id, inst.n, got, tp, got.sum, want, ok)
		}
		if f, ok := fenced(fences, b.Epoch, b.LastOffset); ok {
			w.stats.FencedAppends++
			w.violateLocked(KindFencedAppend, "b%d follower#%d appended %s of %s after handling the marker (epoch %d, start %d) that fences it",
				inst.b.id, inst.n, got, tp, f.Epoch, f.StartOffset)
		}
	}
}

// legitStart reports whether the controller started epoch of tp at start.
func (w *world) legitStart(tp metadata.TopicPartition, epoch int32, start int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := w.parts[tp]
	if ps == nil {
		return false
	}
	s, ok := ps.starts[epoch]
	return ok && s == start
}

// relay passes a follower's progress to tp's current leader engine, as the
// broker's fetch path would, once the follower's log ends with a record of
// the epoch its broker believes current. A follower may apply entries of a
// deposed leader before it learns of the fence, and its end offset then
// counts records it will truncate; the leader's garbage collector cannot
// tell (ReportApplied carries no epoch), so the broker must not report them.
// A follower whose last record has the current epoch has merged the current
// leader's publication, its whole lineage, and truncated any divergence.
// Config.RelayUnchecked relays everything, as walstore's documentation of
// OnApplied reads today.
func (w *world) relay(b *broker, tp metadata.TopicPartition, end int64) {
	if !w.cfg.RelayUnchecked {
		epochs, err := b.log.Epochs(tp)
		b.vmu.Lock()
		current := b.view[tp].epoch
		b.vmu.Unlock()
		if err != nil || len(epochs) == 0 || epochs[len(epochs)-1].Epoch != current {
			return
		}
	}
	w.mu.Lock()
	l := w.relayTo[tp]
	w.mu.Unlock()
	if l != nil {
		l.ReportApplied(tp, b.id, end)
	}
}
