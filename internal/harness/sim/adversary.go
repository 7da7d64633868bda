package sim

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// adversary is a broker that keeps walstore.Node's contract to the
// letter and no further: it makes the calls the contract allows at the
// worst times, and the model (model.go) judges every answer. Its steps
// come at exponentially distributed intervals through the faulty phase
// and draw from a generator of their own, so the seed's other draws stay
// as they were.
type adversary struct {
	w   *world
	rng *rand.Rand
	// history are batches leaders accepted lately, for waits made late.
	history []produced
	// reports are follower reports relayed lately, for stale ones.
	reports []progressReport
}

type produced struct {
	b     int32
	tp    metadata.TopicPartition
	epoch int32
	last  int64
}

type progressReport struct {
	tp               metadata.TopicPartition
	leader, follower int32
	end              int64
	epoch            int32
	// start and last are the follower's log start and the batch that
	// held end-1 when it reported: the report is true again, only stale,
	// while its log still reaches that start and holds that batch.
	start int64
	last  batchMeta
	ok    bool
}

const (
	attackLateWait = iota
	attackEarlyWait
	attackStaleLead
	attackBadReplicas
	attackEndFails
	attackCancelledFollow
	attackBlockedAppend
	attackEpochsFail
	attackMetaOutage
	attackStaleProgress
	attackFollowerBehind
	numAttacks
)

func newAdversary(w *world) *adversary {
	return &adversary{w: w, rng: rand.New(rand.NewPCG(w.cfg.Seed, 0x6164766572736172))}
}

// next schedules the next attack.
func (a *adversary) next() {
	a.w.step(time.Duration(a.rng.ExpFloat64()*float64(150*time.Millisecond)), func() {
		if a.w.failed() {
			return
		}
		a.attack(a.rng.IntN(numAttacks))
		a.next()
	})
}

// accepted records a batch a leader accepted.
func (a *adversary) accepted(b *broker, tp metadata.TopicPartition, m batchMeta) {
	a.history = append(a.history, produced{b: b.id, tp: tp, epoch: m.epoch, last: m.last})
	if len(a.history) > 256 {
		a.history = slices.Delete(a.history, 0, 128)
	}
}

// relayed records a follower's report.
func (a *adversary) relayed(tp metadata.TopicPartition, leader, follower int32, end int64, epoch int32) {
	r := progressReport{tp: tp, leader: leader, follower: follower, end: end, epoch: epoch}
	start, log := a.w.brokers[follower].log.snapshot(tp)
	if i := covering(log, end-1); i >= 0 {
		r.start, r.last, r.ok = start, log[i], true
	}
	a.reports = append(a.reports, r)
	if len(a.reports) > 256 {
		a.reports = slices.Delete(a.reports, 0, 128)
	}
}

// running returns the broker's node if it is up.
func (w *world) running(id int32) *simNode {
	if b := w.brokers[id]; b.up && b.node != nil {
		return b.node
	}
	return nil
}

func (a *adversary) attack(kind int) {
	w := a.w
	sr := rand.New(rand.NewPCG(a.rng.Uint64(), uint64(kind)))
	tp := w.tps[sr.IntN(len(w.tps))]
	ps := w.parts[tp]
	switch kind {
	case attackLateWait:
		if len(a.history) == 0 {
			return
		}
		h := a.history[sr.IntN(len(a.history))]
		if n := w.running(h.b); n != nil {
			a.wait(n, h.tp, h.epoch, h.last, sr.IntN(2) == 0)
		}
	case attackEarlyWait:
		if n := w.running(ps.leader); n != nil {
			a.wait(n, tp, ps.epoch, w.brokers[ps.leader].log.end(tp)+int64(sr.IntN(5)), sr.IntN(2) == 0)
		}
	case attackStaleLead:
		if f := a.follower(tp, sr); f != nil {
			r := f.node.role(tp)
			w.tracef("attack: b%d BecomeLeader(%s) at epoch %d, which it follows", f.id, tp, r.Epoch)
			_ = f.node.tryBecomeLeader(tp, r.Epoch, f.followersOf(tp), -1)
		}
	case attackBadReplicas:
		if f := a.follower(tp, sr); f != nil {
			w.tracef("attack: b%d BecomeLeader(%s) with itself among the followers", f.id, tp)
			_ = f.node.tryBecomeLeader(tp, ps.epoch+1, append(f.followersOf(tp), f.id), -1)
		}
	case attackEndFails:
		if f := a.follower(tp, sr); f != nil {
			w.tracef("attack: b%d BecomeLeader(%s) while its log's EndOffset fails", f.id, tp)
			f.node.failEnd[tp] = true
			_ = f.node.tryBecomeLeader(tp, ps.epoch+1, f.followersOf(tp), -1)
			delete(f.node.failEnd, tp)
		}
	case attackCancelledFollow:
		id := w.ids[sr.IntN(len(w.ids))]
		if n := w.running(id); n != nil && n.fc != nil {
			w.tracef("attack: b%d BecomeFollower(%s) whose context ends", id, tp)
			_ = n.tryBecomeFollower(tp, ps.epoch, ps.replicas[sr.IntN(len(ps.replicas))], true)
		}
	case attackBlockedAppend:
		a.blockedAppend(tp, sr)
	case attackEpochsFail:
		l := w.brokers[ps.leader]
		if n := w.running(l.id); n != nil {
			until := w.clock.Add(time.Duration(200+sr.IntN(2000)) * time.Millisecond)
			w.tracef("attack: b%d's LocalLog.Epochs of %s fails until t=%.3fs, and it takes a new epoch", l.id, tp, until.Sub(w.start).Seconds())
			n.failEpochs[tp] = until
			if w.elect(tp, sr, false, true, true) {
				w.model.armFailure(n, tp)
			}
		}
	case attackMetaOutage:
		id := w.ids[sr.IntN(len(w.ids))]
		if n := w.running(id); n != nil {
			d := time.Duration(500+sr.IntN(3000)) * time.Millisecond
			age := d / time.Duration(2+sr.IntN(4))
			n.metaDownUntil = w.clock.Add(d)
			w.tracef("attack: b%d's metadata log is down for %v; it sweeps objects older than %v", id, d, age)
			for _, at := range []time.Duration{d / 2, d * 9 / 10} {
				w.step(at, func() {
					if !n.stopped {
						n.sweep(age)
					}
				})
			}
		}
	case attackStaleProgress:
		if len(a.reports) == 0 {
			return
		}
		// A report delivered late, as a fetch request may be, but still
		// true: one from before the follower lost what it reported (a
		// reassignment deleted its log, it truncated) no fetch path
		// delivers, since the follower's session it came from is over.
		r := a.reports[sr.IntN(len(a.reports))]
		f := w.brokers[r.follower].log
		if start, _ := f.snapshot(r.tp); !r.ok || start > r.start || !f.holds(r.tp, r.last) {
			return
		}
		if n := w.running(r.leader); n != nil {
			w.tracef("attack: a stale report of b%d for %s reaches b%d: end %d, epoch %d", r.follower, r.tp, r.leader, r.end, r.epoch)
			n.progress(r.tp, r.follower, r.end, r.epoch)
		}
	case attackFollowerBehind:
		f := a.follower(tp, sr)
		if f == nil {
			return
		}
		d := time.Duration(500+sr.IntN(3000)) * time.Millisecond
		elect := sr.IntN(2) == 0
		old := ps.leader
		w.tracef("attack: follower b%d of %s goes down for %v (its leader moves: %v)", f.id, tp, d, elect)
		w.crashBroker(f)
		if elect && w.elect(tp, sr, false, false, false) {
			if n := w.running(old); n != nil {
				n.sweep(0) // what the old leadership kept is abandoned now
			}
		}
		w.step(d, func() {
			if !f.up {
				a.loseTail(f, tp, sr)
				w.restartBroker(f, sr)
			}
		})
	}
}

// loseTail truncates the log of tp at f, a follower coming back, at a
// batch boundary: the tail an unclean shutdown loses. It does so only
// where another follower keeps the records f loses (at RF 3, one
// follower at a time), so that nothing acknowledged depends on f alone.
func (a *adversary) loseTail(f *broker, tp metadata.TopicPartition, sr *rand.Rand) {
	w := a.w
	ps := w.parts[tp]
	_, log := f.log.snapshot(tp)
	if len(ps.replicas) < 3 || len(w.lostTail[tp]) > 0 || len(log) == 0 || ps.leader == f.id || !slices.Contains(ps.replicas, f.id) {
		return
	}
	to := log[sr.IntN(len(log))].first
	if err := f.log.Truncate(context.Background(), tp, to); err != nil {
		w.violate(KindHarness, "b%d: truncating %s to %d: %v", f.id, tp, to, err)
		return
	}
	if w.lostTail == nil {
		w.lostTail = make(map[metadata.TopicPartition]map[int32]bool)
	}
	if w.lostTail[tp] == nil {
		w.lostTail[tp] = make(map[int32]bool)
	}
	w.lostTail[tp][f.id] = true
	w.tracef("attack: b%d comes back with %s's log truncated to %d", f.id, tp, to)
}

// follower returns a running follower of tp, if any.
func (a *adversary) follower(tp metadata.TopicPartition, sr *rand.Rand) *broker {
	ps := a.w.parts[tp]
	var fs []*broker
	for _, id := range ps.replicas {
		if b := a.w.brokers[id]; id != ps.leader && b.up && b.node != nil && b.node.role(tp).Role == walstore.Following {
			fs = append(fs, b)
		}
	}
	if len(fs) == 0 {
		return nil
	}
	return fs[sr.IntN(len(fs))]
}

// wait makes a WaitDurable or WaitReplicated call at n and has the model
// judge its result.
func (a *adversary) wait(n *simNode, tp metadata.TopicPartition, epoch int32, offset int64, replicated bool) {
	w := a.w
	issued := w.model.waitIssued(n, tp, epoch)
	w.tracef("attack: b%d waits for %s offset %d of epoch %d (replicated %v)", n.b.id, tp, offset, epoch, replicated)
	n.wait(tp, epoch, offset, replicated, func(err error) {
		if err == nil {
			w.tracef("b%d's wait for %s offset %d of epoch %d returns", n.b.id, tp, offset, epoch)
		}
		w.model.waitReturned(n, tp, epoch, offset, replicated, issued, err)
	})
}

// blockedAppend fills tp's leader's buffer, with another partition's data
// where it leads one, and makes an Append to tp that waits for space;
// then, soon, the controller moves tp's leadership away.
func (a *adversary) blockedAppend(tp metadata.TopicPartition, sr *rand.Rand) {
	w := a.w
	ps := w.parts[tp]
	l := w.brokers[ps.leader]
	n := w.running(l.id)
	if n == nil || w.p.leader.BufferBytes > 4<<20 {
		return
	}
	fill := tp
	for _, o := range w.tps {
		if o != tp && w.parts[o].leader == l.id {
			fill = o
			break
		}
	}
	size := min(60<<10, w.p.leader.BufferBytes/8)
	for range 200 {
		if !w.produceBatch(l, fill, w.parts[fill].epoch, 1, size, sr) {
			break
		}
	}
	first, epoch := l.log.end(tp), ps.epoch
	batch := makeBatch(tp, epoch, first, first, 100, sr.Uint64(), w.clock)
	m := metaOf(batch)
	gen, _, _, _ := n.lc.Leadership(tp)
	w.tracef("attack: b%d's buffer is full (%s filled it); an Append to %s waits for space", l.id, fill, tp)
	n.appendBlocking(tp, batch, func(err error) {
		if err != nil {
			w.tracef("b%d's blocked Append to %s returns: %v", l.id, tp, err)
			return
		}
		if g, _, _, _ := n.lc.Leadership(tp); g != gen {
			w.violate(KindAppendOutlived, "b%d: an Append to %s that waited for buffer space was accepted by a later leadership", l.id, tp)
			return
		}
		key := batchKey{tp, epoch, first}
		if _, dup := w.registry[key]; dup || l.log.end(tp) != first {
			return // the partition moved on meanwhile; the core refused nothing it should have
		}
		w.registry[key] = m
		if err := l.log.Append(context.Background(), tp, []storage.Batch{batch}); err != nil {
			w.violate(KindHarness, "b%d: appending its own produce %s of %s: %v", l.id, m, tp, err)
		}
		w.stats.Produced++
		w.tracef("b%d's blocked Append to %s %s is accepted", l.id, tp, m)
	})
	w.step(time.Duration(sr.IntN(30))*time.Millisecond, func() {
		if w.parts[tp].leader == l.id {
			w.elect(tp, sr, false, false, false)
		}
	})
}
