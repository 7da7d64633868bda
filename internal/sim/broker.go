package sim

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// broker is one simulated broker: its store, its local log, its own view of
// leadership (which a zombie keeps after the controller moved on), and its
// Node. The driver tells the Node of every role change the broker's view
// goes through, as a broker's controller handling would.
type broker struct {
	w     *world
	id    int32
	az    string
	store simStore
	log   *brokerLog
	up    bool // driver only

	vmu  sync.Mutex
	view map[metadata.TopicPartition]viewEntry
	// since counts, per partition, the times the broker began to follow
	// it; paused partitions it follows but has stopped replicating for a
	// while (world.followerCrash).
	since  map[metadata.TopicPartition]uint64
	paused map[metadata.TopicPartition]bool

	// Driver-only engine state.
	refInc  int
	refStop func()
	node    *walstore.Node
	nodeInc int
	nodeCtx context.Context
	stop    func()
	waiters sync.WaitGroup // acks-on-upload producers waiting on WaitDurable
	// follower judges the appends of this incarnation's follower side;
	// with a reference follower it is that engine, which follows the view
	// by itself.
	follower *followerInst
}

// viewEntry is what a broker believes about one partition.
type viewEntry struct {
	replicas []int32
	leader   int32
	epoch    int32
}

// role is what a broker's view makes it for tp: leader, follower or nothing.
type role int

const (
	roleNone role = iota
	roleLeader
	roleFollower
)

// followersOf returns the replicas the broker believes follow tp's leader.
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

// follows reports whether the broker believes it follows tp and has not
// paused replicating it.
func (b *broker) follows(tp metadata.TopicPartition) bool {
	b.vmu.Lock()
	defer b.vmu.Unlock()
	return roleIn(b.id, b.view[tp]) == roleFollower && !b.paused[tp]
}

func roleIn(id int32, v viewEntry) role {
	switch {
	case v.leader == id:
		return roleLeader
	case slices.Contains(v.replicas, id):
		return roleFollower
	}
	return roleNone
}

// setView changes what the broker believes about tp and, if its Node runs,
// tells the Node as a broker does: a follower follows the new leader at
// the new epoch; a broker that is no longer a replica stops replicating.
// Becoming leader is the driver's own step (see world.elect). If the
// broker newly follows tp, the checks learn of it before the Node can act.
func (b *broker) setView(tp metadata.TopicPartition, v viewEntry) {
	b.vmu.Lock()
	before := roleIn(b.id, b.view[tp])
	if roleIn(b.id, v) != before && b.refStop != nil {
		// The reference follower stops before the role changes and a new
		// one starts after, as follower engines did before the Node.
		b.vmu.Unlock()
		b.stopRef()
		defer b.startRef()
		b.vmu.Lock()
	}
	v.replicas = slices.Clone(v.replicas)
	b.view[tp] = v
	after := roleIn(b.id, v)
	if after == roleFollower && before != roleFollower {
		b.since[tp]++
	}
	paused := b.paused[tp]
	if after != roleFollower {
		delete(b.paused, tp)
	}
	b.vmu.Unlock()
	if b.node == nil {
		return
	}
	if paused && after == roleFollower {
		return
	}
	ctx := context.Background()
	switch {
	case after == roleFollower:
		if before != roleFollower && b.follower != nil {
			b.follower.followsAgain(tp)
		}
		b.becomeFollower(tp, v)
	case after == roleNone && before != roleNone:
		if err := b.node.StopReplica(ctx, tp); err != nil {
			b.w.violate(KindEngineError, "b%d StopReplica(%s): %v", b.id, tp, err)
		}
	}
}

// pause stops the broker replicating tp, which it follows, until resumed,
// and reports whether it was paused already.
func (b *broker) pause(tp metadata.TopicPartition) bool {
	if b.refStop != nil {
		b.stopRef()
		defer b.startRef()
	}
	b.vmu.Lock()
	defer b.vmu.Unlock()
	was := b.paused[tp]
	b.paused[tp] = true
	return was
}

// follow makes the broker's Node follow tp again, as its view says, after
// it stopped replicating it: its follower side starts tp afresh, and so
// do the checks.
func (b *broker) follow(tp metadata.TopicPartition) {
	b.vmu.Lock()
	v := b.view[tp]
	b.vmu.Unlock()
	if b.follower != nil {
		b.follower.followsAgain(tp)
	}
	b.becomeFollower(tp, v)
}

// becomeFollower tells the Node the broker follows tp as v says. With a
// reference follower, which follows by itself, the Node only stops leading.
func (b *broker) becomeFollower(tp metadata.TopicPartition, v viewEntry) {
	ctx := context.Background()
	if b.w.cfg.WeakFencing || b.w.cfg.ReferenceFollower {
		if err := b.node.StopReplica(ctx, tp); err != nil {
			b.w.violate(KindEngineError, "b%d StopReplica(%s): %v", b.id, tp, err)
		}
		return
	}
	if err := b.node.BecomeFollower(ctx, tp, v.epoch, v.leader); err != nil {
		b.w.violate(KindEngineError, "b%d BecomeFollower(%s, e%d, b%d): %v", b.id, tp, v.epoch, v.leader, err)
	}
}

// becomeLeader makes the broker's Node lead tp at epoch, with the followers
// its view names.
func (b *broker) becomeLeader(tp metadata.TopicPartition, epoch int32, from int64) {
	if err := b.node.BecomeLeader(context.Background(), tp, epoch, b.followersOf(tp), from); err != nil {
		b.w.violate(KindEngineError, "b%d BecomeLeader(%s, e%d, republish from %d): %v", b.id, tp, epoch, from, err)
	}
}

// start starts a new incarnation of the broker's Node, and tells it what
// the broker's view makes it follow. Its local log is the broker's, kept
// across incarnations; everything else is new. Partitions the view says it
// leads are the driver's to elect again.
func (b *broker) start() {
	w := b.w
	b.nodeInc++
	b.vmu.Lock()
	clear(b.paused) // a restart ends every pause
	b.vmu.Unlock()
	inst := &followerInst{w: w, b: b, n: b.nodeInc,
		fences: make(map[metadata.TopicPartition][]metadata.EpochStart), from: make(map[metadata.TopicPartition]int)}
	view := newMetaView(w, inst, w.cfg.Seed^uint64(b.id)<<40^uint64(b.nodeInc)<<48)
	ref := w.cfg.WeakFencing || w.cfg.ReferenceFollower
	cfg := walstore.NodeConfig{
		BrokerID: b.id, Store: b.store, Log: view, Local: followerLog{b.log, inst},
		Leader: w.p.leader, Follower: w.p.follower,
		OnProgress: func(p walstore.Progress) { w.relay(p) },
		Seed:       w.cfg.Seed ^ uint64(b.id)<<40 ^ uint64(b.nodeInc)<<48,
		Logger:     w.logger(b.name("node#" + strconv.Itoa(b.nodeInc))),
	}
	if ref {
		// The Node only leads: the reference follower appends, and it
		// alone reads the view whose deliveries the checks count.
		cfg.Local, cfg.Log = b.log, w.meta
	}
	n, err := walstore.NewNode(cfg)
	if err != nil {
		w.violate(KindHarness, "b%d: NewNode: %v", b.id, err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil || ctx.Err() == nil {
				w.violate(KindEngineError, "b%d %s#%d: Run returned %v before it was stopped", b.id, name, inst.n, err)
			}
		}()
	}
	// The Node learns what its broker follows before it reads anything, as
	// a broker restarting learns its roles before it fetches: a message it
	// read first would count as handled for a partition it then ignored.
	if !ref {
		for _, tp := range w.tps {
			b.vmu.Lock()
			v := b.view[tp]
			b.vmu.Unlock()
			if roleIn(b.id, v) == roleFollower {
				if err := n.BecomeFollower(context.Background(), tp, v.epoch, v.leader); err != nil {
					w.violate(KindEngineError, "b%d BecomeFollower(%s): %v", b.id, tp, err)
				}
			}
		}
	}
	inst.eng = nodeFollower{n} // before Run: the checks of its first append read it
	run("node", n.Run)
	b.node, b.nodeCtx, b.follower = n, ctx, inst
	b.stop = func() {
		b.stopRef()
		cancel()
		wg.Wait()
	}
	if ref {
		b.startRef()
	}

}

// startRef starts a new incarnation of the reference follower, which
// follows what the broker's view says by itself. As this harness did with
// every follower engine before the Node, a broker restarts it around each
// of its role changes (restartRef), so no state from before one is used.
func (b *broker) startRef() {
	w := b.w
	b.refInc++
	inst := &followerInst{w: w, b: b, n: b.refInc,
		fences: make(map[metadata.TopicPartition][]metadata.EpochStart), from: make(map[metadata.TopicPartition]int)}
	seed := w.cfg.Seed ^ uint64(b.id)<<40 ^ uint64(b.refInc)<<52
	fcfg := w.p.follower
	fcfg.BrokerID, fcfg.Store, fcfg.Local = b.id, b.store, followerLog{b.log, inst}
	fcfg.Log = newMetaView(w, inst, seed)
	fcfg.Seed = seed ^ 0xf0110e
	fcfg.Logger = w.logger(b.name("reference follower#" + strconv.Itoa(b.refInc)))
	fcfg.OnApplied = func(p walstore.Progress) { w.relay(p) }
	rf := newRefFollower(fcfg, b.role, w.cfg.WeakFencing)
	inst.eng = rf
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := rf.Run(ctx); err != nil || ctx.Err() == nil {
			w.violate(KindEngineError, "b%d reference follower#%d: Run returned %v before it was stopped", b.id, inst.n, err)
		}
	}()
	b.follower = inst
	b.refStop = func() {
		cancel()
		<-done
	}
}

func (b *broker) stopRef() {
	if b.refStop != nil {
		b.refStop()
		b.refStop = nil
	}
}

// restartRef restarts the reference follower, if there is one.
func (b *broker) restartRef() {
	if b.refStop != nil {
		b.stopRef()
		b.startRef()
	}
}

// role is the reference follower's view of the broker's role for tp.
func (b *broker) role(tp metadata.TopicPartition) (since uint64, leader int32, ok bool) {
	b.vmu.Lock()
	defer b.vmu.Unlock()
	v := b.view[tp]
	return b.since[tp], v.leader, roleIn(b.id, v) == roleFollower && !b.paused[tp]
}

// halt stops the broker's Node, as a crash would.
func (b *broker) halt() {
	if b.node == nil {
		return
	}
	b.stop()
	b.waiters.Wait()
	b.node, b.stop, b.follower = nil, nil, nil
}

func (b *broker) name(engine string) string {
	return "b" + strconv.Itoa(int(b.id)) + " " + engine
}

// followerEngine is what the checks need of a follower engine: the Node's
// follower side, or the reference follower.
type followerEngine interface {
	Stats() walstore.FollowerStats
}

type nodeFollower struct{ n *walstore.Node }

func (f nodeFollower) Stats() walstore.FollowerStats { return f.n.Stats().Follower }

// followerInst is one incarnation of a broker's follower side, with what
// the checks need to judge its appends: the messages it has been handed and
// the legitimate epoch starts among them.
type followerInst struct {
	w   *world
	b   *broker
	n   int
	eng followerEngine

	mu      sync.Mutex
	markers [][]metadata.EpochStart // per message handed out, in order
	cursor  int                     // messages folded into fences
	fences  map[metadata.TopicPartition][]metadata.EpochStart
	// from is, per partition the broker started following while this
	// engine ran, the first message that counts for it: the engine
	// forgot the partition's markers and starts it afresh.
	from map[metadata.TopicPartition]int
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

// followsAgain notes that the broker follows tp again: what the engine
// handled of tp before does not count, and neither, conservatively, do
// messages already handed out.
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

// relay passes a follower's progress to the Node of the leader it names,
// as the broker's fetch path would; that Node judges it.
func (w *world) relay(p walstore.Progress) {
	if b := w.brokers[p.Leader]; b != nil {
		w.mu.Lock()
		n := w.nodes[p.Leader]
		w.mu.Unlock()
		if n != nil {
			n.RecordProgress(p)
		}
	}
}
