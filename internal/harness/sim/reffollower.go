package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// refFollower is a deliberately plain follower: a small synchronous state
// machine, independent of followcore, that lets fencing.Decide judge every
// entry exactly as the fencing package's documentation says to drive it,
// fetches one entry at a time and appends. It exists to weaken one
// fencing rule, which the real engine has no hook for (and must not
// have): with weak set, an entry Decide drops as fenced (a newer epoch
// starts at or before its first offset, on the word of a publication at
// least as new as the entry's) is applied anyway, as a follower that
// trusted the entry's publisher instead of the lineage would. Run
// unweakened, it is the control that shows the violations come from the
// weakening and not from this follower.
//
// It reads the metadata through its own metaReader, and the simulation
// drives it by events: records delivered, a fetch answered, a retry due.
type refFollower struct {
	w    *world
	b    *broker
	inst *followerInst
	weak bool
	mgr  *walstore.Manager
	read *metaReader

	parts    map[metadata.TopicPartition]*refPart
	messages uint64 // messages handled, for the fence check
	stopped  bool
	fetching bool              // one fetch at a time, as a plain follower makes them
	queued   []metadata.Record // delivered while fetching: handled after it
	retryAt  time.Time         // a pump is scheduled for then
	// reread is set when a partition starts afresh: messages passed over
	// while it was not followed are read again.
	reread bool
}

type refPart struct {
	since   uint64
	tp      metadata.TopicPartition
	leo     int64
	local   fencing.Lineage
	leader  fencing.LeaderLineage
	pending map[pendingKey]metadata.Entry
	retry   map[pendingKey]time.Time
	// chain checks the digests of what it applies, as the engine's
	// follower does: with fencing weakened, the replica itself notices.
	chain digest.Tracker
}

type pendingKey struct {
	object   metadata.ObjectRef
	position int64
}

func newRefFollower(b *broker, inst *followerInst, weak bool) *refFollower {
	w := b.w
	f := &refFollower{w: w, b: b, inst: inst, weak: weak, parts: make(map[metadata.TopicPartition]*refPart)}
	mgr, err := newFetcher(b)
	if err != nil {
		w.violate(KindHarness, "b%d reference follower: %v", b.id, err)
		f.stopped = true
		return f
	}
	f.mgr = mgr
	inst.handled = func() uint64 { return f.messages }
	seed := w.cfg.Seed ^ uint64(b.id)<<40 ^ uint64(inst.n)<<52
	f.read = newMetaReader(w, inst, seed, w.p.follower.ReadBatch, f.records, func() bool { return !f.stopped })
	return f
}

func (f *refFollower) stop() {
	if !f.stopped {
		f.stopped = true
		f.mgr.Close()
	}
}

// fail reports a local-log failure: the reference follower, like the
// engine it stands for, never expects one.
func (f *refFollower) fail(err error) {
	f.w.violate(KindEngineError, "b%d reference follower#%d: %v", f.b.id, f.inst.n, err)
	f.stop()
}

func (f *refFollower) follows(tp metadata.TopicPartition) bool {
	_, _, ok := f.b.role(tp)
	return ok
}

// records handles messages, then applies what it can. Like a follower that
// reads metadata only between fetches, it handles what comes during a
// fetch once the fetch is over.
func (f *refFollower) records(recs []metadata.Record) {
	if f.fetching {
		f.queued = append(f.queued, recs...)
		return
	}
	f.handleAll(recs)
	f.pump()
}

func (f *refFollower) handleAll(recs []metadata.Record) {
	rewind := false
	for _, r := range recs {
		m, err := metadata.DecodeMessage(r.Value)
		if err != nil {
			continue
		}
		f.messages++
		rw, err := f.handle(m)
		if err != nil {
			f.fail(err)
			return
		}
		rewind = rewind || rw
	}
	if rewind {
		f.read.rewind()
	}
}

func (f *refFollower) part(tp metadata.TopicPartition) (*refPart, error) {
	since, _, _ := f.b.role(tp)
	if p := f.parts[tp]; p != nil && p.since == since {
		return p, nil
	} else if p != nil {
		f.reread = true
	}
	leo, err := f.b.log.EndOffset(tp)
	if err != nil {
		return nil, err
	}
	epochs, err := f.b.log.Epochs(tp)
	if err != nil {
		return nil, err
	}
	p := &refPart{since: since, tp: tp, leo: leo, pending: make(map[pendingKey]metadata.Entry), retry: make(map[pendingKey]time.Time)}
	var markers []metadata.EpochStart
	for _, e := range epochs {
		if err := p.local.Assign(e.Epoch, e.StartOffset); err != nil {
			return nil, err
		}
		markers = append(markers, metadata.EpochStart{Partition: tp, Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	if err := p.leader.Merge(markers...); err != nil {
		return nil, err
	}
	f.parts[tp] = p
	return p, nil
}

// handle merges a message's markers (one publication per partition),
// truncates where the log diverges, and adds its entries to pending. It
// reports whether it truncated, so that metadata is read again.
func (f *refFollower) handle(m *metadata.Message) (bool, error) {
	pubs := make(map[metadata.TopicPartition][]metadata.EpochStart)
	for _, mk := range m.Markers {
		if f.follows(mk.Partition) {
			pubs[mk.Partition] = append(pubs[mk.Partition], mk)
		}
	}
	rewind := false
	for _, tp := range slices.SortedFunc(maps.Keys(pubs), metadata.TopicPartition.Compare) {
		p, err := f.part(tp)
		if err != nil {
			return false, err
		}
		if p.leader.Merge(pubs[tp]...) != nil {
			continue
		}
		if to, ok := fencing.Divergence(p.leo, &p.local, &p.leader); ok {
			if err := f.truncate(p, to); err != nil {
				return false, err
			}
			rewind = true
		}
	}
	for _, e := range m.Entries {
		if !f.follows(e.Partition) {
			continue
		}
		p, err := f.part(e.Partition)
		if err != nil {
			return false, err
		}
		p.pending[pendingKey{e.Object, e.Position}] = e
	}
	return rewind, nil
}

func (f *refFollower) truncate(p *refPart, to int64) error {
	if _, _, err := f.b.truncate(f.inst, p.tp, to, false); err != nil {
		return fmt.Errorf("truncating %s to %d: %w", p.tp, to, err)
	}
	p.local.TruncateFromEnd(to)
	p.leo = to
	p.chain.Truncated(to)
	return nil
}

// digest takes what p's digest tracker learned.
func (f *refFollower) digest(r digest.Result) {
	if r.Checked {
		f.w.stats.DigestChecks++
	}
	if r.Mismatch != nil {
		f.w.violate(KindDigestMismatch, "broker %d (reference follower): %v", f.b.id, r.Mismatch)
	}
}

// pump applies, partition by partition, every entry that continues the
// log: it truncates where Decide says to, and starts the fetch of the
// next entry to apply, unless one is under way. With nothing to fetch, it
// reads the metadata again if a partition started afresh, and looks again
// when the earliest retry is due.
func (f *refFollower) pump() {
	if f.stopped || f.fetching {
		return
	}
	rewind := false
	var retry time.Time
	for _, tp := range slices.SortedFunc(maps.Keys(f.parts), metadata.TopicPartition.Compare) {
		p := f.parts[tp]
		if since, _, ok := f.b.role(tp); !ok || since != p.since {
			delete(f.parts, tp) // the role changed: start afresh if followed again
			f.reread = true
			continue
		}
		if err := f.bootstrap(p); err != nil {
			f.fail(err)
			return
		}
		for {
			k, e, d, ok, wait := f.next(p)
			if !wait.IsZero() && (retry.IsZero() || wait.Before(retry)) {
				retry = wait
			}
			if !ok {
				break
			}
			if d.Action == fencing.Truncate {
				if err := f.truncate(p, d.TruncateTo); err != nil {
					f.fail(err)
					return
				}
				rewind = true
				continue
			}
			f.fetch(p, k, e, d)
			return
		}
	}
	if rewind || f.reread {
		f.reread = false
		f.read.rewind()
	}
	if !retry.IsZero() && (f.retryAt.IsZero() || retry.Before(f.retryAt) || !f.retryAt.After(f.w.clock)) {
		f.retryAt = retry
		f.w.at(retry, func() {
			if f.retryAt.Equal(retry) {
				f.retryAt = time.Time{}
			}
			f.pump()
		})
	}
}

// fetch fetches entry e of p; its answer comes after the GET's latency.
func (f *refFollower) fetch(p *refPart, k pendingKey, e metadata.Entry, d fencing.Decision) {
	f.fetching = true
	res, lat := fetchEntries(f.b, f.mgr, []metadata.Entry{e}, 1)
	f.w.after(lat, func() {
		if f.stopped {
			return
		}
		f.fetching = false
		if since, _, ok := f.b.role(p.tp); !ok || since != p.since || f.parts[p.tp] != p {
			delete(f.parts, p.tp)
			f.reread = true
		} else if err := f.fetched(p, k, d, res[0]); err != nil {
			f.fail(err)
			return
		}
		queued := f.queued
		f.queued = nil
		f.handleAll(queued)
		f.pump()
	})
}

// fetched appends what the fetch of p's entry k brought, if it continues
// the log.
func (f *refFollower) fetched(p *refPart, k pendingKey, d fencing.Decision, res followcore.Result) error {
	if res.Err != nil {
		if errors.Is(res.Err, storage.ErrNotFound) || errors.Is(res.Err, storage.ErrUnknownBucket) || errors.Is(res.Err, storage.ErrInvalidRange) {
			delete(p.pending, k)
		} else {
			p.retry[k] = f.w.clock.Add(10 * time.Millisecond)
		}
		return nil
	}
	var batches []storage.Batch
	for _, b := range res.Batches {
		if b.LastOffset < d.From {
			continue
		}
		if b.FirstOffset >= d.Limit {
			break
		}
		if b.FirstOffset < d.From || b.LastOffset >= d.Limit {
			batches = nil
			break
		}
		batches = append(batches, b)
	}
	if len(batches) == 0 {
		delete(p.pending, k)
		return nil
	}
	if _, err := f.b.append(f.inst, p.tp, batches); err != nil {
		return fmt.Errorf("appending %s at %d: %w", p.tp, p.leo, err)
	}
	for _, b := range batches {
		if latest, ok := p.local.Latest(); !ok || b.Epoch > latest.Epoch {
			if err := p.local.Assign(b.Epoch, b.FirstOffset); err != nil {
				return err
			}
		}
	}
	p.leo = batches[len(batches)-1].LastOffset + 1
	f.digest(p.chain.Applied(res.Entry, batches, p.leo))
	latest, _ := p.local.Latest()
	_, leader, _ := f.b.role(p.tp)
	f.w.relay(p.tp, leader, f.b.id, p.leo, latest.Epoch)
	return nil
}

// next forgets the entries Decide skips or drops and returns the entry to
// apply at the log end (or a truncation to make first): an entry Decide
// applies, preferred to one the weakened rule lets through. wait is the
// earliest retry time of an entry passed over for it.
func (f *refFollower) next(p *refPart) (k pendingKey, e metadata.Entry, d fencing.Decision, ok bool, wait time.Time) {
	keys := slices.SortedFunc(maps.Keys(p.pending), func(a, b pendingKey) int {
		ea, eb := p.pending[a], p.pending[b]
		if c := cmpInt(ea.FirstOffset, eb.FirstOffset); c != 0 {
			return c
		}
		if c := cmpInt(eb.PublisherEpoch, ea.PublisherEpoch); c != 0 {
			return c
		}
		if a.object != b.object {
			if a.object.String() < b.object.String() {
				return -1
			}
			return 1
		}
		return cmpInt(a.position, b.position)
	})
	now := f.w.clock
	later := func(k pendingKey) bool {
		if now.Before(p.retry[k]) {
			if wait.IsZero() || p.retry[k].Before(wait) {
				wait = p.retry[k]
			}
			return true
		}
		return false
	}
	for _, key := range keys {
		entry := p.pending[key]
		dec := fencing.Decide(p.leo, &p.local, &p.leader, entry)
		switch dec.Action {
		case fencing.Skip:
			epoch, ok := p.local.EpochFor(entry.LastOffset)
			if !ok {
				epoch = -1
			}
			f.digest(p.chain.Held(entry, p.leo, epoch))
			delete(p.pending, key)
		case fencing.Drop:
			if f.weak && dec.Reason == fencing.ReasonFenced && entry.FirstOffset <= p.leo && p.leo <= entry.LastOffset {
				if !ok && !later(key) {
					k, e, ok = key, entry, true
					d = fencing.Decision{Action: fencing.Apply, From: p.leo, Limit: entry.LastOffset + 1, Reason: dec.Reason}
				}
				continue
			}
			delete(p.pending, key)
		case fencing.Truncate:
			return key, entry, dec, true, wait
		case fencing.Apply:
			if later(key) {
				continue
			}
			return key, entry, dec, true, wait
		}
	}
	return k, e, d, ok, wait
}

// bootstrap starts an empty log where the leader lineage begins, as the
// engine does for a new replica.
func (f *refFollower) bootstrap(p *refPart) error {
	if _, ok := p.local.Latest(); ok {
		return nil
	}
	first, ok := p.leader.Lineage().Earliest()
	if !ok || first.StartOffset <= p.leo {
		return nil
	}
	if err := f.b.log.Truncate(context.Background(), p.tp, first.StartOffset); err != nil {
		return err
	}
	p.leo = first.StartOffset
	return nil
}
