package walstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/bufpool"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/internal/hedge"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// HedgeConfig says when a request that has not answered is sent again:
// "Performance design patterns for Amazon S3" recommends re-issuing a
// request that has not answered by about its p95–p99 latency, since the
// second most likely takes a faster path. The first answer wins and the
// other request is cancelled. The threshold is learned from the latencies
// the store showed (per bucket for GETs, for PUTs the leader's own
// bucket), kept within [Min, Max], and Max until enough are known. Zero
// fields mean their defaults.
type HedgeConfig struct {
	// Disabled turns hedging off: every request waits for its answer or
	// its timeout.
	Disabled bool
	// Quantile is the latency quantile a request may reach before it is
	// hedged, in (0, 1). Default 0.95.
	Quantile float64
	// Min and Max bound the threshold. Defaults 5ms and 500ms.
	Min, Max time.Duration
	// Budget is the most extra requests hedging makes, as a fraction of
	// the requests made, in (0, 1]; Burst how many it may make in a row.
	// Defaults 0.05 (5%) and 3.
	Budget float64
	Burst  int
}

// policy validates h, applies its defaults and returns it as the cores
// take it; the zero Policy when hedging is disabled.
func (h HedgeConfig) policy(owner string) (hedge.Policy, error) {
	if h.Disabled {
		return hedge.Policy{}, nil
	}
	if h.Quantile < 0 || h.Min < 0 || h.Max < 0 || h.Budget < 0 || h.Burst < 0 {
		return hedge.Policy{}, fmt.Errorf("walstore: NodeConfig.%s has a negative field: %+v", owner, h)
	}
	p := hedge.Policy{
		Quantile: cmp.Or(h.Quantile, 0.95), Min: cmp.Or(h.Min, 5*time.Millisecond), Max: cmp.Or(h.Max, 500*time.Millisecond),
		Budget: cmp.Or(h.Budget, 0.05), Burst: cmp.Or(h.Burst, 3),
	}
	if err := p.Validate(); err != nil {
		return hedge.Policy{}, fmt.Errorf("walstore: NodeConfig.%s: %w", owner, err)
	}
	return p, nil
}

// followerEngine is the follower-side engine. It reads this broker's metadata
// partition, keeps each followed partition's epoch lineage, decides with
// package fencing what to do with every entry, fetches the sections it
// needs (coalesced, in parallel, verified), and appends them to the local
// log in offset order. It is a Node's follower side, made and driven by
// the Node.
//
// The decisions are a state machine without goroutines, clock or I/O
// (internal/followcore); the engine is its driver: it reads the metadata
// log, runs fetch rounds in parallel, performs the local-log requests one
// after another, and keeps time.
type followerEngine struct {
	cfg       *NodeConfig // validated by NewNode; the follower side's fields
	log       *slog.Logger
	seed      uint64
	onHealth  func(Health) // the Node's: either side's health news is its
	onApplied func(Progress)
	mgr       *Manager
	jitter    *jitter // paces metadata-read retries

	// roleMu guards core, queue and stopped. The Run goroutine holds it
	// while it steps the core, and releases it while it calls the local
	// log, holding only the partition concerned (calls): a transition
	// holds its partition too, so once Follow or Unfollow returns, the
	// engine acts on the new role and no append of the partition made
	// under the old one is in flight, and a transition of another
	// partition never waits for the log.
	roleMu  roleLock
	core    *followcore.Core
	locals  *localCalls
	queue   []localReq                    // the core's local-log requests not yet performed; Run's goroutine only
	fetches map[uint64]context.CancelFunc // fetches in flight; Run's goroutine only
	local   localDeadline                 // local-log calls' context; Run's goroutine only
	wake    chan struct{}
	rewind  chan struct{} // asks readMetadata to start again from the low watermark
	stopped bool          // Run has returned
	ran     atomic.Bool   // Run was called

	mu                 sync.Mutex // guards stats, lag and failing, for Stats() and Health()
	stats              followcore.Counters
	lag                map[metadata.TopicPartition]int64
	failing            failing
	healthNews         bool              // failing changed since OnHealth was last called
	mismatches         []digest.Mismatch // the latest, for Stats
	reportMu           sync.Mutex        // serializes OnHealth calls
	fetchLat, applyLat histogram

	gets *bufpool.Pool // GET buffers, back once their sections are appended
}

// getPoolBytes bounds the free GET buffers a follower keeps: enough for
// the sixteen objects or so that readahead holds, at the default object
// size.
const getPoolBytes = 64 << 20

// fetchDone is a fetch round's results, for Run.
type fetchDone struct {
	id      uint64
	results []followcore.Result
}

// newFollowerEngine returns the follower side of a Node configured by cfg,
// which NewNode has validated. Nothing runs until Run.
func newFollowerEngine(cfg *NodeConfig, onHealth func(Health)) (*followerEngine, error) {
	logger := cfg.Logger.With("engine", "follower")
	seed := cfg.followerSeed()
	mgr, err := NewManager(ManagerConfig{
		Store: cfg.Store, BrokerID: cfg.BrokerID, FetchConcurrency: cfg.FetchConcurrency,
		CoalesceGap: cfg.CoalesceGap, Seed: seed, Clock: cfg.Clock, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	_, fc := cfg.coreConfigs()
	fc.Logger = logger
	fc.Violation = contractViolation
	core, err := followcore.New(fc)
	if err != nil {
		return nil, fmt.Errorf("walstore: %w", err)
	}
	f := &followerEngine{
		cfg:       cfg,
		log:       logger,
		seed:      seed,
		onHealth:  onHealth,
		onApplied: cfg.OnProgress,
		mgr:       mgr,
		locals:    newLocalCalls(cfg.Clock),
		jitter:    newJitter(seed ^ 0x3e7ad),
		core:      core,
		fetches:   make(map[uint64]context.CancelFunc),
		local:     localDeadline{timeout: cfg.LocalTimeout},
		roleMu:    make(roleLock, 1),
		wake:      make(chan struct{}, 1),
		rewind:    make(chan struct{}, 1),
		lag:       make(map[metadata.TopicPartition]int64),
		failing:   newFailing(Following),
		gets:      bufpool.New(getPoolBytes),
	}
	f.locals.wake = f.wakeUp
	return f, nil
}

// wakeUp makes Run look at the core again: a partition another caller
// held was released, and a request of it may wait.
func (f *followerEngine) wakeUp() { notify(f.wake) }

// Follow makes the engine follow tp, whose leader at epoch is broker
// leader, as the broker learned from its controller, and returns once the
// engine acts on it. A partition not followed before starts afresh from
// the local log (and the retained metadata is read again for it); a later
// epoch of a followed partition lets the engine act on the epoch-start
// markers of that epoch, which it holds back until the broker knows of it
// (a marker of an epoch the broker has not heard of may be forged, and
// acting on it could truncate the log). An epoch below the one the engine
// has is an error; the same epoch again changes nothing. It waits for the
// engine to finish the local-log call it may be making, as long as ctx
// allows; a refusal, or giving up, changes nothing. After Run has
// returned it fails with ErrStopped. A local-log call of tp that did not
// return when the engine gave up on it makes it fail at once (see
// LocalLog).
func (f *followerEngine) Follow(ctx context.Context, tp metadata.TopicPartition, epoch, leader int32) error {
	err := f.withPartition(ctx, tp, func(c *followcore.Core, now time.Time) error { return c.Follow(now, tp, epoch, leader) })
	if err != nil {
		return fmt.Errorf("walstore: Follow %s: %w", tp, err)
	}
	return nil
}

// Unfollow makes the engine stop following tp and returns once no append
// to tp is in flight and none will be made. Following tp again later
// starts afresh from the local log. It waits for the engine to finish the
// local-log call it may be making, as long as ctx allows, and changes
// nothing if it gives up; after Run has returned it fails with
// ErrStopped.
func (f *followerEngine) Unfollow(ctx context.Context, tp metadata.TopicPartition) error {
	err := f.withPartition(ctx, tp, func(_ *followcore.Core, now time.Time) error {
		f.unfollowLocked(now, tp)
		return nil
	})
	if err != nil {
		return fmt.Errorf("walstore: Unfollow %s: %w", tp, err)
	}
	return nil
}

// withPartition runs fn on the core as withCore does, holding tp's
// local-log calls (see localCalls), so that no call of tp is in flight.
func (f *followerEngine) withPartition(ctx context.Context, tp metadata.TopicPartition, fn func(c *followcore.Core, now time.Time) error) error {
	if err := f.locals.hold(ctx, tp, ""); err != nil {
		return err
	}
	defer f.locals.release(tp)
	return f.withCore(ctx, fn)
}

// withCore runs fn on the core holding roleMu, which it waits for only
// as long as ctx allows, and wakes Run after; it fails with ErrStopped
// once Run has returned. The caller holds the local-log calls of the
// partition fn changes (localCalls.hold), so no request of it starts
// until fn returns, and a role change fn makes is in effect when it
// does: fn may change the leader side too, before the follower side acts
// on what it did. A change fn refuses must leave everything as it was.
func (f *followerEngine) withCore(ctx context.Context, fn func(c *followcore.Core, now time.Time) error) error {
	if err := f.roleMu.lockContext(ctx); err != nil {
		return fmt.Errorf("waiting for the follower engine: %w", err)
	}
	defer f.reportHealth()
	defer f.roleMu.unlock()
	if f.stopped {
		return ErrStopped
	}
	if err := fn(f.core, f.cfg.Clock.Now()); err != nil {
		return err
	}
	notify(f.wake)
	return nil
}

// unfollowLocked stops following tp; the caller holds roleMu.
func (f *followerEngine) unfollowLocked(now time.Time, tp metadata.TopicPartition) {
	f.core.Unfollow(now, tp)
	f.mu.Lock()
	delete(f.lag, tp)
	if f.failing.update(tp, time.Time{}, nil) {
		f.healthNews = true
	}
	f.mu.Unlock()
}

// forgetFailure drops tp's failure, for a role that ends once Run has
// returned, and reports the change.
func (f *followerEngine) forgetFailure(tp metadata.TopicPartition) {
	f.mu.Lock()
	delete(f.lag, tp)
	if f.failing.update(tp, time.Time{}, nil) {
		f.healthNews = true
	}
	f.mu.Unlock()
	f.reportHealth()
}

// Health returns the engine's health: the followed partitions whose
// replication a failure of the local log has stopped. A follower is never
// Degraded: an unreachable bucket or metadata log is waited out.
func (f *followerEngine) Health() Health {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.healthLocked(nil)
}

// healthLocked is the engine's health, but for the partitions in except
// (see failing.list); f.mu held.
func (f *followerEngine) healthLocked(except map[metadata.TopicPartition]bool) Health {
	parts, n := f.failing.list(except)
	return Health{Partitions: parts, FailingPartitions: n}
}

// healthExcept is Health but for the partitions in except.
func (f *followerEngine) healthExcept(except map[metadata.TopicPartition]bool) Health {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.healthLocked(except)
}

// PartitionError returns why the engine does not replicate tp, a
// *PartitionError, or nil if it does (or does not follow tp).
func (f *followerEngine) PartitionError(tp metadata.TopicPartition) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.failing.get(tp); e != nil {
		return e
	}
	return nil
}

// reportHealth calls OnHealth if the failing partitions changed since it
// last did, with the current health; never with roleMu held, since
// OnHealth may read the Node's health. Calls are made one at a time, so
// the last is of the current health.
func (f *followerEngine) reportHealth() {
	if f.onHealth == nil {
		return
	}
	f.reportMu.Lock()
	defer f.reportMu.Unlock()
	f.mu.Lock()
	news := f.healthNews
	var h Health
	if news {
		h, f.healthNews = f.healthLocked(nil), false
	}
	f.mu.Unlock()
	if news {
		f.onHealth(h)
	}
}

// roleLock is a mutex whose callers can stop waiting when their context
// ends (a one-slot semaphore).
type roleLock chan struct{}

func (l roleLock) lock()   { l <- struct{}{} }
func (l roleLock) unlock() { <-l }

// lockContext takes the lock, or gives up with ctx.Err() when ctx ends.
func (l roleLock) lockContext(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run replicates until ctx ends, then waits for its goroutines and returns
// nil. Unreachable buckets, missing or corrupt objects, metadata-log errors
// and a failing local log are retried or waited out, never fatal: a
// partition whose local log fails rests for a backoff and starts again
// from what the log says, without holding up the others. Call it once: a
// second call, while the first runs or after it returned, returns at once
// an error wrapping ErrStopped and changes nothing.
func (f *followerEngine) Run(ctx context.Context) error {
	if !f.ran.CompareAndSwap(false, true) {
		return fmt.Errorf("walstore: follower: Run called twice: %w", ErrStopped)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	recs := make(chan []metadata.Record, 4)
	results := make(chan fetchDone, f.cfg.FetchConcurrency)
	defer func() {
		cancel()
		f.local.release()
		wg.Wait()
		f.roleMu.lock()
		f.stopped = true
		f.roleMu.unlock()
		f.mgr.Close()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.readMetadata(ctx, recs)
	}()
	var wakeAt time.Time
	for {
		var wake <-chan time.Time
		if !wakeAt.IsZero() {
			wake = f.cfg.Clock.After(max(wakeAt.Sub(f.cfg.Clock.Now()), time.Millisecond))
		}
		var event func(now time.Time)
		select {
		case <-ctx.Done():
			return nil
		case rs := <-recs:
			// A read may hold thousands of messages of thousands of
			// markers each: the core takes it a step at a time, so that
			// Follow and Unfollow wait for one step, not for the read.
			for n := stepRecords(rs); n < len(rs); n = stepRecords(rs) {
				part := rs[:n]
				rs = rs[n:]
				f.locked(func() {
					f.core.Records(f.cfg.Clock.Now(), part)
					wakeAt = f.drive(ctx, &wg, results)
				})
				f.reportHealth()
				if ctx.Err() != nil {
					return nil
				}
			}
			event = func(now time.Time) { f.core.Records(now, rs) }
		case done := <-results:
			delete(f.fetches, done.id)
			event = func(now time.Time) { f.core.Fetched(now, done.id, done.results) }
		case <-f.wake:
		case <-wake:
		}
		f.locked(func() {
			now := f.cfg.Clock.Now()
			if event != nil {
				event(now)
			} else {
				f.core.Tick(now)
			}
			wakeAt = f.drive(ctx, &wg, results)
		})
		f.reportHealth()
	}
}

// stepBytes bounds the metadata the core takes in one step (at least one
// record): about a thousand entries, or some thousands of markers.
const stepBytes = 16 << 10

// stepRecords returns how many of the leading records the core takes in
// one step: as many as fit in stepBytes, and at least one.
func stepRecords(rs []metadata.Record) int {
	size := 0
	for i, r := range rs {
		size += len(r.Value)
		if size > stepBytes && i > 0 {
			return i
		}
	}
	return len(rs)
}

// locked runs fn holding roleMu, and releases it however fn ends: a local
// log that panics must crash the process, not leave Run's cleanup waiting
// for a lock its own goroutine holds.
func (f *followerEngine) locked(fn func()) {
	f.roleMu.lock()
	defer f.roleMu.unlock()
	fn()
}

// drive performs what the core asks until it asks for no more local-log
// work, and returns when it wants a Tick. Each turn takes the core's
// Ready and acknowledges it (Advance) before performing it: the answers
// it feeds the core meanwhile make the next one.
func (f *followerEngine) drive(ctx context.Context, wg *sync.WaitGroup, results chan<- fetchDone) time.Time {
	yield := false
	for {
		rd := f.core.Ready()
		f.core.Advance()
		// Counters first: an append below must find the messages that led
		// to it counted.
		f.mu.Lock()
		f.stats = f.core.Counters
		for _, l := range rd.Lags {
			f.lag[l.Partition] = l.Offsets
		}
		for _, fl := range rd.Failures {
			if f.failing.update(fl.Partition, fl.Since, fl.Err) {
				f.healthNews = true
			}
		}
		for _, m := range rd.Mismatches {
			if len(f.mismatches) == keptMismatches {
				f.mismatches = slices.Delete(f.mismatches, 0, 1)
			}
			f.mismatches = append(f.mismatches, m)
		}
		f.mu.Unlock()
		if f.cfg.OnDigestMismatch != nil {
			for i := range rd.Mismatches {
				m := rd.Mismatches[i]
				f.cfg.OnDigestMismatch(&m)
			}
		}
		if rd.Rewind {
			notify(f.rewind)
		}
		for _, id := range rd.Cancels {
			if stop := f.fetches[id]; stop != nil {
				stop()
				delete(f.fetches, id)
			}
		}
		for _, fe := range rd.Fetches {
			f.fetch(ctx, wg, results, fe)
		}
		for _, l := range rd.Loads {
			var st followcore.LocalState
			f.queue = append(f.queue, localReq{id: l.ID, tp: l.Partition,
				run:    func(ctx context.Context) (err error) { st, err = f.load(ctx, l.Partition); return err },
				answer: func(now time.Time, err error) { f.core.Loaded(now, l.ID, st, err) }})
		}
		for _, t := range rd.Truncates {
			var to, end int64
			f.queue = append(f.queue, localReq{id: t.ID, tp: t.Partition,
				run:    func(ctx context.Context) (err error) { to, end, err = f.truncate(ctx, t); return err },
				answer: func(now time.Time, err error) { f.core.Truncated(now, t.ID, to, end, err) }})
		}
		for _, v := range rd.Verifies {
			var bs []storage.Batch
			f.queue = append(f.queue, localReq{id: v.ID, tp: v.Partition,
				run:    func(ctx context.Context) (err error) { bs, err = f.readBack(ctx, v); return err },
				answer: func(now time.Time, err error) { f.core.Verified(now, v.ID, bs, err) }})
		}
		for _, a := range rd.Appends {
			var end int64
			f.queue = append(f.queue, localReq{id: a.ID, tp: a.Partition,
				run:    func(ctx context.Context) (err error) { end, err = f.append(ctx, a); return err },
				answer: func(now time.Time, err error) { f.core.Appended(now, a.ID, end, err) }})
		}
		if yield {
			// A call was given up on: its failure, taken from the core
			// above, is reported (OnHealth needs roleMu released) before
			// the requests still queued are performed, each of which may
			// wait as long again.
			f.report(rd.Progress, rd.Applied)
			return f.cfg.Clock.Now()
		}
		var answered int
		var live bool
		answered, yield, live = f.perform(ctx)
		if !live {
			return time.Time{}
		}
		f.report(rd.Progress, rd.Applied)
		if answered == 0 {
			return rd.WakeAt
		}
	}
}

// localReq is a local-log request of the core: run makes its calls, with
// its partition held and roleMu not; answer gives the core the outcome,
// with roleMu.
type localReq struct {
	id     uint64
	tp     metadata.TopicPartition
	run    func(ctx context.Context) error
	answer func(now time.Time, err error)
}

// perform performs the queued requests, holding roleMu but for their
// calls, and returns how many it answered; live is false if ctx ended.
// A request of a partition someone else holds (a transition, the leader
// engine) stays queued until that one releases it; one of a partition
// whose call is stuck is answered at once with that error, so the
// partition rests and tries again later, without a second call. It stops
// after a request whose call it gave up on, gaveUp true, leaving the rest
// queued, so that the failure is known before it waits for another.
func (f *followerEngine) perform(ctx context.Context) (answered int, gaveUp, live bool) {
	queue := f.queue
	f.queue = nil
	for i, r := range queue {
		if !f.core.Pending(r.id) {
			continue // unfollowed since: it must not be performed
		}
		held, err := f.locals.tryHold(r.tp)
		if !held && err == nil {
			f.queue = append(f.queue, r)
			continue
		}
		if held {
			f.roleMu.unlock()
			err = r.run(ctx)
			f.roleMu.lock()
			f.locals.release(r.tp)
		}
		if ctx.Err() != nil {
			f.queue = append(f.queue, queue[i+1:]...)
			return answered, false, false
		}
		r.answer(f.cfg.Clock.Now(), err)
		answered++
		var na *noAnswerError
		if held && errors.As(err, &na) {
			f.queue = append(f.queue, queue[i+1:]...)
			return answered, true, true
		}
	}
	return answered, false, true
}

// report delivers progress to OnApplied, and the lag of appends to the
// histogram.
func (f *followerEngine) report(progress []followcore.Progress, applied []followcore.Applied) {
	now := f.cfg.Clock.Now()
	for _, a := range applied {
		f.applyLat.observe(now.Sub(time.UnixMilli(a.MaxTimestamp)))
	}
	if f.onApplied == nil {
		return
	}
	for _, p := range progress {
		f.onApplied(Progress{Partition: p.Partition, Leader: p.Leader, Follower: f.cfg.BrokerID, EndOffset: p.EndOffset, LastEpoch: p.LastEpoch})
	}
}

// load reads tp's local state for the core; the caller holds tp.
func (f *followerEngine) load(ctx context.Context, tp metadata.TopicPartition) (followcore.LocalState, error) {
	leo, err := f.endOffset(ctx, tp)
	if err != nil {
		return followcore.LocalState{}, err
	}
	var epochs []storage.EpochEntry
	err = f.locals.call(f.local.context(ctx), tp, "LocalLog.Epochs", func(context.Context) (err error) {
		epochs, err = f.cfg.Local.Epochs(tp)
		return err
	})
	if err != nil {
		return followcore.LocalState{}, err
	}
	return followcore.LocalState{EndOffset: leo, Epochs: epochs}, nil
}

// endOffset reads tp's log end; the caller holds tp.
func (f *followerEngine) endOffset(ctx context.Context, tp metadata.TopicPartition) (int64, error) {
	var end int64 // set by the call, read only if it returned
	err := f.locals.call(f.local.context(ctx), tp, "LocalLog.EndOffset", func(context.Context) (err error) {
		end, err = f.cfg.Local.EndOffset(tp)
		return err
	})
	if err != nil {
		return 0, err
	}
	return end, nil
}

// truncate performs a truncation the core asks for and returns where it
// truncated and where the log ends afterwards; the caller holds the
// partition.
func (f *followerEngine) truncate(ctx context.Context, t followcore.Truncate) (int64, int64, error) {
	to := t.To
	if t.AtBatch {
		// Epochs start at batch boundaries in every log, but a marker may
		// be wrong: a batch holding the first divergent offset goes whole.
		var bs []storage.Batch // set by the call, read only if it returned
		err := f.locals.call(f.local.context(ctx), t.Partition, "LocalLog.Read", func(ctx context.Context) (err error) {
			bs, err = f.cfg.Local.Read(ctx, t.Partition, t.To, 1)
			return err
		})
		if err != nil {
			return 0, 0, err
		}
		if len(bs) > 0 && bs[0].FirstOffset < to && to <= bs[0].LastOffset {
			to = bs[0].FirstOffset
		}
	}
	at := to // what the call reads, never changed
	err := f.locals.call(f.local.context(ctx), t.Partition, "LocalLog.Truncate", func(ctx context.Context) error {
		return f.cfg.Local.Truncate(ctx, t.Partition, at)
	})
	if err != nil {
		return 0, 0, err
	}
	end, err := f.endOffset(ctx, t.Partition)
	if err != nil {
		return 0, 0, err
	}
	return to, end, nil
}

// append performs an append the core asks for and returns where the log
// ends afterwards; the caller holds the partition. An append given up on
// may still read the batches: the core gives their buffer back to the
// pool only once it learns the append succeeded.
// readBack reads the batches of [v.From, v.To) back from the local log
// for the core to check against their digest; the caller holds the
// partition.
func (f *followerEngine) readBack(ctx context.Context, v followcore.Verify) ([]storage.Batch, error) {
	var out []storage.Batch
	for from := v.From; from < v.To; {
		var bs []storage.Batch
		err := f.locals.call(f.local.context(ctx), v.Partition, "LocalLog.Read", func(ctx context.Context) (err error) {
			bs, err = f.cfg.Local.Read(ctx, v.Partition, from, readBackBytes)
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(bs) == 0 || bs[0].LastOffset < from {
			break // the log ends early, or answered below: the core sees a short range
		}
		for _, b := range bs {
			if b.FirstOffset >= v.To {
				return out, nil
			}
			out = append(out, b)
			from = b.LastOffset + 1
		}
	}
	return out, nil
}

// readBackBytes is how much readBack asks for a call: a section's worth.
const readBackBytes = 1 << 20

func (f *followerEngine) append(ctx context.Context, a followcore.Append) (int64, error) {
	err := f.locals.call(f.local.context(ctx), a.Partition, "LocalLog.Append", func(ctx context.Context) error {
		return f.cfg.Local.Append(ctx, a.Partition, a.Batches)
	})
	if err != nil {
		return 0, err
	}
	return f.endOffset(ctx, a.Partition)
}

// localDeadline gives local-log calls their context: one that ends
// LocalTimeout after the call starts, or up to timeout/64 later. A context
// with a deadline costs a timer and a few allocations, and one per append
// was a good part of a follower's allocations: calls made within
// timeout/64 of one another (an append per partition of a fetched object)
// share one. A call that runs out leaves less than timeout, so the next
// gets a new one.
type localDeadline struct {
	timeout  time.Duration
	ctx      context.Context
	cancel   context.CancelFunc
	deadline time.Time
}

// context returns the context for a local-log call starting now, derived
// from Run's context.
func (d *localDeadline) context(run context.Context) context.Context {
	now := time.Now()
	if d.ctx == nil || d.deadline.Sub(now) < d.timeout {
		d.release()
		d.deadline = now.Add(d.timeout).Add(d.timeout / 64) // Add saturates; a sum could overflow
		d.ctx, d.cancel = context.WithDeadline(run, d.deadline)
	}
	return d.ctx
}

// release ends the shared context, if any, and its timer.
func (d *localDeadline) release() {
	if d.cancel != nil {
		d.cancel()
	}
	d.ctx, d.cancel = nil, nil
}

// fetch starts a fetch on its own goroutine; its results go to Run, unless
// the core cancels it first (the loser of a hedged pair). A hedge is a
// request of its own, made while the first is still in flight, so the
// store's client sends it on another connection.
func (f *followerEngine) fetch(ctx context.Context, wg *sync.WaitGroup, results chan<- fetchDone, fe followcore.Fetch) {
	start := f.cfg.Clock.Now()
	cctx, stop := context.WithCancel(ctx)
	f.fetches[fe.ID] = stop
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stop()
		fctx, cancel := context.WithTimeout(cctx, f.cfg.FetchTimeout)
		defer cancel()
		res, err := f.mgr.fetch(fctx, fe.Entries, f.gets)
		if cctx.Err() != nil {
			// Run ends, or the core no longer wants it (the loser of a
			// hedged pair): nobody will append what it read.
			for _, r := range res {
				if r.buf != nil {
					r.buf.Release()
				}
			}
			return
		}
		out := make([]followcore.Result, len(fe.Entries))
		for i, e := range fe.Entries {
			switch {
			case err != nil:
				// The fetch timed out: every entry is unavailable.
				out[i] = followcore.Result{Entry: e, Outcome: followcore.Unavailable, Err: &FetchError{Object: e.Object, Partition: e.Partition,
					Position: e.Position, Length: e.Length, Err: fmt.Errorf("%w: no answer within %v", storage.ErrUnavailable, f.cfg.FetchTimeout)}}
			case res[i].Err != nil:
				out[i] = followcore.Result{Entry: e, Outcome: followcore.OutcomeOf(res[i].Err), Err: res[i].Err}
			default:
				out[i] = followcore.Result{Entry: e, Batches: res[i].Batches}
				if res[i].buf != nil {
					out[i].Buffer = res[i].buf // the core releases it once appended
				}
			}
		}
		f.fetchLat.observe(f.cfg.Clock.Now().Sub(start))
		select {
		case results <- fetchDone{id: fe.ID, results: out}:
		case <-ctx.Done():
		}
	}()
}

// readMetadata reads this broker's metadata partition from its low
// watermark and hands the records to Run, whose core decodes them. A follower that restarts
// reads the retained metadata again; what it already applied is skipped.
func (f *followerEngine) readMetadata(ctx context.Context, out chan<- []metadata.Record) {
	// Partitions is fixed for the log's life and checked at construction.
	p := f.cfg.BrokerID % f.cfg.Log.Partitions()
	cursor := int64(-1)
	for attempt := 0; ctx.Err() == nil; {
		select {
		case <-f.rewind:
			if !f.quietRewinds(ctx) {
				return
			}
			cursor = -1
		default:
		}
		if cursor < 0 {
			low, _, err := f.cfg.Log.Watermarks(ctx, p)
			if err == nil && low < 0 {
				// Taken as the cursor, it would ask for the watermarks
				// again at once, for ever.
				err = &DependencyError{Dependency: "metadata.Log.Watermarks", Err: fmt.Errorf("%w: negative low watermark %d", ErrContractViolation, low)}
			}
			if err != nil {
				if !f.pause(ctx, &attempt, "reading metadata watermarks", err) {
					return
				}
				continue
			}
			cursor = low
		}
		start := f.cfg.Clock.Now()
		recs, err := f.cfg.Log.Read(ctx, p, cursor, f.cfg.ReadBatch)
		switch {
		case errors.Is(err, metadata.ErrOffsetOutOfRange):
			// Trimmed under us: what was trimmed was applied by every
			// follower, this one included, or it is obsolete.
			f.log.Warn("activetier: metadata trimmed past the follower's cursor; resuming at the low watermark", "cursor", cursor)
			cursor = -1
			continue
		case err != nil:
			if !f.pause(ctx, &attempt, "reading metadata", err) {
				return
			}
			continue
		}
		if err := checkRecords(recs, cursor); err != nil {
			if !f.pause(ctx, &attempt, "reading metadata", err) {
				return
			}
			continue
		}
		attempt = 0
		if len(recs) == 0 {
			if f.cfg.Clock.Now().Sub(start) < f.cfg.PollInterval/2 {
				if sleep(ctx, f.cfg.Clock, f.cfg.PollInterval) != nil {
					return
				}
			}
			continue
		}
		cursor = recs[len(recs)-1].Offset + 1
		select {
		case out <- recs:
		case <-ctx.Done():
			return
		}
	}
}

// rewindQuiet is how long readMetadata waits for asks to read the metadata
// again to stop coming before it does.
const rewindQuiet = 50 * time.Millisecond

// quietRewinds waits until no ask to read the metadata again has come for
// rewindQuiet, and reports false if ctx ended. Role changes come in bursts
// (a broker starting follows thousands of partitions, one call each, and
// each newly followed partition needs the retained metadata): waiting for
// the burst to end makes it cost one read of the metadata, not one per
// partition, which grew with partitions times the metadata retained.
func (f *followerEngine) quietRewinds(ctx context.Context) bool {
	for {
		select {
		case <-f.rewind:
		case <-f.cfg.Clock.After(rewindQuiet):
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// checkRecords checks what metadata.Log.Read returned from offset from:
// records at or after it, in ascending offset order. Anything else would
// move the cursor backwards, into a loop, or past records never read.
func checkRecords(recs []metadata.Record, from int64) error {
	next := from
	for _, r := range recs {
		if r.Offset < next {
			return &DependencyError{Dependency: "metadata.Log.Read", Err: fmt.Errorf("%w: record at offset %d where %d or later was due (read from %d)", ErrContractViolation, r.Offset, next, from)}
		}
		next = r.Offset + 1
	}
	return nil
}

// pause logs err and waits out the next backoff delay; false if ctx ended.
func (f *followerEngine) pause(ctx context.Context, attempt *int, what string, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	f.log.Warn("activetier: "+what+" failed; retrying", "err", err)
	d := f.jitter.delay(f.cfg.Backoff, *attempt)
	*attempt++
	return sleep(ctx, f.cfg.Clock, d) == nil
}
