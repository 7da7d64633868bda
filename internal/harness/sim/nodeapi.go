package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/internal/leadcore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// The rest of walstore.Node's calls that the adversary makes, mirrored on
// a simNode as walstore.Node performs them: waits naming an epoch,
// Appends that wait for buffer space, Health's failing partitions, Sweep.
// Each Weaken flag here undoes, in this mirror, one fix of the library;
// the model (model.go) must catch each.

// errNotLeader and errStopped are walstore.ErrNotLeader and ErrStopped.
var (
	errNotLeader = walstore.ErrNotLeader
	errStopped   = walstore.ErrStopped
)

// contractWait is a WaitDurable or WaitReplicated call under way.
type contractWait struct {
	tp         metadata.TopicPartition
	epoch      int32
	offset     int64
	replicated bool
	gen        uint64
	done       func(error)
}

// wait is walstore.Node.WaitDurable (or WaitReplicated) of offset,
// appended at epoch: it fails with ErrNotLeader unless the leadership
// that accepts appends at epoch is the current one and lasts until the
// offset is reached. Weaken.Late answers it from whatever leadership of
// tp is current, as a wait that named no epoch did.
func (n *simNode) wait(tp metadata.TopicPartition, epoch int32, offset int64, replicated bool, done func(error)) {
	if n.stopped {
		done(errStopped)
		return
	}
	gen, ok := n.acceptedAt(tp, epoch)
	if !ok {
		done(fmt.Errorf("waiting for %s offset %d of epoch %d: %w", tp, offset, epoch, errNotLeader))
		return
	}
	n.cwaits = append(n.cwaits, &contractWait{tp: tp, epoch: epoch, offset: offset, replicated: replicated, gen: gen, done: done})
	n.checkContractWaits()
}

func (n *simNode) acceptedAt(tp metadata.TopicPartition, epoch int32) (uint64, bool) {
	if n.w.cfg.Weaken.Late {
		gen, _, _, ok := n.lc.Leadership(tp)
		return gen, ok
	}
	return n.lc.Accepted(tp, epoch)
}

// checkContractWaits ends the waits that are over.
func (n *simNode) checkContractWaits() {
	var done []func()
	kept := n.cwaits[:0]
	for _, wt := range n.cwaits {
		g, ok := n.acceptedAt(wt.tp, wt.epoch)
		var reached int64
		var failed error
		if wt.replicated {
			reached, _, _ = n.lc.HighWatermark(wt.tp)
		} else {
			_, reached, failed, _ = n.lc.Leadership(wt.tp)
		}
		switch {
		case !ok || g != wt.gen && !n.w.cfg.Weaken.Late:
			done = append(done, func() { wt.done(fmt.Errorf("waiting for %s offset %d: %w", wt.tp, wt.offset, errNotLeader)) })
		case reached > wt.offset:
			done = append(done, func() { wt.done(nil) })
		case failed != nil:
			done = append(done, func() { wt.done(failed) })
		default:
			kept = append(kept, wt)
		}
	}
	clear(n.cwaits[len(kept):])
	n.cwaits = kept
	for _, f := range done {
		f()
	}
}

// blockedAppend is an Append waiting for buffer space, in the leadership
// of generation gen.
type blockedAppend struct {
	tp    metadata.TopicPartition
	batch storage.Batch
	gen   uint64
	done  func(error)
}

// appendBlocking is walstore.Node.Append with the Block overflow
// policy: a full buffer makes it wait for space, and it fails with
// ErrNotLeader when the leadership it waits in ends. done is called when
// it returns.
func (n *simNode) appendBlocking(tp metadata.TopicPartition, b storage.Batch, done func(error)) {
	gen, _, _, _ := n.lc.Leadership(tp)
	err := n.lc.Append(n.w.clock, tp, b)
	if err != nil && leadcore.CodeOf(err) == leadcore.BufferFull {
		n.blocked = append(n.blocked, &blockedAppend{tp: tp, batch: b, gen: gen, done: done})
		n.drive()
		return
	}
	done(err)
	n.drive()
}

// retryBlocked wakes the blocked Appends: on space freed, or a leadership
// that ended (walstore's Leader waits on both). Weaken.Append wakes them
// on space alone, as the Leader once did: a leadership that ends frees no
// space when the buffer holds others' data, and its Appends wait on.
func (n *simNode) retryBlocked(space, ended bool) {
	if len(n.blocked) == 0 || !space && (!ended || n.w.cfg.Weaken.Append) {
		return
	}
	var done []func()
	kept := n.blocked[:0]
	for _, bl := range n.blocked {
		gen, _, _, _ := n.lc.Leadership(bl.tp)
		if gen != bl.gen && !n.w.cfg.Weaken.Append {
			done = append(done, func() {
				bl.done(fmt.Errorf("append to %s: the leadership ended while it waited: %w", bl.tp, errNotLeader))
			})
			continue
		}
		err := n.lc.Append(n.w.clock, bl.tp, bl.batch)
		if err != nil && leadcore.CodeOf(err) == leadcore.BufferFull {
			kept = append(kept, bl)
			continue
		}
		done = append(done, func() { bl.done(err) })
	}
	clear(n.blocked[len(kept):])
	n.blocked = kept
	for _, f := range done {
		f()
	}
}

// leadNews takes what the leader core's Ready says besides its requests:
// failing partitions (walstore.Node keeps them for Health), waits and
// blocked Appends to wake. Weaken.Health drops the failures, as a Node
// whose Health did not list the leader side's partitions would.
func (n *simNode) leadNews(rd leadcore.Ready) {
	for _, f := range rd.Failures {
		switch {
		case n.w.cfg.Weaken.Health:
		case f.Err == nil:
			delete(n.failing, f.Partition)
		default:
			n.failing[f.Partition] = f.Err
		}
	}
	if rd.CommitChanged {
		n.learnHighWatermarks()
	}
	if rd.DurableChanged || rd.CommitChanged {
		n.checkContractWaits()
	}
	n.retryBlocked(rd.SpaceFreed, rd.DurableChanged)
}

// learnHighWatermarks tells the controller of the high watermarks of the
// partitions n leads for the controller (not as a zombie): as Kafka's
// controller knows the in-sync replicas, which hold the log below the
// high watermark, so it elects only replicas that do, even when the
// leader has not published the commit yet (a replica moved away and the
// leader then lost might otherwise take the committed records with them).
func (n *simNode) learnHighWatermarks() {
	for _, tp := range n.w.tps {
		ps := n.w.parts[tp]
		if _, z := ps.zombies[n.b.id]; ps.leader != n.b.id || n.b.node != n || z {
			continue
		}
		if hw, _, ok := n.lc.HighWatermark(tp); ok {
			ps.committed = max(ps.committed, hw)
		}
	}
}

// partitionError is walstore.Node.PartitionError's leader side.
func (n *simNode) partitionError(tp metadata.TopicPartition) error { return n.failing[tp] }

// haltContract fails the waits and blocked Appends of a node that stops.
func (n *simNode) haltContract() {
	waits, blocked := n.cwaits, n.blocked
	n.cwaits, n.blocked = nil, nil
	for _, wt := range waits {
		wt.done(errStopped)
	}
	for _, bl := range blocked {
		bl.done(errStopped)
	}
}

// uploadedOK notes that upload op stored ref, an object of data the
// leader core cut, and the core is told so: the core means to publish it
// while some leadership whose data it holds lasts, retrying its entries
// however long the metadata log refuses them. (A republish's copy is
// not: an attempt that fails makes a new copy.) The model judges Sweep
// by it.
func (n *simNode) uploadedOK(op uint64, ref metadata.ObjectRef) {
	if !n.w.contractOn() {
		return
	}
	var sections []combiner.SectionInfo
	if o := n.w.objects[ref]; o != nil {
		sections = o.sections
	}
	n.unpublished[ref] = unpublishedObject{op: op, sections: sections}
	n.opRefs[op] = append(n.opRefs[op], ref)
}

// unpublishedObject is an object its node stored and has not published.
type unpublishedObject struct {
	op       uint64
	sections []combiner.SectionInfo // each names the epoch its data was accepted at
}

// metaAppend appends a publish to the metadata log, unless the
// adversary's metadata outage of this broker is on.
func (n *simNode) metaAppend(p leadcore.Publish) (int64, error) {
	if n.w.clock.Before(n.metaDownUntil) {
		return 0, fmt.Errorf("sim: metadata log: injected outage: %w", storage.ErrUnavailable)
	}
	off, err := n.w.meta.Append(context.Background(), p.Partition, p.Data)
	if err == nil && n.w.contractOn() {
		if m, derr := metadata.DecodeMessage(p.Data); derr == nil && m.Object != (metadata.ObjectRef{}) {
			if u, ok := n.unpublished[m.Object]; ok {
				for _, r := range n.opRefs[u.op] {
					delete(n.unpublished, r) // a hedge's losing copy is garbage now
				}
				delete(n.opRefs, u.op)
			}
		}
	}
	return off, err
}

// sweep is walstore.Node.Sweep: it lists the broker's own objects and
// tells the core, whose Delete of those it may delete sweepDelete
// performs at once.
func (n *simNode) sweep(age time.Duration) {
	ctx := context.Background()
	bucket := n.b.store.Local().Bucket
	prefix := strconv.Itoa(int(n.b.id)) + "/"
	infos, err := n.b.store.Store.List(ctx, bucket, prefix)
	if err != nil {
		n.w.tracef("b%d sweep: listing: %v", n.b.id, err)
		return
	}
	listed := make([]leadcore.Listed, len(infos))
	for i, info := range infos {
		listed[i] = leadcore.Listed{Ref: info.Ref, LastModified: info.LastModified}
	}
	n.sweeping = sweepCall{call: n.sweeping.call + 1, listed: len(infos), age: age}
	n.lc.Sweep(n.w.clock, n.sweeping.call, listed, n.w.clock.Add(-age), bucket, prefix)
	n.drive()
}

// sweepCall is the node's last Sweep: its call id, and what the trace
// says of it.
type sweepCall struct {
	call   uint64
	listed int
	age    time.Duration
}

// sweepDelete performs the Delete of a Sweep at once, without faults, as
// the sweep's store calls always were here; the model judges it first.
func (n *simNode) sweepDelete(d leadcore.Delete) {
	n.w.model.swept(n, d.Refs)
	n.w.deleted(d.Refs)
	err := n.b.store.Store.Delete(context.Background(), d.Refs)
	if err != nil {
		n.w.violate(KindHarness, "b%d sweep: deleting: %v", n.b.id, err)
	}
	n.lc.Deleted(n.w.clock, d.ID, err)
}

// swept traces the end of Sweep call d.
func (n *simNode) swept(d leadcore.CallDone) {
	n.w.tracef("b%d sweeps %d of %d objects older than %v", n.b.id, d.Deleted, n.sweeping.listed, n.sweeping.age)
}

// idleReport reports whether the follower's progress report p repeats
// the last one relayed and Weaken.CatchUp drops it: a follower that
// reported only when its log changed, so a leader that missed its one
// report never learns it lags.
func (n *simNode) idleReport(p followcore.Progress) bool {
	if !n.w.cfg.Weaken.CatchUp {
		return false
	}
	key := progressKey{leader: p.Leader, end: p.EndOffset, epoch: p.LastEpoch}
	if last, ok := n.lastReport[p.Partition]; ok && last == key {
		return true
	}
	n.lastReport[p.Partition] = key
	return false
}

type progressKey struct {
	leader int32
	end    int64
	epoch  int32
}

// isNotLeader reports whether err says the leadership ended.
func isNotLeader(err error) bool { return errors.Is(err, errNotLeader) }
