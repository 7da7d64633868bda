package walstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/bufpool"
	"github.com/activetier/activetier/internal/leadcore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Errors returned by the leader engine, to be tested with errors.Is.
var (
	// ErrBufferFull: Append would take the buffered bytes past
	// NodeConfig.BufferBytes and the overflow policy is Reject.
	ErrBufferFull = errors.New("walstore: leader buffer full")
	// ErrNotLeader: Append or Republish for a partition this engine was not
	// told it leads (see BecomeLeader).
	ErrNotLeader = errors.New("walstore: not the leader of the partition")
	// ErrStopped: the engine's Run has returned, or was called a second
	// time.
	ErrStopped = errors.New("walstore: engine stopped")
	// ErrStaleEpoch: BecomeLeader at an epoch not above the last one this
	// engine led the partition at. An epoch names one leadership, so that
	// a wait for records accepted at it is never answered by another.
	ErrStaleEpoch = errors.New("walstore: stale leader epoch")
)

// Overflow says what Append does when the buffer is full.
type Overflow int

const (
	// Block makes Append wait, up to its context's deadline, until uploads
	// free enough space, or until the leadership it waits in ends
	// (ErrNotLeader) or Run does (ErrStopped).
	Block Overflow = iota
	// Reject makes Append return ErrBufferFull at once, so the broker can
	// fail the produce request or fall back to ordinary replication.
	Reject
)

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Health is the leader engine's upload and publish health.
type Health struct {
	// Degraded is true while some upload or metadata publish has gone
	// DegradedAfter without succeeding: the broker should replicate this
	// data the ordinary way until it clears.
	Degraded bool
	// Since is when the oldest such operation began (zero if healthy).
	Since time.Time
	// Err is that operation's latest error, or an error saying it has not
	// returned. Either names the call in a *DependencyError
	// ("ObjectStore.Put" for an upload, "metadata.Log.Append" for a
	// publish); an attempt that did not answer within RequestTimeout, or
	// one that has not returned, matches storage.ErrUnavailable.
	Err error
	// Partitions are up to MaxFailingListed of the partitions whose
	// replication a failure has stopped, each with its error (see
	// PartitionError), in partition order; FailingPartitions counts them
	// all. They do not make the engine Degraded, which is about every
	// partition: the broker replicates those the ordinary way, or looks
	// into their dependency.
	Partitions        []*PartitionError
	FailingPartitions int
}

// leaderEngine is the leader-side engine: it buffers the batches the broker
// appends, cuts them into combined objects, uploads several at a time,
// and publishes each partition's entries in offset order once their object
// is stored. It is a Node's leader side: the Node validates its
// configuration, makes it and drives it with Run, and documents the
// calls brokers make.
//
// The protocol is a leadcore.Core, a state machine without I/O; the
// engine feeds it the broker's calls and the results of the work it
// hands out, and performs that work: encoding, uploads (several at once, each
// attempt bounded by RequestTimeout and retried after the core's backoff),
// metadata appends, local-log reads and deletes.
type leaderEngine struct {
	cfg      *NodeConfig // validated by NewNode; the leader side's fields
	log      *slog.Logger
	onHealth func(Health) // the Node's: either side's health news is its
	mgr      *Manager
	locals   *localCalls // the LocalLog calls, shared with the follower engine in a Node

	ran      atomic.Bool // Run was called
	reportMu sync.Mutex  // serializes OnHealth calls; taken before mu

	mu       sync.Mutex
	core     *leadcore.Core
	running  bool            // Run performs the core's requests
	stopped  bool            // Run has returned, or is returning
	released bool            // Run has closed the core; events are ignored
	ctx      context.Context // Run's, while running
	wg       sync.WaitGroup  // Run's goroutines
	ops      map[uint64]*opCtl
	calls    map[uint64]chan error // Republish calls by task id
	space    signal                // buffered bytes dropped
	durable  signal                // a durable offset advanced or a leadership ended
	commit   signal                // a high watermark advanced or a leadership ended
	done     chan struct{}         // closed when Run stops
	wakeAt   time.Time             // when Run next ticks the core
	reported Health                // the health last given to OnHealth
	failing  failing               // led partitions whose replication stopped
	// gcCalls are the CollectGarbage and Sweep calls under way, by the
	// id lastCall gave them; queued are those made before Run, which it
	// feeds the core when it starts.
	gcCalls  map[uint64]chan leadcore.CallDone
	lastCall uint64
	queued   []queuedCall

	wake                  chan struct{} // wakeAt changed
	uploadLat, publishLat histogram
	objects               *bufpool.Pool // cut objects' buffers, reused once uploaded
}

// opCtl is the driver's handle on a request in flight.
type opCtl struct {
	ctx    context.Context // ends when the request does
	cancel context.CancelFunc
	next   chan time.Time // when to make the next attempt; zero: stop
	hold   *objectHold    // an object upload's: its attempts' hold on the buffer
}

// objectHold is the attempts' hold on a cut object's pooled buffer: an
// upload's own attempts and its hedge may both be reading it. It goes back
// to the pool once the object is stored and the last attempt has returned
// (a store must not retain a body after Put returns); a hedge that lost
// may well outlive the attempt that won.
type objectHold struct {
	data   []byte
	pool   *bufpool.Pool
	refs   atomic.Int32
	stored atomic.Bool
}

// release drops one attempt's hold.
func (h *objectHold) release() {
	if h.refs.Add(-1) == 0 && h.stored.Load() {
		h.pool.Put(h.data)
	}
}

// send replaces the op's pending directive with at.
func (o *opCtl) send(at time.Time) {
	select {
	case <-o.next:
	default:
	}
	o.next <- at
}

// wait waits for the time of the next attempt and reports whether to make
// it. A new directive while waiting replaces the old: a success of another
// operation of its kind makes the retry go at once.
func (o *opCtl) wait(ctx context.Context, clock Clock) bool {
	var at time.Time
	select {
	case <-ctx.Done():
		return false
	case at = <-o.next:
	}
	for {
		if at.IsZero() {
			return false
		}
		d := at.Sub(clock.Now())
		if d <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-clock.After(d):
			return true
		case at = <-o.next:
		}
	}
}

// newLeaderEngine returns the leader side of a Node configured by cfg, which
// NewNode has validated. Nothing runs until Run.
func newLeaderEngine(cfg *NodeConfig, onHealth func(Health)) (*leaderEngine, error) {
	logger := cfg.Logger.With("engine", "leader")
	mgr, err := NewManager(ManagerConfig{
		Store: cfg.Store, BrokerID: cfg.BrokerID, KeyPrefix: cfg.KeyPrefix,
		Codec: cfg.Codec, Seed: cfg.Seed, Clock: cfg.Clock, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	// Cut objects wait for upload within BufferBytes; as many bytes of
	// free buffers serve the next cuts.
	objects := bufpool.New(cfg.BufferBytes)
	lc, _ := cfg.coreConfigs()
	lc.Logger = logger
	lc.Violation = contractViolation
	lc.NoAnswer = func(what string, d time.Duration) error {
		return fmt.Errorf("walstore: %s: %w", what, &DependencyError{Dependency: dependencyOf(what), Err: &noAnswerError{d: d}})
	}
	lc.ObjectBuffer = objects.Get
	core, err := leadcore.New(lc)
	if err != nil {
		mgr.Close()
		return nil, fmt.Errorf("walstore: leader: %w", err)
	}
	return &leaderEngine{
		cfg: cfg, log: logger, onHealth: onHealth, mgr: mgr, core: core, objects: objects, locals: newLocalCalls(cfg.Clock),
		ops:     make(map[uint64]*opCtl),
		calls:   make(map[uint64]chan error),
		gcCalls: make(map[uint64]chan leadcore.CallDone),
		done:    make(chan struct{}),
		wake:    make(chan struct{}, 1),
		failing: newFailing(Leading),
	}, nil
}

// signal wakes every goroutine waiting for a change, under the Leader's
// mu: a waiter takes wait's channel, and broadcast closes it. The channel
// is made only when someone waits: the changes come with every append and
// every follower's progress, and a new channel for each was much of a
// leader's allocations.
type signal struct{ ch chan struct{} }

func (s *signal) wait() <-chan struct{} {
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) broadcast() {
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// step feeds the core one event and performs what it hands out.
func (l *leaderEngine) step(event func(c *leadcore.Core, now time.Time)) {
	l.mu.Lock()
	if l.released {
		// Run has returned and closed the core: nothing it would do
		// is performed any more.
		l.mu.Unlock()
		return
	}
	event(l.core, l.cfg.Clock.Now())
	changed := l.takeLocked()
	l.mu.Unlock()
	if changed {
		l.report()
	}
}

// takeLocked takes the core's Ready, if Run is running, and performs it:
// wakes waiters, starts the requests' goroutines, routes retries and
// cancellations. It reports whether the health changed; the caller then
// calls report, outside mu.
func (l *leaderEngine) takeLocked() bool {
	if !l.running || !l.core.HasReady() {
		return false
	}
	rd := l.core.Ready()
	l.core.Advance()
	if rd.DurableChanged {
		l.durable.broadcast()
	}
	if rd.SpaceFreed {
		l.space.broadcast()
	}
	if rd.CommitChanged {
		l.commit.broadcast()
	}
	for _, d := range rd.UploadLatency {
		l.uploadLat.observe(d)
	}
	for _, d := range rd.PublishLatency {
		l.publishLat.observe(d)
	}
	for _, f := range rd.Failures {
		l.failing.update(f.Partition, f.Since, f.Err)
	}
	for _, e := range rd.Encodes {
		l.startEncode(e)
	}
	for _, u := range rd.Uploads {
		l.startUpload(u)
	}
	for _, p := range rd.Publishes {
		l.startPublish(p)
	}
	for _, r := range rd.Reads {
		l.startRead(r)
	}
	for _, d := range rd.Deletes {
		l.startDelete(d)
	}
	for _, h := range rd.Hedges {
		l.startHedge(h)
	}
	l.directLocked(rd)
	if !rd.WakeAt.Equal(l.wakeAt) {
		l.wakeAt = rd.WakeAt
		notify(l.wake)
	}
	return rd.HealthChanged
}

// directLocked routes rd's retries, cancellations and finished calls.
func (l *leaderEngine) directLocked(rd leadcore.Ready) {
	for _, r := range rd.Retries {
		if op := l.ops[r.ID]; op != nil {
			op.send(r.At)
		}
	}
	for _, id := range rd.Cancels {
		if op := l.ops[id]; op != nil {
			op.cancel()
			op.send(time.Time{})
			delete(l.ops, id)
		}
	}
	for _, d := range rd.Done {
		if ch := l.calls[d.ID]; ch != nil {
			ch <- d.Err
			delete(l.calls, d.ID)
		}
	}
	for _, d := range rd.Calls {
		if ch := l.gcCalls[d.Call]; ch != nil {
			ch <- d
			delete(l.gcCalls, d.Call)
		}
	}
}

// spawnLocked runs f on a goroutine of Run's, with a context the core can
// cancel as request id.
func (l *leaderEngine) spawnLocked(id uint64, f func(ctx context.Context, op *opCtl)) {
	ctx, cancel := context.WithCancel(l.ctx)
	op := &opCtl{ctx: ctx, cancel: cancel, next: make(chan time.Time, 1)}
	l.ops[id] = op
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer cancel()
		f(ctx, op)
		l.mu.Lock()
		if l.ops[id] == op {
			delete(l.ops, id)
		}
		l.mu.Unlock()
	}()
}

// retrying makes attempts of a request until one succeeds, the core stops
// it, or Run ends; each attempt's result goes to the core. hold, if not
// nil, is released when it stops making attempts.
func (l *leaderEngine) retrying(id uint64, what string, try func(context.Context) error, result func(c *leadcore.Core, now time.Time, err error, kind leadcore.Kind), hold *objectHold) {
	l.spawnLocked(id, func(ctx context.Context, op *opCtl) {
		if hold != nil {
			defer hold.release()
		}
		for {
			err := attempt(ctx, l.cfg.RequestTimeout, "walstore: "+what, dependencyOf(what), try)
			if ctx.Err() != nil {
				return
			}
			live := false
			l.step(func(c *leadcore.Core, now time.Time) {
				result(c, now, err, leadcore.KindOf(err))
				live = c.Live(id) // the core judged the attempt a failure to retry
			})
			if !live || !op.wait(ctx, l.cfg.Clock) {
				return
			}
		}
	})
	l.ops[id].hold = hold // under mu, as startHedge reads it
}

// startEncode cuts the builder outside the lock, so that Append never
// waits for an object to be encoded.
func (l *leaderEngine) startEncode(e leadcore.Encode) {
	l.spawnLocked(e.ID, func(context.Context, *opCtl) {
		objs, err := e.Builder.Cut(nil)
		l.step(func(c *leadcore.Core, now time.Time) { c.Encoded(now, e.ID, objs, err) })
	})
}

func (l *leaderEngine) startUpload(u leadcore.Upload) {
	var ref metadata.ObjectRef
	var hold *objectHold
	if u.What == leadcore.WhatUpload {
		// A cut object's buffer is reused once it is stored; a copy's, or
		// one abandoned, is left to the collector.
		hold = &objectHold{data: u.Data, pool: l.objects}
		hold.refs.Store(1)
	}
	l.retrying(u.ID, u.What, func(ctx context.Context) (err error) {
		ref, err = l.mgr.put(ctx, u.Data)
		return err
	}, func(c *leadcore.Core, now time.Time, err error, kind leadcore.Kind) {
		if hold != nil && err == nil && c.Live(u.ID) {
			hold.stored.Store(true)
		}
		c.Uploaded(now, u.ID, ref, err, kind)
	}, hold)
}

// startHedge makes a hedged attempt of an upload in flight, on a goroutine
// of its own: the store's client sends it on another connection than the
// attempt it hedges. It ends with the upload, whichever attempt wins.
func (l *leaderEngine) startHedge(h leadcore.Hedge) {
	op := l.ops[h.ID]
	if op == nil || op.hold == nil {
		return // the upload is over: its attempts returned
	}
	hold := op.hold
	hold.refs.Add(1)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer hold.release()
		var ref metadata.ObjectRef
		err := attempt(op.ctx, l.cfg.RequestTimeout, "walstore: hedged "+h.What, dependencyOf(h.What), func(ctx context.Context) (err error) {
			ref, err = l.mgr.put(ctx, h.Data)
			return err
		})
		if op.ctx.Err() != nil {
			return
		}
		l.step(func(c *leadcore.Core, now time.Time) {
			if err == nil && c.Live(h.ID) {
				hold.stored.Store(true)
			}
			c.HedgeUploaded(now, h.ID, ref, err)
		})
	}()
}

func (l *leaderEngine) startPublish(p leadcore.Publish) {
	var off int64
	l.retrying(p.ID, leadcore.WhatPublish, func(ctx context.Context) (err error) {
		if off, err = l.cfg.Log.Append(ctx, p.Partition, p.Data); err != nil {
			err = &DependencyError{Dependency: dependencyOf(leadcore.WhatPublish), Err: err}
		}
		return err
	}, func(c *leadcore.Core, now time.Time, err error, kind leadcore.Kind) {
		c.Published(now, p.ID, off, err, kind)
	}, nil)
}

func (l *leaderEngine) startRead(r leadcore.LocalRead) {
	l.spawnLocked(r.ID, func(ctx context.Context, _ *opCtl) {
		var res leadcore.LocalResult
		switch r.What {
		case leadcore.ReadLineage:
			res.Epochs, res.EpochsErr = l.epochs(ctx, r.Partition, "walstore: reading the local log's epochs", false)
			if res.EpochsErr == nil {
				res.End, res.EndErr = l.localEnd(ctx, r.Partition)
			}
		case leadcore.ReadEnd:
			res.End, res.EndErr = l.localEnd(ctx, r.Partition)
		case leadcore.ReadBatches:
			// Bounded as a PUT is: a log that stops answering must fail
			// the republish, which reports it, not hold it for good.
			var batches []storage.Batch
			err := l.local(ctx, r.Partition, "walstore: reading the local log to republish", "LocalLog.Read", func(ctx context.Context) (err error) {
				batches, err = l.cfg.Local.Read(ctx, r.Partition, r.From, r.MaxBytes)
				return err
			})
			res.ReadErr = err
			if err == nil { // a call given up on may still set batches
				res.Batches = batches
			}
		}
		if ctx.Err() != nil {
			return
		}
		l.step(func(c *leadcore.Core, now time.Time) { c.Read(now, r.ID, r.What, res) })
	})
}

// local makes call dep of tp's log, fn, for the engine's background work:
// bounded by RequestTimeout however the log treats its context, and
// refused at once while an earlier call of tp that was given up on has
// not returned (see localCalls), so a log that hangs costs one goroutine
// per partition. what says what the call is for, in its error.
func (l *leaderEngine) local(ctx context.Context, tp metadata.TopicPartition, what, dep string, fn func(ctx context.Context) error) error {
	return attempt(ctx, l.cfg.RequestTimeout, what, dep, func(ctx context.Context) error {
		return l.locals.do(ctx, tp, dep, fn)
	})
}

// localHeld is local for a caller that holds tp already.
func (l *leaderEngine) localHeld(ctx context.Context, tp metadata.TopicPartition, what, dep string, fn func(ctx context.Context) error) error {
	return attempt(ctx, l.cfg.RequestTimeout, what, dep, func(ctx context.Context) error {
		return l.locals.call(ctx, tp, dep, fn)
	})
}

// epochs reads tp's epoch entries for the engine's background work (see
// local); held says the caller holds tp.
func (l *leaderEngine) epochs(ctx context.Context, tp metadata.TopicPartition, what string, held bool) ([]storage.EpochEntry, error) {
	local := l.local
	if held {
		local = l.localHeld
	}
	var epochs []storage.EpochEntry // set by the call, read only if it returned
	err := local(ctx, tp, what, "LocalLog.Epochs", func(context.Context) (err error) {
		epochs, err = l.cfg.Local.Epochs(tp)
		return err
	})
	if err != nil {
		return nil, err
	}
	return epochs, nil
}

// localEnd reads tp's log end for the engine's background work (see
// local).
func (l *leaderEngine) localEnd(ctx context.Context, tp metadata.TopicPartition) (int64, error) {
	var end int64 // set by the call, read only if it returned
	err := l.local(ctx, tp, "walstore: reading the local log's end offset", "LocalLog.EndOffset", func(context.Context) (err error) {
		end, err = l.cfg.Local.EndOffset(tp)
		return err
	})
	if err != nil {
		return 0, err
	}
	return end, nil
}

func (l *leaderEngine) startDelete(d leadcore.Delete) {
	l.spawnLocked(d.ID, func(ctx context.Context, _ *opCtl) {
		err := l.mgr.Delete(ctx, d.Refs)
		if err != nil {
			err = &DependencyError{Dependency: "ObjectStore.Delete", Err: err}
			if d.Call == 0 { // a call's error says what it was for
				err = fmt.Errorf("walstore: collecting garbage: %w", err)
			}
		}
		if ctx.Err() != nil {
			return
		}
		l.step(func(c *leadcore.Core, now time.Time) { c.Deleted(now, d.ID, err) })
	})
}

// report calls OnHealth, outside the engine's lock, if the health it last
// reported is no longer the current one. Reports are made one at a time
// and always of the current health, so that two goroutines that saw the
// health change never deliver their news out of order: the last report
// is always the engine's health.
func (l *leaderEngine) report() {
	l.reportMu.Lock()
	defer l.reportMu.Unlock()
	l.mu.Lock()
	h := l.healthLocked(nil)
	changed := !sameHealth(h, l.reported)
	l.reported = h
	l.mu.Unlock()
	if changed && l.onHealth != nil {
		l.onHealth(h)
	}
}

// BecomeLeader is Node.BecomeLeader of the leader side: it validates its
// arguments before it reads the log end, and a refusal changes nothing.
func (l *leaderEngine) BecomeLeader(ctx context.Context, tp metadata.TopicPartition, epoch int32, followers []int32, republishFrom int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("walstore: BecomeLeader %s: %w", tp, err)
	}
	if err := l.checkLeader(tp, epoch, followers); err != nil {
		return fmt.Errorf("walstore: BecomeLeader %s: %w", tp, err)
	}
	if err := l.locals.hold(ctx, tp, "LocalLog.EndOffset"); err != nil {
		return fmt.Errorf("walstore: BecomeLeader %s: %w", tp, err)
	}
	defer l.locals.release(tp)
	leo, err := l.endOffset(ctx, tp)
	if err == nil {
		err = l.begin(tp, epoch, followers, republishFrom, leo, digest.Chain{})
	}
	if err != nil {
		return fmt.Errorf("walstore: BecomeLeader %s: %w", tp, err)
	}
	return nil
}

// checkLeader validates BecomeLeader's arguments, before anything is
// read or changed for it.
func (l *leaderEngine) checkLeader(tp metadata.TopicPartition, epoch int32, followers []int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return ErrStopped
	}
	_, err := l.core.CheckLeader(tp, epoch, followers)
	return refusal(err)
}

// endOffset reads tp's log end for a leadership to begin at, as long as
// ctx allows; the caller holds tp's local-log calls.
func (l *leaderEngine) endOffset(ctx context.Context, tp metadata.TopicPartition) (int64, error) {
	var leo int64 // set by the call, read only if it returned
	err := l.locals.call(ctx, tp, "LocalLog.EndOffset", func(context.Context) (err error) {
		leo, err = l.cfg.Local.EndOffset(tp)
		return err
	})
	if err != nil {
		return 0, err
	}
	return leo, nil
}

// begin makes the engine tp's leader, its log ending at leo, or changes
// nothing and returns why not.
func (l *leaderEngine) begin(tp metadata.TopicPartition, epoch int32, followers []int32, republishFrom, leo int64, chain digest.Chain) error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return ErrStopped
	}
	err := l.core.BecomeLeader(l.cfg.Clock.Now(), tp, epoch, followers, republishFrom, leo, chain)
	changed := l.takeLocked()
	l.mu.Unlock()
	if changed {
		l.report()
	}
	return refusal(err)
}

// isStopped reports whether Run has returned, or is returning.
func (l *leaderEngine) isStopped() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped
}

// Resign ends this engine's leadership of tp. Data of tp not yet published
// is withheld from publication, and WaitDurable calls waiting for it
// return an error matching ErrNotLeader. Resigning a partition the engine
// does not lead does nothing.
func (l *leaderEngine) Resign(tp metadata.TopicPartition) {
	l.step(func(c *leadcore.Core, now time.Time) { c.Resign(now, tp) })
}

// Append is Node.Append of the leader side.
func (l *leaderEngine) Append(ctx context.Context, tp metadata.TopicPartition, b storage.Batch) error {
	var waitedIn uint64 // the leadership a blocked Append waits in
	for {
		l.mu.Lock()
		if l.stopped {
			l.mu.Unlock()
			return ErrStopped
		}
		gen, _, _, _ := l.core.Leadership(tp)
		if waitedIn != 0 && gen != waitedIn {
			l.mu.Unlock()
			return fmt.Errorf("walstore: append to %s: the leadership ended while it waited for buffer space: %w", tp, ErrNotLeader)
		}
		err := l.core.Append(l.cfg.Clock.Now(), tp, b)
		changed := false
		var space, ended <-chan struct{}
		if err == nil {
			changed = l.takeLocked()
		} else if leadcore.CodeOf(err) == leadcore.BufferFull && l.cfg.Overflow != Reject {
			// A leadership that ends broadcasts durable, and may free no
			// space: the buffer may hold other partitions' data, or this
			// one's that cannot be uploaded.
			space, ended, waitedIn = l.space.wait(), l.durable.wait(), gen
		}
		l.mu.Unlock()
		if changed {
			l.report()
		}
		if err == nil {
			return nil
		}
		if space == nil {
			if leadcore.CodeOf(err) == leadcore.NotLeader {
				// Checked only here, off the path of accepted appends: a
				// partition never led may be one that cannot be.
				if verr := tp.Validate(); verr != nil {
					return fmt.Errorf("walstore: append to %s: %w: %w", tp, ErrNotLeader, verr)
				}
			}
			return fmt.Errorf("walstore: append to %s: %w", tp, refusal(err))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("walstore: append to %s: waiting for buffer space: %w", tp, ctx.Err())
		case <-space:
		case <-ended:
		}
	}
}

// refusal is err, a refusal of the core, as the typed error it means.
func refusal(err error) error {
	switch leadcore.CodeOf(err) {
	case leadcore.NotLeader:
		return ErrNotLeader
	case leadcore.InvalidBatch:
		return fmt.Errorf("%w: %w", storage.ErrInvalidBatch, err)
	case leadcore.BufferFull, leadcore.TooLarge:
		return fmt.Errorf("%w: %w", ErrBufferFull, err)
	case leadcore.StaleEpoch:
		return fmt.Errorf("%w: %w", ErrStaleEpoch, err)
	}
	return err
}

// DurableOffset is Node.DurableOffset of the leader side.
func (l *leaderEngine) DurableOffset(tp metadata.TopicPartition) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, durable, _, _ := l.core.Leadership(tp)
	return durable
}

// WaitDurable is Node.WaitDurable of the leader side.
func (l *leaderEngine) WaitDurable(ctx context.Context, tp metadata.TopicPartition, epoch int32, offset int64) error {
	return l.waitFor(ctx, tp, epoch, offset, "durable", func(c *leadcore.Core) (int64, error) {
		_, durable, failed, _ := c.Leadership(tp)
		return durable, failed
	}, &l.durable)
}

// waitFor blocks until reached, read under mu, is past offset in the
// leadership of tp that accepts appends at epoch, waking on sig. It fails
// with ErrNotLeader if that leadership is not the current one, or ends,
// and with reached's error when the offset can never be reached.
//
// While it waits on records not yet cut, the core knows (leadcore's Wait),
// so that NodeConfig.WaitCutDelay bounds their cut; it asks again at each
// wake-up while the core had nothing to cut for it (the offset was not
// appended yet), and forgets the wait when the call returns.
func (l *leaderEngine) waitFor(ctx context.Context, tp metadata.TopicPartition, epoch int32, offset int64, what string, reached func(*leadcore.Core) (int64, error), sig *signal) error {
	var gen, wait uint64
	defer func() {
		if wait != 0 {
			l.step(func(c *leadcore.Core, now time.Time) { c.Unwait(now, wait) })
		}
	}()
	for {
		l.mu.Lock()
		g, ok := l.core.Accepted(tp, epoch)
		at, failed := reached(l.core)
		stopped, ch := l.stopped, sig.wait()
		changed := false
		if ok && !stopped && at <= offset && failed == nil && wait == 0 && l.cfg.WaitCutDelay > 0 && !l.released {
			wait = l.core.Wait(l.cfg.Clock.Now(), tp, offset)
			changed = l.takeLocked()
		}
		l.mu.Unlock()
		if changed {
			l.report()
		}
		switch {
		case stopped:
			return ErrStopped
		case !ok || gen != 0 && g != gen:
			return fmt.Errorf("walstore: waiting for %s offset %d of epoch %d to be %s: %w", tp, offset, epoch, what, ErrNotLeader)
		case at > offset:
			return nil
		case failed != nil:
			return fmt.Errorf("walstore: waiting for %s offset %d of epoch %d to be %s: %w", tp, offset, epoch, what, failed)
		}
		gen = g
		select {
		case <-ctx.Done():
			return fmt.Errorf("walstore: waiting for %s offset %d of epoch %d to be %s: %w", tp, offset, epoch, what, ctx.Err())
		case <-ch:
		}
	}
}

// forgetFailure drops tp's failure, for a leadership that ends once Run
// has returned (the core's own news is no longer taken), and reports the
// change.
func (l *leaderEngine) forgetFailure(tp metadata.TopicPartition) {
	l.mu.Lock()
	changed := l.failing.update(tp, time.Time{}, nil)
	l.mu.Unlock()
	if changed {
		l.report()
	}
}

// Health returns the engine's health: whether it is degraded, and the
// led partitions whose replication a failure has stopped.
func (l *leaderEngine) Health() Health {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.healthLocked(nil)
}

// healthExcept is Health but for the partitions in except (see
// failing.list).
func (l *leaderEngine) healthExcept(except map[metadata.TopicPartition]bool) Health {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.healthLocked(except)
}

// healthLocked is the engine's health, but for the partitions in except;
// l.mu held.
func (l *leaderEngine) healthLocked(except map[metadata.TopicPartition]bool) Health {
	h := l.core.Health()
	parts, n := l.failing.list(except)
	return Health{Degraded: h.Degraded, Since: h.Since, Err: h.Err, Partitions: parts, FailingPartitions: n}
}

// PartitionError returns why the engine's leadership of tp does not
// replicate it, a *PartitionError, or nil if it does (or the engine does
// not lead tp).
func (l *leaderEngine) PartitionError(tp metadata.TopicPartition) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.failing.get(tp); e != nil {
		return e
	}
	return nil
}

// snapshot returns the engine's counters; see Stats.
func (l *leaderEngine) snapshot() LeaderStats {
	l.mu.Lock()
	s, h := l.core.Stats(), l.healthLocked(nil)
	l.mu.Unlock()
	return LeaderStats{
		Appends: s.Appends, AppendedBytes: s.AppendedBytes, BufferedBytes: s.BufferedBytes,
		Objects: s.Objects, ObjectBytes: s.ObjectBytes, UploadsInFlight: s.UploadsInFlight,
		UploadRetries: s.UploadRetries, PublishRetries: s.PublishRetries,
		UploadHedges: s.UploadHedges, UploadHedgeWins: s.UploadHedgeWins, UploadHedgesDenied: s.UploadHedgesDenied,
		Fenced: s.Fenced, Republished: s.Republished, ObjectsDeleted: s.ObjectsDeleted,
		UploadLatency: l.uploadLat.snapshot(), PublishLatency: l.publishLat.snapshot(),
		Health: h,
	}
}

// Run drives the engine: it cuts objects when they are due, uploads them,
// publishes their entries, publishes new leaderships' markers and
// republishes, refreshes epoch markers and collects garbage. It returns
// when ctx ends, after its goroutines have stopped, and releases the
// engine's resources. Data not yet uploaded is dropped from the engine but
// remains in the broker's log. A ctx already ended stops the engine at
// once. Call it once: a second call, while the
// first runs or after it returned, returns at once an error wrapping
// ErrStopped and changes nothing.
func (l *leaderEngine) Run(ctx context.Context) error {
	if !l.ran.CompareAndSwap(false, true) {
		return fmt.Errorf("walstore: leader: Run called twice: %w", ErrStopped)
	}
	// A Run whose ctx has already ended starts nothing: the calls queued
	// for it end with ErrStopped rather than with deletes it cannot make.
	if ctx.Err() != nil {
		l.stop()
		return nil
	}
	l.mu.Lock()
	l.running, l.ctx = true, ctx
	now := l.cfg.Clock.Now()
	l.core.Start(now)
	for _, q := range l.queued {
		q.event(l.core, now, q.id)
	}
	l.queued = nil
	changed := l.takeLocked()
	l.mu.Unlock()
	if changed {
		l.report()
	}
	for {
		l.mu.Lock()
		at := l.wakeAt
		l.mu.Unlock()
		var timer <-chan time.Time
		if !at.IsZero() {
			timer = l.cfg.Clock.After(max(at.Sub(l.cfg.Clock.Now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			l.stop()
			return nil
		case <-l.wake:
		case <-timer:
			l.step(func(c *leadcore.Core, now time.Time) { c.Tick(now) })
		}
	}
}

// stop waits for Run's goroutines, wakes every caller waiting to find the
// engine stopped, and releases its resources.
func (l *leaderEngine) stop() {
	l.mu.Lock()
	l.running, l.stopped = false, true
	l.mu.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	l.space.broadcast()
	l.durable.broadcast()
	l.commit.broadcast()
	close(l.done)
	l.released = true
	l.release() // under mu: a call after Run (StopReplica's Resign) must not meet a core being closed
	l.mu.Unlock()
}

// release frees the encoders and builders.
func (l *leaderEngine) release() {
	l.mgr.Close()
	l.core.Close()
}

// Republish is Node.Republish of the leader side.
func (l *leaderEngine) Republish(ctx context.Context, tp metadata.TopicPartition, from int64) error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return ErrStopped
	}
	id, err := l.core.Republish(l.cfg.Clock.Now(), tp, from)
	if err != nil {
		l.mu.Unlock()
		return fmt.Errorf("walstore: republish %s: %w", tp, refusal(err))
	}
	ch := make(chan error, 1)
	l.calls[id] = ch
	changed, done := l.takeLocked(), l.done
	l.mu.Unlock()
	if changed {
		l.report()
	}
	select {
	case err := <-ch:
		if err != nil {
			return fmt.Errorf("walstore: %w", refusal(err))
		}
		return nil
	case <-ctx.Done():
		l.step(func(c *leadcore.Core, _ time.Time) { c.CancelTask(id) })
		l.mu.Lock()
		delete(l.calls, id)
		l.mu.Unlock()
		return fmt.Errorf("walstore: republish %s: %w", tp, ctx.Err())
	case <-done:
		return ErrStopped
	}
}

// attempt runs one attempt of a call of dependency dep (see
// dependencyOf) with RequestTimeout. An attempt that runs out while ctx is
// live fails with a DependencyError for dep matching storage.ErrUnavailable.
func attempt(ctx context.Context, timeout time.Duration, what, dep string, fn func(context.Context) error) error {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := fn(actx)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		var de *DependencyError
		if errors.As(err, &de) && de.Dependency == dep {
			err = de.Err // named once
			if na, ok := err.(*noAnswerError); ok && !na.within && na.err != nil {
				// A local-log call given up on when actx ended: the bound
				// says as much, whether or not the call had returned.
				err = na.err
			}
		}
		err = fmt.Errorf("%s: %w", what, &DependencyError{Dependency: dep, Err: &noAnswerError{d: timeout, within: true, err: err}})
	}
	return err
}

// dependencyOf names the call that an operation of the leader core's kind
// what makes, for its errors.
func dependencyOf(what string) string {
	if what == leadcore.WhatPublish {
		return "metadata.Log.Append"
	}
	return "ObjectStore.Put" // an upload, a republished copy, a hedge of either
}
