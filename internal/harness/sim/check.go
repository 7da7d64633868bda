package sim

import (
	"slices"

	"github.com/activetier/activetier/metadata"
)

// checkQuiescent checks the invariants that need a consistent state: the
// driver calls it between events, where every state is one.
func (w *world) checkQuiescent() {
	w.checkDurableOffsets()
	w.checkDivergenceKept()
	if w.model != nil {
		w.model.checkHealth()
	}
}

// checkDurableOffsets checks each current leader's DurableOffset: it may not
// exceed the leader's log end, and every batch below it must be readable
// without the leader: in a stored object, or on a follower.
func (w *world) checkDurableOffsets() {
	for _, tp := range w.tps {
		ps := w.parts[tp]
		l := w.brokers[ps.leader]
		if !l.up || l.node == nil {
			continue
		}
		d := l.node.durableOffset(tp)
		start, truth := l.log.snapshot(tp)
		if e := end(start, truth); d > e {
			w.violate(KindDurableLost, "b%d, leader of %s at epoch %d, reports offsets below %d durable, but its log ends at %d", l.id, tp, ps.epoch, d, e)
			continue
		}
		i, _ := slices.BinarySearchFunc(truth, ps.durChecked, func(m batchMeta, off int64) int { return cmpInt(m.last, off) })
		for ; i < len(truth) && truth[i].last < d; i++ {
			if !w.checkDurableClaim(l.id, tp, truth[i], "DurableOffset") {
				break
			}
		}
		ps.durChecked = max(ps.durChecked, d)
	}
}

// checkDurable checks a durable claim about batch m of tp, made by broker
// claimant: if m is still in the true log, it must be in a stored object or
// on a follower, so that losing the leader does not lose it.
func (w *world) checkDurable(claimant int32, tp metadata.TopicPartition, m batchMeta, how string) {
	ps := w.parts[tp]
	if !w.brokers[ps.leader].log.holds(tp, m) {
		return // superseded by a later epoch: no longer the partition's
	}
	w.checkDurableClaim(claimant, tp, m, how)
}

func (w *world) checkDurableClaim(claimant int32, tp metadata.TopicPartition, m batchMeta, how string) bool {
	if w.liveCopy(tp, m, nil) {
		return true
	}
	ps := w.parts[tp]
	for _, r := range ps.replicas {
		if r != ps.leader && w.brokers[r].log.holds(tp, m) {
			return true
		}
	}
	w.violate(KindDurableLost, "b%d reported %s of %s durable (%s), but no stored object holds it and no follower does either", claimant, m, tp, how)
	return false
}

// checkDivergenceKept checks that no follower still holds a record that a
// marker it has handled fences: once an engine has handled the marker of
// epoch e' starting at s, records of older epochs at s and beyond must be
// gone from its log.
func (w *world) checkDivergenceKept() {
	for _, id := range w.ids {
		b := w.brokers[id]
		inst := b.follower
		if !b.up || inst == nil {
			continue
		}
		for _, tp := range w.tps {
			if !b.follows(tp) {
				continue
			}
			fences := inst.fencesFor(tp)
			if len(fences) == 0 {
				continue
			}
			lowest := fences[0].StartOffset
			for _, f := range fences {
				lowest = min(lowest, f.StartOffset)
			}
			_, log := b.log.snapshot(tp)
			for i := len(log) - 1; i >= 0 && log[i].last >= lowest; i-- {
				if f, ok := fenced(fences, log[i].epoch, log[i].last); ok {
					w.violate(KindDivergenceKept, "b%d follower#%d still holds %s of %s after handling the marker (epoch %d, start %d) that fences it",
						b.id, inst.n, log[i], tp, f.Epoch, f.StartOffset)
					break
				}
			}
		}
	}
}
