package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// refFollower is a deliberately plain follower: one goroutine reads the
// metadata, lets fencing.Decide judge every entry exactly as the fencing
// package's documentation says to drive it, fetches one entry at a time and
// appends. It exists to weaken one fencing rule, which the real engine has
// no hook for (and must not have): with weak set, an entry Decide drops
// as fenced (a newer epoch starts at or before its first offset, on the
// word of a publication at least as new as the entry's) is applied anyway,
// as a follower that trusted the entry's publisher instead of the lineage
// would. Run unweakened, it is the control that shows the violations come
// from the weakening and not from this follower.
type refFollower struct {
	cfg  walstore.FollowerConfig
	weak bool
	// role says whether the broker follows a partition, since when (a
	// count that grows with every new following, so that state from before
	// a role change is never used), and its leader.
	role func(tp metadata.TopicPartition) (since uint64, leader int32, ok bool)
	// reread is set when a partition starts afresh: messages skipped while
	// it was not followed are read again.
	reread bool

	mu    sync.Mutex
	stats walstore.FollowerStats
}

type refPart struct {
	since   uint64
	tp      metadata.TopicPartition
	leo     int64
	local   fencing.Lineage
	leader  fencing.LeaderLineage
	pending map[pendingKey]metadata.Entry
	retry   map[pendingKey]time.Time
}

type pendingKey struct {
	object   metadata.ObjectRef
	position int64
}

func newRefFollower(cfg walstore.FollowerConfig, role func(metadata.TopicPartition) (uint64, int32, bool), weak bool) *refFollower {
	return &refFollower{cfg: cfg, role: role, weak: weak}
}

func (f *refFollower) follows(tp metadata.TopicPartition) bool {
	_, _, ok := f.role(tp)
	return ok
}

// Stats returns the counters the world reads: Messages (which the fence
// check depends on), Applied, Dropped, Truncations and Held.
func (f *refFollower) Stats() walstore.FollowerStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.Lag = maps.Clone(s.Lag)
	return s
}

func (f *refFollower) count(fn func(*walstore.FollowerStats)) {
	f.mu.Lock()
	fn(&f.stats)
	f.mu.Unlock()
}

// Run follows until ctx ends. Like the engine, it returns an error only
// when the local log fails.
func (f *refFollower) Run(ctx context.Context) error {
	cfg := f.cfg
	mgr, err := walstore.NewManager(walstore.ManagerConfig{
		Store: cfg.Store, BrokerID: cfg.BrokerID, FetchConcurrency: max(cfg.FetchConcurrency, 1),
		CoalesceGap: cfg.CoalesceGap, Logger: cfg.Logger,
	})
	if err != nil {
		return err
	}
	defer mgr.Close()
	partition := cfg.BrokerID % cfg.Log.Partitions()
	parts := make(map[metadata.TopicPartition]*refPart)
	cursor := int64(-1)
	for ctx.Err() == nil {
		if cursor < 0 {
			low, _, err := cfg.Log.Watermarks(ctx, partition)
			if err != nil {
				f.pause(ctx)
				continue
			}
			cursor = low
		}
		recs, err := cfg.Log.Read(ctx, partition, cursor, max(cfg.ReadBatch, 1))
		switch {
		case errors.Is(err, metadata.ErrOffsetOutOfRange):
			cursor = -1
			continue
		case err != nil:
			f.pause(ctx)
			continue
		}
		progressed, rewind, err := f.work(ctx, mgr, parts, recs, &cursor)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if rewind {
			cursor = -1
		}
		if len(recs) == 0 && !progressed {
			f.pause(ctx)
		}
	}
	return nil
}

// work handles recs and applies what it can; it reports
// whether it appended anything and whether metadata must be read again.
func (f *refFollower) work(ctx context.Context, mgr *walstore.Manager, parts map[metadata.TopicPartition]*refPart, recs []metadata.Record, cursor *int64) (bool, bool, error) {
	rewind := false
	for _, r := range recs {
		*cursor = r.Offset + 1
		m, err := metadata.DecodeMessage(r.Value)
		if err != nil {
			continue
		}
		f.count(func(s *walstore.FollowerStats) { s.Messages++ })
		rw, err := f.handle(ctx, parts, m)
		if err != nil {
			return false, false, err
		}
		rewind = rewind || rw
	}
	progressed, rw, err := f.apply(ctx, mgr, parts)
	rewind = rewind || rw || f.reread
	f.reread = false
	return progressed, rewind, err
}

func (f *refFollower) pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(max(f.cfg.PollInterval, time.Millisecond)):
	}
}

func (f *refFollower) part(parts map[metadata.TopicPartition]*refPart, tp metadata.TopicPartition) (*refPart, error) {
	since, _, _ := f.role(tp)
	if p := parts[tp]; p != nil && p.since == since {
		return p, nil
	} else if p != nil {
		f.reread = true
	}
	leo, err := f.cfg.Local.EndOffset(tp)
	if err != nil {
		return nil, err
	}
	epochs, err := f.cfg.Local.Epochs(tp)
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
	parts[tp] = p
	return p, nil
}

// handle merges a message's markers (one publication per partition),
// truncates where the log diverges, and adds its entries to pending. It
// reports whether it truncated, so that metadata is read again.
func (f *refFollower) handle(ctx context.Context, parts map[metadata.TopicPartition]*refPart, m *metadata.Message) (bool, error) {
	pubs := make(map[metadata.TopicPartition][]metadata.EpochStart)
	for _, mk := range m.Markers {
		if f.follows(mk.Partition) {
			pubs[mk.Partition] = append(pubs[mk.Partition], mk)
		}
	}
	rewind := false
	for _, tp := range slices.SortedFunc(maps.Keys(pubs), cmpTP) {
		p, err := f.part(parts, tp)
		if err != nil {
			return false, err
		}
		if p.leader.Merge(pubs[tp]...) != nil {
			continue
		}
		if to, ok := fencing.Divergence(p.leo, &p.local, &p.leader); ok {
			if err := f.truncate(ctx, p, to); err != nil {
				return false, err
			}
			rewind = true
		}
	}
	for _, e := range m.Entries {
		if !f.follows(e.Partition) {
			continue
		}
		p, err := f.part(parts, e.Partition)
		if err != nil {
			return false, err
		}
		p.pending[pendingKey{e.Object, e.Position}] = e
	}
	return rewind, nil
}

func (f *refFollower) truncate(ctx context.Context, p *refPart, to int64) error {
	if err := f.cfg.Local.Truncate(ctx, p.tp, to); err != nil {
		return fmt.Errorf("truncating %s to %d: %w", p.tp, to, err)
	}
	p.local.TruncateFromEnd(to)
	p.leo = to
	f.count(func(s *walstore.FollowerStats) { s.Truncations++ })
	return nil
}

func cmpTP(a, b metadata.TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return cmpInt(a.Partition, b.Partition)
}

// apply applies, partition by partition, every entry that continues the
// log. It reports whether it appended anything and whether it truncated.
func (f *refFollower) apply(ctx context.Context, mgr *walstore.Manager, parts map[metadata.TopicPartition]*refPart) (progressed, rewind bool, err error) {
	for _, tp := range slices.SortedFunc(maps.Keys(parts), cmpTP) {
		p := parts[tp]
		if since, _, ok := f.role(tp); !ok || since != p.since {
			delete(parts, tp) // the role changed: start afresh if followed again
			f.reread = true
			continue
		}
		if err := f.bootstrap(ctx, p); err != nil {
			return progressed, rewind, err
		}
		for {
			k, e, d, ok := f.next(p)
			if !ok {
				break
			}
			if d.Action == fencing.Truncate {
				if err := f.truncate(ctx, p, d.TruncateTo); err != nil {
					return progressed, rewind, err
				}
				rewind = true
				continue
			}
			res, err := mgr.Fetch(ctx, []metadata.Entry{e})
			if err != nil {
				return progressed, rewind, err
			}
			if since, _, ok := f.role(tp); !ok || since != p.since {
				delete(parts, tp)
				f.reread = true
				break
			}
			if err := res[0].Err; err != nil {
				if errors.Is(err, walstore.ErrNotFound) || errors.Is(err, walstore.ErrUnknownBucket) || errors.Is(err, walstore.ErrInvalidRange) {
					delete(p.pending, k)
				} else {
					p.retry[k] = time.Now().Add(10 * time.Millisecond)
				}
				continue
			}
			var batches []combiner.Batch
			for _, b := range res[0].Batches {
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
				continue
			}
			if err := f.cfg.Local.Append(ctx, tp, batches); err != nil {
				return progressed, rewind, fmt.Errorf("appending %s at %d: %w", tp, p.leo, err)
			}
			for _, b := range batches {
				if latest, ok := p.local.Latest(); !ok || b.Epoch > latest.Epoch {
					if err := p.local.Assign(b.Epoch, b.FirstOffset); err != nil {
						return progressed, rewind, err
					}
				}
			}
			p.leo = batches[len(batches)-1].LastOffset + 1
			progressed = true
			f.count(func(s *walstore.FollowerStats) { s.Applied++ })
			if f.cfg.OnApplied != nil {
				latest, _ := p.local.Latest()
				_, leader, _ := f.role(tp)
				f.cfg.OnApplied(walstore.Progress{Partition: tp, Leader: leader, Follower: f.cfg.BrokerID, EndOffset: p.leo, LastEpoch: latest.Epoch})
			}
		}
	}
	return progressed, rewind, nil
}

// next forgets the entries Decide skips or drops and returns the entry to
// apply at the log end (or a truncation to make first): an entry Decide
// applies, preferred to one the weakened rule lets through.
func (f *refFollower) next(p *refPart) (pendingKey, metadata.Entry, fencing.Decision, bool) {
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
	now := time.Now()
	var weakKey pendingKey
	var weakEntry metadata.Entry
	var weakDecision fencing.Decision
	weakOK := false
	for _, k := range keys {
		e := p.pending[k]
		d := fencing.Decide(p.leo, &p.local, &p.leader, e)
		switch d.Action {
		case fencing.Skip:
			delete(p.pending, k)
			f.count(func(s *walstore.FollowerStats) { s.Skipped++ })
		case fencing.Drop:
			if f.weak && d.Reason == fencing.ReasonFenced && e.FirstOffset <= p.leo && p.leo <= e.LastOffset {
				if !weakOK && !now.Before(p.retry[k]) {
					weakKey, weakEntry, weakOK = k, e, true
					weakDecision = fencing.Decision{Action: fencing.Apply, From: p.leo, Limit: e.LastOffset + 1, Reason: d.Reason}
				}
				continue
			}
			delete(p.pending, k)
			f.count(func(s *walstore.FollowerStats) { s.Dropped++ })
		case fencing.Truncate:
			return k, e, d, true
		case fencing.Apply:
			if now.Before(p.retry[k]) {
				continue
			}
			return k, e, d, true
		}
	}
	return weakKey, weakEntry, weakDecision, weakOK
}

// bootstrap starts an empty log where the leader lineage begins, as the
// engine does for a new replica.
func (f *refFollower) bootstrap(ctx context.Context, p *refPart) error {
	if _, ok := p.local.Latest(); ok {
		return nil
	}
	first, ok := p.leader.Lineage().Earliest()
	if !ok || first.StartOffset <= p.leo {
		return nil
	}
	if err := f.cfg.Local.Truncate(ctx, p.tp, first.StartOffset); err != nil {
		return err
	}
	p.leo = first.StartOffset
	return nil
}
