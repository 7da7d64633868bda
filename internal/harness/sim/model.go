package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// model is the reference model of walstore.Node's broker contract, for
// every partition at every node (one incarnation of a broker's engines).
// It knows only what the calls promise, not how the engines keep the
// promises, and judges every call the adversary and the controller make:
//
//   - A partition's role at a node is what the last transition that took
//     effect made it: leading at an epoch, following a leader at an
//     epoch, or neither. The cores do what the role says: the leader core
//     leads it exactly when the role is leading, the follower core
//     follows it exactly when the role is following.
//   - BecomeLeader(epoch, followers) is refused when epoch is not above
//     the one the node follows the partition at, or is below the one it
//     leads at, or, not leading, not above the last it led at (an epoch
//     names one leadership); when the broker is among the followers; and
//     when the local log's EndOffset fails. It takes effect otherwise.
//     Leading already, it continues the same leadership (at the new
//     epoch too); otherwise it begins a new one.
//   - BecomeFollower and StopReplica end the leadership, if any. A
//     BecomeFollower at an epoch below the one the node leads or follows
//     at, or whose context ends while it waits, is refused.
//   - A refused transition changes nothing: the error says the role in
//     effect is the one before the call, Role says so too, and the cores
//     still do it.
//   - A leadership that ends ends its Appends waiting for buffer space
//     (ErrNotLeader): none outlives it.
//   - WaitDurable(epoch, offset) and WaitReplicated(epoch, offset) return
//     nil only while the leadership that held epoch when the wait was
//     made is still the node's, never from a later one. A nil from
//     WaitReplicated covers every batch of epoch up to offset: the
//     controller elects only in-sync replicas, which hold them, so every
//     replica holds them, byte for byte, at the end.
//   - While a leadership's markers cannot be published because
//     LocalLog.Epochs fails, PartitionError names the partition.
//   - Sweep deletes no object the node stored, and was told of, for a
//     leadership that lasts and has not published it yet.
//   - Once faults stop, every follower in the placement catches up.
type model struct {
	w     *world
	state map[*simNode]map[metadata.TopicPartition]*nodeTP
	// acks are the WaitReplicated calls that returned nil.
	acks []ack
	// watch are the leaderships whose markers an Epochs failure holds
	// back: the adversary arms one, the failure's first read fires it.
	watch []*failWatch
	leads int // leaderships begun, to name them
}

// nodeTP is one partition's contract state at one node.
type nodeTP struct {
	role    walstore.RoleState
	lead    *leadModel // the current leadership, nil if none
	lastLed int32      // the last epoch of an ended leadership, -1 if none
}

// leadModel is one leadership: the epochs it has held, and the core's
// generation for it.
type leadModel struct {
	id     int
	epochs []int32
	gen    uint64
}

// ack is a WaitReplicated call that returned nil, and the batches it
// covers.
type ack struct {
	at      time.Duration
	broker  int32
	tp      metadata.TopicPartition
	epoch   int32
	offset  int64
	batches []batchMeta
}

// failWatch is a leadership whose lineage reads fail for a while.
type failWatch struct {
	n     *simNode
	tp    metadata.TopicPartition
	gen   uint64
	fired bool
}

// call is a transition as the model judges it.
type call struct {
	name      string // "BecomeLeader", "BecomeFollower", "StopReplica"
	epoch     int32
	leader    int32
	followers []int32
	// endFails: the local log's EndOffset fails for this call;
	// cancelled: its context ends while it waits.
	endFails, cancelled bool
}

func newModel(w *world) *model {
	return &model{w: w, state: make(map[*simNode]map[metadata.TopicPartition]*nodeTP)}
}

// contractOn reports whether the run checks the contract: with attacks,
// or a weakened library (which only attacks exercise).
func (w *world) contractOn() bool { return w.cfg.Attacks || w.cfg.Weaken != (Weakening{}) }

func (m *model) of(n *simNode, tp metadata.TopicPartition) *nodeTP {
	parts := m.state[n]
	if parts == nil {
		parts = make(map[metadata.TopicPartition]*nodeTP)
		m.state[n] = parts
	}
	st := parts[tp]
	if st == nil {
		st = &nodeTP{role: noRole, lastLed: -1}
		parts[tp] = st
	}
	return st
}

// refusal returns why the model says c must be refused, or "".
func (m *model) refusal(n *simNode, st *nodeTP, c call) string {
	in := st.role
	switch c.name {
	case "BecomeLeader":
		switch {
		case in.Role == walstore.Following && c.epoch <= in.Epoch:
			return fmt.Sprintf("epoch %d is not above epoch %d, which it follows", c.epoch, in.Epoch)
		case in.Role != walstore.NoRole && c.epoch < in.Epoch:
			return fmt.Sprintf("epoch %d is below epoch %d, which it leads or follows", c.epoch, in.Epoch)
		case in.Role != walstore.Leading && c.epoch <= st.lastLed:
			return fmt.Sprintf("epoch %d is not above epoch %d, which it led", c.epoch, st.lastLed)
		case slices.Contains(c.followers, n.b.id):
			return "the broker is among its followers"
		case c.endFails:
			return "the local log's EndOffset failed"
		}
	case "BecomeFollower":
		switch {
		case in.Role != walstore.NoRole && c.epoch < in.Epoch:
			return fmt.Sprintf("epoch %d is below epoch %d, which it leads or follows", c.epoch, in.Epoch)
		case c.cancelled:
			return "its context ended"
		}
	}
	return ""
}

// transition judges c, made at n for tp, and its result err.
func (m *model) transition(n *simNode, tp metadata.TopicPartition, c call, err error) {
	if n.stopped {
		return
	}
	st := m.of(n, tp)
	before := st.role
	what := fmt.Sprintf("b%d %s(%s, e%d)", n.b.id, c.name, tp, c.epoch)
	if why := m.refusal(n, st, c); why != "" && err == nil {
		m.w.violate(KindBadTransition, "%s took effect, but must be refused: %s", what, why)
		return
	}
	if err != nil {
		var te *walstore.TransitionError
		switch {
		case !errors.As(err, &te):
			m.w.violate(KindBadTransition, "%s failed without saying what is in effect: %v", what, err)
		case te.InEffect != before:
			m.w.violate(KindBadTransition, "%s was refused saying %s is in effect; it was %s", what, te.InEffect, before)
		case n.role(tp) != before:
			m.w.violate(KindBadTransition, "%s was refused, yet Role says %s; it was %s", what, n.role(tp), before)
		}
		m.checkCores(n, tp, before, "after the refused "+what)
		return
	}
	switch c.name {
	case "BecomeLeader":
		if st.lead == nil {
			m.leads++
			st.lead = &leadModel{id: m.leads, epochs: []int32{c.epoch}}
		} else if c.epoch > st.lead.epochs[len(st.lead.epochs)-1] {
			st.lead.epochs = append(st.lead.epochs, c.epoch)
		}
		st.lead.gen, _, _, _ = n.lc.Leadership(tp)
		st.role = walstore.RoleState{Role: walstore.Leading, Epoch: c.epoch, Leader: n.b.id}
	case "BecomeFollower":
		m.endLead(n, tp, st)
		st.role = walstore.RoleState{Role: walstore.Following, Epoch: c.epoch, Leader: c.leader}
	default:
		m.endLead(n, tp, st)
		st.role = noRole
	}
	if n.role(tp) != st.role {
		m.w.violate(KindBadTransition, "%s took effect, yet Role says %s, not %s", what, n.role(tp), st.role)
	}
	m.checkCores(n, tp, st.role, "after "+what)
}

// endLead ends st's leadership: no Append waiting for buffer space in it
// may be left waiting.
func (m *model) endLead(n *simNode, tp metadata.TopicPartition, st *nodeTP) {
	if st.lead == nil {
		return
	}
	for _, bl := range n.blocked {
		if bl.tp == tp && bl.gen == st.lead.gen {
			m.w.violate(KindAppendOutlived, "b%d: an Append to %s waiting for buffer space still waits after its leadership (epochs %v) ended",
				n.b.id, tp, st.lead.epochs)
			break
		}
	}
	st.lastLed = st.lead.epochs[len(st.lead.epochs)-1]
	st.lead = nil
}

// checkCores checks that the cores do what role says of tp.
func (m *model) checkCores(n *simNode, tp metadata.TopicPartition, want walstore.RoleState, when string) {
	_, _, _, leads := n.lc.Leadership(tp)
	follows := n.following[tp]
	got := walstore.NoRole
	switch {
	case leads && follows:
		m.w.violate(KindBadTransition, "b%d both leads and follows %s %s", n.b.id, tp, when)
		return
	case leads:
		got = walstore.Leading
	case follows:
		got = walstore.Following
	}
	if m.w.refMode() && want.Role == walstore.Following && got == walstore.NoRole {
		return // the reference follower follows instead
	}
	switch {
	case got == want.Role:
	case got == walstore.NoRole:
		m.w.violate(KindRoleLost, "b%d neither leads nor follows %s %s, yet %s is in effect", n.b.id, tp, when, want)
	default:
		m.w.violate(KindBadTransition, "b%d's cores have %s %v %s, yet %s is in effect", n.b.id, tp, got, when, want)
	}
}

// waitIssued returns the leadership of n that holds epoch of tp now, or
// nil: the one a wait made now may be answered by.
func (m *model) waitIssued(n *simNode, tp metadata.TopicPartition, epoch int32) *leadModel {
	if l := m.of(n, tp).lead; l != nil && slices.Contains(l.epochs, epoch) {
		return l
	}
	return nil
}

// waitReturned judges a wait's result: nil only from the leadership it
// was made in, still the node's. A nil WaitReplicated is recorded with
// what it covers, and the controller learns that every in-sync replica
// holds it.
func (m *model) waitReturned(n *simNode, tp metadata.TopicPartition, epoch int32, offset int64, replicated bool, issued *leadModel, err error) {
	if err != nil {
		return
	}
	what := "WaitDurable"
	if replicated {
		what = "WaitReplicated"
	}
	if issued == nil || m.of(n, tp).lead != issued {
		m.w.violate(KindAckLost, "b%d %s(%s, e%d, %d) returned nil, but the leadership that held epoch %d when it was made (%v) is not the node's now",
			n.b.id, what, tp, epoch, offset, epoch, issued != nil)
		return
	}
	if !replicated {
		return
	}
	a := ack{at: m.w.now(), broker: n.b.id, tp: tp, epoch: epoch, offset: offset}
	for k, bm := range m.w.registry {
		if k.tp == tp && k.epoch == epoch && k.first <= offset {
			a.batches = append(a.batches, bm)
		}
	}
	slices.SortFunc(a.batches, func(x, y batchMeta) int { return cmpInt(x.first, y.first) })
	m.acks = append(m.acks, a)
	ps := m.w.parts[tp]
	l := m.w.brokers[ps.leader].log
	for _, bm := range a.batches {
		if !l.holds(tp, bm) {
			return // judged at the end
		}
	}
	if len(a.batches) > 0 {
		ps.committed = max(ps.committed, a.batches[len(a.batches)-1].last+1)
	}
}

// finalAcks checks, once every replica caught up, that every batch a
// WaitReplicated acknowledged is in the partition's log.
func (m *model) finalAcks() {
	for _, a := range m.acks {
		ps := m.w.parts[a.tp]
		for _, bm := range a.batches {
			for _, id := range ps.replicas {
				if !m.w.brokers[id].log.holds(a.tp, bm) {
					m.w.violate(KindAckLost, "b%d's WaitReplicated(%s, e%d, %d) returned nil at t=%.3fs, but replica b%d does not hold %s",
						a.broker, a.tp, a.epoch, a.offset, a.at.Seconds(), id, bm)
					return
				}
			}
		}
	}
}

// armFailure watches n's leadership of tp, whose lineage reads fail
// until n.failEpochs says.
func (m *model) armFailure(n *simNode, tp metadata.TopicPartition) {
	gen, _, _, ok := n.lc.Leadership(tp)
	if ok {
		m.watch = append(m.watch, &failWatch{n: n, tp: tp, gen: gen})
	}
}

// epochsFailed notes that a lineage read of tp at n failed.
func (m *model) epochsFailed(n *simNode, tp metadata.TopicPartition) {
	if m == nil {
		return
	}
	for _, fw := range m.watch {
		if fw.n == n && fw.tp == tp {
			fw.fired = true
		}
	}
}

// checkHealth checks that every watched leadership whose markers a
// failing Epochs holds back shows in PartitionError.
func (m *model) checkHealth() {
	kept := m.watch[:0]
	for _, fw := range m.watch {
		gen, _, _, ok := fw.n.lc.Leadership(fw.tp)
		// The failure lasts until the node's window ends (a later attack
		// may have moved it).
		if fw.n.stopped || !ok || gen != fw.gen || !m.w.clock.Before(fw.n.failEpochs[fw.tp]) {
			continue
		}
		if fw.fired && fw.n.partitionError(fw.tp) == nil {
			m.w.violate(KindFailureHidden, "b%d's leadership of %s cannot publish its markers (LocalLog.Epochs fails), but PartitionError says nothing", fw.n.b.id, fw.tp)
			continue
		}
		kept = append(kept, fw)
	}
	clear(m.watch[len(kept):])
	m.watch = kept
}

// swept judges a Sweep of n deleting refs: none may be an object n
// stored for a leadership that lasts and has not published it.
func (m *model) swept(n *simNode, refs []metadata.ObjectRef) {
	for _, r := range refs {
		u, ok := n.unpublished[r]
		if !ok {
			continue
		}
		delete(n.unpublished, r)
		for _, s := range u.sections {
			// Live: the leadership that accepted the data (it held the
			// section's epoch) is still the node's.
			if l := m.of(n, s.Partition).lead; l != nil && slices.Contains(l.epochs, s.Epoch) {
				m.w.violate(KindSweptUnpublished, "b%d swept %s, which holds %s's data of epoch %d, accepted by a leadership that lasts and has not published it",
					n.b.id, r, s.Partition, s.Epoch)
				return
			}
		}
	}
}
