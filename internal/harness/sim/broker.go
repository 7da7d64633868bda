package sim

import (
	"slices"
	"strconv"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// broker is one simulated broker: its store, its local log, its own view of
// leadership (which a zombie keeps after the controller moved on), and the
// current incarnation of its engines (a simNode). The driver tells the
// node of every role change the broker's view goes through, as a broker's
// controller handling would.
type broker struct {
	w     *world
	id    int32
	az    string
	store *simStore
	log   *brokerLog
	up    bool

	view map[metadata.TopicPartition]viewEntry
	// since counts, per partition, the times the broker began to follow
	// it; paused partitions it follows but has stopped replicating for a
	// while (world.followerCrash).
	since  map[metadata.TopicPartition]uint64
	paused map[metadata.TopicPartition]bool

	node    *simNode // nil while the broker is down
	nodeInc int
	ref     *refFollower // the reference follower, if the run uses it
	refInc  int
	// follower judges the appends of the current follower side: the
	// node's core, or the reference follower.
	follower *followerInst
}

// viewEntry is what a broker believes about one partition.
type viewEntry struct {
	replicas []int32
	leader   int32
	epoch    int32
}

// followersOf returns the replicas the broker believes follow tp's leader.
func (b *broker) followersOf(tp metadata.TopicPartition) []int32 {
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
	return roleIn(b.id, b.view[tp]) == walstore.Following && !b.paused[tp]
}

// roleIn is what a broker's view makes it for tp: leader, follower or
// nothing.
func roleIn(id int32, v viewEntry) walstore.Role {
	switch {
	case v.leader == id:
		return walstore.Leading
	case slices.Contains(v.replicas, id):
		return walstore.Following
	}
	return walstore.NoRole
}

// refMode reports whether the reference follower follows instead of the
// nodes' follower cores.
func (w *world) refMode() bool { return w.cfg.WeakFencing || w.cfg.ReferenceFollower }

// setView changes what the broker believes about tp and, if its node runs,
// tells the node as a broker does: a follower follows the new leader at
// the new epoch; a broker that is no longer a replica stops replicating.
// Becoming leader is the driver's own step (see world.elect). If the
// broker newly follows tp, the checks learn of it before the node can act.
func (b *broker) setView(tp metadata.TopicPartition, v viewEntry) {
	before := roleIn(b.id, b.view[tp])
	after := roleIn(b.id, v)
	if after != before && b.ref != nil {
		// The reference follower stops before the role changes and a new
		// one starts after, as follower engines did before the Node.
		b.stopRef()
		defer b.startRef()
	}
	v.replicas = slices.Clone(v.replicas)
	b.view[tp] = v
	if after == walstore.Following && before != walstore.Following {
		b.since[tp]++
	}
	paused := b.paused[tp]
	if after != walstore.Following {
		delete(b.paused, tp)
	}
	if b.node == nil || paused && after == walstore.Following {
		return
	}
	switch {
	case after == walstore.Following:
		if before != walstore.Following && b.follower != nil {
			b.follower.followsAgain(tp)
		}
		b.becomeFollower(tp, v)
	case after == walstore.NoRole && before != walstore.NoRole:
		b.node.stopReplica(tp)
	}
}

// pause stops the broker replicating tp, which it follows, until resumed,
// and reports whether it was paused already.
func (b *broker) pause(tp metadata.TopicPartition) bool {
	if b.ref != nil {
		b.stopRef()
		defer b.startRef()
	}
	was := b.paused[tp]
	b.paused[tp] = true
	return was
}

// follow makes the broker's node follow tp again, as its view says, after
// it stopped replicating it: its follower side starts tp afresh, and so
// do the checks.
func (b *broker) follow(tp metadata.TopicPartition) {
	if b.follower != nil {
		b.follower.followsAgain(tp)
	}
	b.becomeFollower(tp, b.view[tp])
}

// becomeFollower tells the node the broker follows tp as v says. With a
// reference follower, which follows by itself, the node only stops leading.
func (b *broker) becomeFollower(tp metadata.TopicPartition, v viewEntry) {
	if b.w.refMode() {
		b.node.stopReplica(tp)
		return
	}
	b.node.becomeFollower(tp, v.epoch, v.leader)
}

// start starts a new incarnation of the broker's engines, and tells them
// what the broker's view makes it follow. Its local log is the broker's,
// kept across incarnations; everything else is new. Partitions the view
// says it leads are the driver's to elect again.
func (b *broker) start() {
	b.nodeInc++
	clear(b.paused) // a restart ends every pause
	var inst *followerInst
	if !b.w.refMode() {
		inst = newFollowerInst(b, b.nodeInc)
	}
	n, err := newSimNode(b, b.nodeInc, inst)
	if err != nil {
		b.w.violate(KindHarness, "b%d: starting its engines: %v", b.id, err)
		return
	}
	b.node, b.follower = n, inst
	if b.w.refMode() {
		b.startRef()
		return
	}
	// The node learns what its broker follows before it reads anything, as
	// a broker restarting learns its roles before it fetches: a message it
	// read first would count as handled for a partition it then ignored.
	for _, tp := range b.w.tps {
		if v := b.view[tp]; roleIn(b.id, v) == walstore.Following {
			n.becomeFollower(tp, v.epoch, v.leader)
		}
	}
}

// startRef starts a new incarnation of the reference follower, which
// follows what the broker's view says by itself. As this harness did with
// every follower engine before the Node, a broker restarts it around each
// of its role changes, so no state from before one is used.
func (b *broker) startRef() {
	b.refInc++
	inst := newFollowerInst(b, b.refInc)
	b.ref = newRefFollower(b, inst, b.w.cfg.WeakFencing)
	b.follower = inst
}

func (b *broker) stopRef() {
	if b.ref != nil {
		b.ref.stop()
		b.ref = nil
	}
}

// role is the reference follower's view of the broker's role for tp.
func (b *broker) role(tp metadata.TopicPartition) (since uint64, leader int32, ok bool) {
	v := b.view[tp]
	return b.since[tp], v.leader, roleIn(b.id, v) == walstore.Following && !b.paused[tp]
}

// halt stops the broker's engines, as a crash would.
func (b *broker) halt() {
	b.stopRef()
	if b.node != nil {
		b.node.halt()
	}
	b.node, b.follower = nil, nil
}

func (b *broker) name(engine string) string {
	return "b" + strconv.Itoa(int(b.id)) + " " + engine
}

// followerInst is one incarnation of a broker's follower side, with what
// the checks need to judge its appends: the messages it has been handed and
// the legitimate epoch starts among them.
type followerInst struct {
	w *world
	b *broker
	n int
	// handled counts the messages whose handling began: the follower
	// core's Messages, or the reference follower's.
	handled func() uint64

	markers [][]metadata.EpochStart // per message handed out, in order
	cursor  int                     // messages folded into fences
	fences  map[metadata.TopicPartition][]metadata.EpochStart
	// from is, per partition the broker started following while this
	// engine ran, the first message that counts for it: the engine
	// forgot the partition's markers and starts it afresh.
	from map[metadata.TopicPartition]int
}

func newFollowerInst(b *broker, n int) *followerInst {
	return &followerInst{w: b.w, b: b, n: n,
		fences: make(map[metadata.TopicPartition][]metadata.EpochStart), from: make(map[metadata.TopicPartition]int)}
}

// delivered records the messages handed to the follower, in order; it
// handles them in that order.
func (inst *followerInst) delivered(recs []metadata.Record) {
	for _, r := range recs {
		m, err := metadata.DecodeMessage(r.Value)
		if err != nil {
			continue // the follower skips it too
		}
		inst.markers = append(inst.markers, m.Markers)
	}
}

// fencesFor returns the legitimate epoch starts of tp among the messages
// the follower has handled: (epoch, start) pairs the controller decided.
func (inst *followerInst) fencesFor(tp metadata.TopicPartition) []metadata.EpochStart {
	handled := int(inst.handled())
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
	return inst.fences[tp]
}

// followsAgain notes that the broker follows tp again: what the follower
// handled of tp before does not count, and neither, conservatively, do
// messages already handed out.
func (inst *followerInst) followsAgain(tp metadata.TopicPartition) {
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

// checkAppend judges batches a follower is about to append: each must be
// byte for byte a batch some leader produced, and none may lie past a
// fence the follower has handled.
func (inst *followerInst) checkAppend(tp metadata.TopicPartition, batches []storage.Batch) {
	fences := inst.fencesFor(tp)
	w := inst.w
	for _, b := range batches {
		got := metaOf(b)
		want, ok := w.registry[batchKey{tp, b.Epoch, b.FirstOffset}]
		if !ok || want != got {
			w.violate(KindCorruptAppend, "b%d follower#%d appended %s of %s (hash %x), which no leader produced (want %v, known %v)",
				inst.b.id, inst.n, got, tp, got.sum, want, ok)
		}
		if f, ok := fenced(fences, b.Epoch, b.LastOffset); ok {
			w.stats.FencedAppends++
			w.violate(KindFencedAppend, "b%d follower#%d appended %s of %s after handling the marker (epoch %d, start %d) that fences it",
				inst.b.id, inst.n, got, tp, f.Epoch, f.StartOffset)
		}
	}
}

// legitStart reports whether the controller started epoch of tp at start.
func (w *world) legitStart(tp metadata.TopicPartition, epoch int32, start int64) bool {
	ps := w.parts[tp]
	if ps == nil {
		return false
	}
	s, ok := ps.starts[epoch]
	return ok && s == start
}

// relay passes a follower's progress to the node of the leader it names,
// as the broker's fetch path would; that node's leader core judges it.
func (w *world) relay(tp metadata.TopicPartition, leader, follower int32, end int64, lastEpoch int32) {
	if b := w.brokers[leader]; b != nil && b.node != nil {
		b.node.progress(tp, follower, end, lastEpoch)
	}
	if w.adv != nil {
		w.adv.relayed(tp, leader, follower, end, lastEpoch)
		delete(w.lostTail[tp], follower)
	}
}
