package walstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
)

// FollowerConfig configures a Follower. Zero durations and sizes mean the
// documented default; negative ones are rejected.
type FollowerConfig struct {
	// BrokerID is this broker's id; it reads metadata partition
	// BrokerID % Log.Partitions(). Must be >= 0.
	BrokerID int32
	// Store reads the objects entries name. Required.
	Store ObjectStore
	// Log carries the metadata. Required.
	Log metadata.Log
	// Local is the broker's log, appended to and truncated. Required.
	Local LocalLog
	// FetchConcurrency bounds concurrent GETs. Default 8.
	FetchConcurrency int
	// HedgeAfter is how long a fetch may go unanswered before its bucket
	// is treated as backing off: entries it holds may then be fetched from
	// copies in other buckets (a republishing leader's), rather than wait
	// for a request to an unreachable AZ to time out. Default 1s.
	HedgeAfter time.Duration
	// FetchTimeout bounds one round of GETs to one bucket. Default 30s.
	FetchTimeout time.Duration
	// LocalTimeout bounds each LocalLog call that takes a context
	// (Append, Truncate, Read): the engine appends on one goroutine, so a
	// partition whose log stops answering would otherwise hold up every
	// other. One that runs out counts as a failure of that partition's
	// log, which rests. Default 30s.
	LocalTimeout time.Duration
	// CoalesceGap: see ManagerConfig.CoalesceGap.
	CoalesceGap int64
	// Readahead is how many entries per partition are fetched ahead of the
	// one being applied. Default 16.
	Readahead int
	// ReadBatch is how many metadata records one read asks for. Default 256.
	ReadBatch int
	// MaxHeld bounds the entries held in memory waiting for a gap to
	// fill or a marker to arrive. Past it, the entries furthest ahead of
	// their partition's log end are forgotten, and the retained metadata
	// is read again once the follower has nothing else to do. Default
	// 100,000 (tens of MB).
	MaxHeld int
	// PollInterval is the pause after a metadata read that found nothing
	// and did not wait itself. Default 10ms.
	PollInterval time.Duration
	// Backoff paces retries of failed fetches and metadata reads.
	Backoff Backoff
	// OnApplied, if set, is called after each append with the partition's
	// progress, for the broker to deliver to the leader's RecordProgress,
	// whose garbage collector waits for it. It is called on the engine's
	// goroutine and must not block.
	OnApplied func(Progress)
	// Clock and Seed make runs reproducible. Default: the wall clock, seed 0.
	Clock Clock
	Seed  uint64
	// Logger receives the engine's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c *FollowerConfig) validate() error {
	switch {
	case c.BrokerID < 0:
		return fmt.Errorf("walstore: FollowerConfig.BrokerID %d is negative", c.BrokerID)
	case c.Store == nil:
		return errors.New("walstore: FollowerConfig.Store is required")
	case c.Log == nil:
		return errors.New("walstore: FollowerConfig.Log is required")
	case c.Local == nil:
		return errors.New("walstore: FollowerConfig.Local is required")
	case c.Log.Partitions() <= 0:
		return fmt.Errorf("walstore: FollowerConfig.Log: %w", &DependencyError{Dependency: "metadata.Log.Partitions",
			Err: fmt.Errorf("%w: %d partitions", ErrContractViolation, c.Log.Partitions())})
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"FetchConcurrency", int64(c.FetchConcurrency)}, {"Readahead", int64(c.Readahead)},
		{"ReadBatch", int64(c.ReadBatch)}, {"PollInterval", int64(c.PollInterval)},
		{"MaxHeld", int64(c.MaxHeld)}, {"HedgeAfter", int64(c.HedgeAfter)},
		{"FetchTimeout", int64(c.FetchTimeout)}, {"LocalTimeout", int64(c.LocalTimeout)},
		{"Backoff.Initial", int64(c.Backoff.Initial)}, {"Backoff.Max", int64(c.Backoff.Max)},
	} {
		if f.v < 0 {
			return fmt.Errorf("walstore: FollowerConfig.%s %d is negative", f.name, f.v)
		}
	}
	c.FetchConcurrency = orDefault(c.FetchConcurrency, 8)
	c.Readahead = orDefault(c.Readahead, 16)
	c.ReadBatch = orDefault(c.ReadBatch, 256)
	c.MaxHeld = orDefault(c.MaxHeld, 100_000)
	c.HedgeAfter = orDefault(c.HedgeAfter, time.Second)
	c.FetchTimeout = orDefault(c.FetchTimeout, 30*time.Second)
	c.LocalTimeout = orDefault(c.LocalTimeout, 30*time.Second)
	c.PollInterval = orDefault(c.PollInterval, 10*time.Millisecond)
	c.Backoff = c.Backoff.withDefaults()
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Follower is the follower-side engine. It reads this broker's metadata
// partition, keeps each followed partition's epoch lineage, decides with
// package fencing what to do with every entry, fetches the sections it
// needs (coalesced, in parallel, verified), and appends them to the local
// log in offset order. Create it with NewFollower and drive it with Run.
type Follower struct {
	cfg    FollowerConfig
	mgr    *Manager
	jitter *jitter

	// roleMu guards roles, and is held by the Run goroutine while it
	// handles anything, so that once Follow or Unfollow returns, the engine
	// acts on the new role and no append made under the old one is in
	// flight.
	roleMu  roleLock
	roles   map[metadata.TopicPartition]role
	wake    chan struct{}
	stopped bool        // Run has returned
	ran     atomic.Bool // Run was called

	// Owned by the Run goroutine, under roleMu.
	parts         map[metadata.TopicPartition]*fpart
	broken        map[metadata.TopicPartition]time.Time // partitions whose local log failed, until when they rest
	rewind        chan struct{}                         // asks readMetadata to start again from the low watermark
	bucketBackoff map[string]time.Time
	rounds        map[*fetchRound]bool // fetch rounds in flight
	retryAt       time.Time            // earliest time an entry passed over for its backoff may be fetched
	evicted       bool                 // held entries were forgotten; re-read metadata when idle
	lastRewind    time.Time            // when evictions last made the follower re-read

	mu                 sync.Mutex // guards stats and lag for Stats()
	stats              followerCounters
	lag                map[metadata.TopicPartition]int64
	fetchLat, applyLat histogram
}

// role is what the broker told the engine of a partition it follows: the
// leader epoch it knows and the leader at that epoch.
type role struct {
	epoch  int32
	leader int32
}

type followerCounters struct {
	messages, poisoned             uint64
	forged, localErrors            uint64
	entries, applied, appliedBytes uint64
	skipped, dropped, truncations  uint64
	evicted                        uint64
	fetchErrors, corrupt, notFound uint64
	held                           int
}

// fpart is the follower's state for one partition.
type fpart struct {
	tp      metadata.TopicPartition
	leo     int64
	local   fencing.Lineage       // epochs of the local log
	leader  fencing.LeaderLineage // epochs learned from markers
	pending map[pendingKey]*pendingEntry
	maxSeen int64 // highest offset any entry announced
	// known is the leader epoch the broker knows; waiting holds marker
	// publications of later epochs until it does, newest last.
	known   int32
	waiting [][]metadata.EpochStart
	gapLog  time.Time // when a gap at the log end was last reported
}

// maxWaiting bounds the marker publications a partition keeps while its
// broker has not learned their epoch; the leader republishes its markers
// periodically, so dropping the oldest loses nothing for good.
const maxWaiting = 8

// pendingKey identifies an entry by where its bytes are, so the same
// section announced twice is held once.
type pendingKey struct {
	object   metadata.ObjectRef
	position int64
}

type pendingEntry struct {
	e         metadata.Entry
	fetching  bool
	batches   []combiner.Batch // set once fetched and verified
	attempts  int
	notBefore time.Time
}

// fetchRound is one Manager.Fetch of entries in one bucket.
type fetchRound struct {
	bucket string
	start  time.Time
}

type fetchDone struct {
	round   *fetchRound
	results []FetchResult
	err     error
}

// NewFollower validates cfg and returns a Follower. Nothing runs until Run.
func NewFollower(cfg FollowerConfig) (*Follower, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	mgr, err := NewManager(ManagerConfig{
		Store: cfg.Store, BrokerID: cfg.BrokerID, FetchConcurrency: cfg.FetchConcurrency,
		CoalesceGap: cfg.CoalesceGap, Seed: cfg.Seed, Clock: cfg.Clock, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Follower{
		cfg:           cfg,
		mgr:           mgr,
		jitter:        newJitter(cfg.Seed ^ 0xf0110e),
		parts:         make(map[metadata.TopicPartition]*fpart),
		roleMu:        make(roleLock, 1),
		roles:         make(map[metadata.TopicPartition]role),
		broken:        make(map[metadata.TopicPartition]time.Time),
		wake:          make(chan struct{}, 1),
		bucketBackoff: make(map[string]time.Time),
		rounds:        make(map[*fetchRound]bool),
		rewind:        make(chan struct{}, 1),
		lag:           make(map[metadata.TopicPartition]int64),
	}, nil
}

// Follow makes the engine follow tp, whose leader at epoch is broker
// leader, as the broker learned from its controller, and returns once the
// engine acts on it. A partition not followed before starts afresh from
// the local log (and the retained metadata is read again for it); a later
// epoch of a followed partition lets the engine act on the epoch-start
// markers of that epoch, which it holds back until the broker knows of it
// (a marker of an epoch the broker has not heard of may be forged, and
// acting on it could truncate the log). An epoch below the one the engine
// has is an error; the same epoch again changes nothing.
func (f *Follower) Follow(ctx context.Context, tp metadata.TopicPartition, epoch, leader int32) error {
	switch err := tp.Validate(); {
	case err != nil:
		return fmt.Errorf("walstore: Follow: %w", err)
	case epoch < 0:
		return fmt.Errorf("walstore: Follow %s: negative epoch %d", tp, epoch)
	case leader < 0 || leader == f.cfg.BrokerID:
		return fmt.Errorf("walstore: Follow %s: leader %d is not another broker", tp, leader)
	}
	if err := f.lockRoles(ctx); err != nil {
		return fmt.Errorf("walstore: Follow %s: %w", tp, err)
	}
	defer f.roleMu.unlock()
	if f.stopped {
		return fmt.Errorf("walstore: Follow %s: %w", tp, ErrStopped)
	}
	r, ok := f.roles[tp]
	if ok && epoch < r.epoch {
		return fmt.Errorf("walstore: Follow %s: epoch %d is below the epoch %d the engine has", tp, epoch, r.epoch)
	}
	f.roles[tp] = role{epoch: epoch, leader: leader}
	if !ok {
		f.forgetLocked(tp)
		notify(f.rewind)
	}
	notify(f.wake)
	return nil
}

// Unfollow makes the engine stop following tp and returns once no append
// to tp is in flight and none will be made. Following tp again later
// starts afresh from the local log.
func (f *Follower) Unfollow(ctx context.Context, tp metadata.TopicPartition) error {
	if err := f.lockRoles(ctx); err != nil {
		return fmt.Errorf("walstore: Unfollow %s: %w", tp, err)
	}
	defer f.roleMu.unlock()
	delete(f.roles, tp)
	f.forgetLocked(tp)
	return nil
}

// lockRoles takes roleMu, or gives up when ctx ends: the Run goroutine
// holds it while it appends, and a local log may be slow.
func (f *Follower) lockRoles(ctx context.Context) error { return f.roleMu.lockContext(ctx) }

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

// forgetLocked drops the engine's state of tp.
func (f *Follower) forgetLocked(tp metadata.TopicPartition) {
	delete(f.parts, tp)
	delete(f.broken, tp)
	f.mu.Lock()
	delete(f.lag, tp)
	f.mu.Unlock()
}

// Run replicates until ctx ends, then waits for its goroutines and returns
// nil. Unreachable buckets, missing or corrupt objects, metadata-log errors
// and a failing local log are retried or waited out, never fatal: a
// partition whose local log fails rests for a backoff and starts again
// from what the log says, without holding up the others.
func (f *Follower) Run(ctx context.Context) error {
	if !f.ran.CompareAndSwap(false, true) {
		return fmt.Errorf("walstore: follower: Run called twice: %w", ErrStopped)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	msgs := make(chan []metadata.Message, 4)
	results := make(chan fetchDone, f.cfg.FetchConcurrency)
	defer func() {
		cancel()
		wg.Wait()
		f.roleMu.lock()
		f.stopped = true
		f.roleMu.unlock()
		f.mgr.Close()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.readMetadata(ctx, msgs)
	}()
	for {
		var wake <-chan time.Time
		f.locked(func() {
			if d, ok := f.nextRetry(); ok {
				wake = f.cfg.Clock.After(max(d, time.Millisecond))
			}
		})
		var event func()
		select {
		case <-ctx.Done():
			return nil
		case batch := <-msgs:
			event = func() {
				for i := range batch {
					f.handleMessage(ctx, &batch[i])
				}
			}
		case done := <-results:
			event = func() {
				delete(f.rounds, done.round)
				f.handleFetch(done)
			}
		case <-f.wake:
		case <-wake:
		}
		f.locked(func() {
			if event != nil {
				event()
			}
			f.step(ctx, &wg, results)
		})
	}
}

// locked runs fn holding roleMu, and releases it however fn ends: a local
// log that panics must crash the process, not leave Run's cleanup waiting
// for a lock its own goroutine holds.
func (f *Follower) locked(fn func()) {
	f.roleMu.lock()
	defer f.roleMu.unlock()
	fn()
}

// readMetadata reads this broker's metadata partition from its low
// watermark and hands decoded messages to Run. A follower that restarts
// reads the retained metadata again; what it already applied is skipped.
func (f *Follower) readMetadata(ctx context.Context, out chan<- []metadata.Message) {
	// Partitions is fixed for the log's life and checked at construction.
	p := f.cfg.BrokerID % f.cfg.Log.Partitions()
	cursor := int64(-1)
	for attempt := 0; ctx.Err() == nil; {
		select {
		case <-f.rewind:
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
			f.cfg.Logger.Warn("activetier: metadata trimmed past the follower's cursor; resuming at the low watermark", "cursor", cursor)
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
		msgs := make([]metadata.Message, 0, len(recs))
		for _, r := range recs {
			m, err := metadata.DecodeMessage(r.Value)
			if err != nil {
				// A poisoned message cannot be trusted for anything; the
				// data it named is reached through republished entries.
				f.cfg.Logger.Error("activetier: skipping undecodable metadata message", "partition", p, "offset", r.Offset, "err", err)
				f.mu.Lock()
				f.stats.poisoned++
				f.mu.Unlock()
				continue
			}
			msgs = append(msgs, *m)
		}
		cursor = recs[len(recs)-1].Offset + 1
		select {
		case out <- msgs:
		case <-ctx.Done():
			return
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
func (f *Follower) pause(ctx context.Context, attempt *int, what string, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	f.cfg.Logger.Warn("activetier: "+what+" failed; retrying", "err", err)
	d := f.jitter.delay(f.cfg.Backoff, *attempt)
	*attempt++
	return sleep(ctx, f.cfg.Clock, d) == nil
}

// part returns tp's state if the engine follows tp, loading the local
// log's end offset and epochs the first time. The leader lineage starts as
// the local one: epochs the local log holds were validated against a
// leader lineage when applied. It returns nil for a partition not followed
// or resting after its local log failed.
func (f *Follower) part(ctx context.Context, tp metadata.TopicPartition) *fpart {
	if p, ok := f.parts[tp]; ok {
		return p
	}
	r, ok := f.roles[tp]
	if !ok {
		return nil
	}
	_, resting := f.broken[tp]
	if resting {
		if f.cfg.Clock.Now().Before(f.broken[tp]) {
			return nil
		}
		delete(f.broken, tp)
	}
	p, err := f.load(ctx, tp)
	if err != nil {
		f.localFailed(tp, err)
		return nil
	}
	p.known = r.epoch
	f.parts[tp] = p
	if resting {
		// The markers and entries read while it rested were not kept:
		// read the retained metadata again, as for a partition newly
		// followed.
		notify(f.rewind)
	}
	return p
}

func (f *Follower) load(ctx context.Context, tp metadata.TopicPartition) (*fpart, error) {
	leo, err := f.cfg.Local.EndOffset(tp)
	if err != nil {
		return nil, &DependencyError{Dependency: "LocalLog.EndOffset", Err: err}
	}
	if leo < 0 {
		return nil, &DependencyError{Dependency: "LocalLog.EndOffset", Err: fmt.Errorf("%w: negative end offset %d", ErrContractViolation, leo)}
	}
	epochs, err := f.cfg.Local.Epochs(tp)
	if err != nil {
		return nil, &DependencyError{Dependency: "LocalLog.Epochs", Err: err}
	}
	if n := len(epochs); n > 0 && epochs[n-1].StartOffset == leo {
		// An epoch with no records: the broker led it and wrote nothing
		// (or its records were truncated). As a follower the broker no
		// longer writes it, and kept, it would make every entry of an
		// earlier epoch wait for good (the local log looks ahead of it).
		// Kafka's follower truncation drops it too.
		if err := f.truncateLocal(ctx, tp, leo); err != nil {
			return nil, err
		}
		if epochs, err = f.cfg.Local.Epochs(tp); err != nil {
			return nil, &DependencyError{Dependency: "LocalLog.Epochs", Err: err}
		}
	}
	p := &fpart{tp: tp, leo: leo, pending: make(map[pendingKey]*pendingEntry), maxSeen: leo - 1}
	markers := make([]metadata.EpochStart, 0, len(epochs))
	for i, e := range epochs {
		if e.StartOffset > leo || i > 0 && (e.Epoch <= epochs[i-1].Epoch || e.StartOffset < epochs[i-1].StartOffset) {
			return nil, &DependencyError{Dependency: "LocalLog.Epochs", Err: fmt.Errorf("%w: %v is not an ascending lineage within the log end %d", ErrContractViolation, epochs, leo)}
		}
		if err := p.local.Assign(e.Epoch, e.StartOffset); err != nil {
			return nil, &DependencyError{Dependency: "LocalLog.Epochs", Err: fmt.Errorf("%w: %w", ErrContractViolation, err)}
		}
		markers = append(markers, metadata.EpochStart{Partition: tp, Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	if err := p.leader.Merge(markers...); err != nil {
		return nil, &DependencyError{Dependency: "LocalLog.Epochs", Err: fmt.Errorf("%w: %w", ErrContractViolation, err)}
	}
	return p, nil
}

// localFailed takes tp out of replication for a backoff after its local
// log failed, logging why; it starts again from what the log then says.
func (f *Follower) localFailed(tp metadata.TopicPartition, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	f.cfg.Logger.Error("activetier: the local log failed; the partition rests and starts again", "partition", tp.String(), "err", err)
	delete(f.parts, tp)
	f.broken[tp] = f.cfg.Clock.Now().Add(f.cfg.Backoff.Max)
	f.wakeAt(f.broken[tp])
	f.count(func(c *followerCounters) { c.localErrors++ })
}

func (f *Follower) handleMessage(ctx context.Context, m *metadata.Message) {
	f.mu.Lock()
	f.stats.messages++
	f.mu.Unlock()
	// The markers one message carries for a partition are one leader's
	// lineage, merged as one publication.
	pubs := make(map[metadata.TopicPartition][]metadata.EpochStart)
	var order []metadata.TopicPartition
	for _, mk := range m.Markers {
		if _, ok := f.roles[mk.Partition]; !ok {
			continue
		}
		if _, ok := pubs[mk.Partition]; !ok {
			order = append(order, mk.Partition)
		}
		pubs[mk.Partition] = append(pubs[mk.Partition], mk)
	}
	for _, tp := range order {
		if p := f.part(ctx, tp); p != nil {
			f.mergeMarkers(ctx, p, pubs[tp])
		}
	}
	for _, e := range m.Entries {
		r, ok := f.roles[e.Partition]
		if !ok {
			continue
		}
		if e.PublisherEpoch == r.epoch && e.WriterBrokerID != r.leader {
			f.cfg.Logger.Warn("activetier: dropping an entry published at the current epoch by a broker that is not its leader",
				"partition", e.Partition.String(), "epoch", e.PublisherEpoch, "writer", e.WriterBrokerID, "leader", r.leader)
			f.count(func(c *followerCounters) { c.forged++ })
			continue
		}
		p := f.part(ctx, e.Partition)
		if p == nil {
			continue
		}
		k := pendingKey{object: e.Object, position: e.Position}
		if _, dup := p.pending[k]; dup {
			continue
		}
		p.pending[k] = &pendingEntry{e: e}
		p.maxSeen = max(p.maxSeen, e.LastOffset)
		f.mu.Lock()
		f.stats.entries++
		f.mu.Unlock()
	}
}

// mergeMarkers merges one publication of p's markers, or keeps it waiting
// if its latest epoch is later than the broker knows. A publication whose
// latest epoch is the known one must come from that epoch's leader.
func (f *Follower) mergeMarkers(ctx context.Context, p *fpart, pub []metadata.EpochStart) {
	top, writer := pub[0].Epoch, pub[0].LeaderBrokerID
	for _, mk := range pub {
		if mk.Epoch > top {
			top, writer = mk.Epoch, mk.LeaderBrokerID
		}
	}
	switch r := f.roles[p.tp]; {
	case top > p.known:
		if len(p.waiting) == maxWaiting {
			p.waiting = p.waiting[1:]
		}
		p.waiting = append(p.waiting, pub)
		return
	case top == r.epoch && writer != r.leader:
		f.cfg.Logger.Warn("activetier: ignoring epoch markers of the current epoch from a broker that is not its leader",
			"partition", p.tp.String(), "epoch", top, "writer", writer, "leader", r.leader)
		f.count(func(c *followerCounters) { c.forged++ })
		return
	}
	if err := p.leader.Merge(pub...); err != nil {
		f.cfg.Logger.Error("activetier: ignoring invalid epoch markers", "partition", p.tp.String(), "err", err)
		f.count(func(c *followerCounters) { c.poisoned++ })
		return
	}
	if err := f.truncateIfDiverged(ctx, p); err != nil {
		f.localFailed(p.tp, err)
	}
}

// learnEpoch acts on a later epoch the broker has learned for p: the
// marker publications waiting for it are merged, in the order they came.
func (f *Follower) learnEpoch(ctx context.Context, p *fpart) {
	r := f.roles[p.tp]
	if r.epoch <= p.known {
		return
	}
	p.known = r.epoch
	waiting := p.waiting
	p.waiting = nil
	for _, pub := range waiting {
		if f.parts[p.tp] != p {
			return // the local log failed meanwhile
		}
		f.mergeMarkers(ctx, p, pub)
	}
}

// truncateIfDiverged truncates the local log where it disagrees with the
// leader lineage (KIP-320), e.g. records of an old epoch applied before the
// follower learned that a new leader started below them.
func (f *Follower) truncateIfDiverged(ctx context.Context, p *fpart) error {
	to, diverged := fencing.Divergence(p.leo, &p.local, &p.leader)
	if !diverged {
		return nil
	}
	return f.truncate(ctx, p, to)
}

func (f *Follower) truncate(ctx context.Context, p *fpart, to int64) error {
	// Epochs start at batch boundaries in every log, but a marker may be
	// wrong: a batch holding the first divergent offset goes whole, as
	// Kafka's truncateTo removes it. Removing more is always safe.
	lctx, cancel := context.WithTimeout(ctx, f.cfg.LocalTimeout)
	defer cancel()
	bs, err := f.cfg.Local.Read(lctx, p.tp, to, 1)
	if err != nil {
		return fmt.Errorf("walstore: reading %s at %d to truncate: %w", p.tp, to, &DependencyError{Dependency: "LocalLog.Read", Err: err})
	}
	if len(bs) > 0 && bs[0].FirstOffset < to && to <= bs[0].LastOffset {
		to = bs[0].FirstOffset
	}
	f.cfg.Logger.Info("activetier: truncating diverged log", "partition", p.tp.String(), "from", p.leo, "to", to)
	if err := f.truncateLocal(ctx, p.tp, to); err != nil {
		return err
	}
	p.local.TruncateFromEnd(to)
	p.leo = to
	// Entries for offsets at and above the truncation point were forgotten
	// once applied; read the retained metadata again to find them. What is
	// still applied is skipped as duplicate.
	notify(f.rewind)
	f.mu.Lock()
	f.stats.truncations++
	f.mu.Unlock()
	return nil
}

// truncateLocal truncates tp's local log to end at to, and checks that it
// does: the engine's state must describe the log as it is.
func (f *Follower) truncateLocal(ctx context.Context, tp metadata.TopicPartition, to int64) error {
	lctx, cancel := context.WithTimeout(ctx, f.cfg.LocalTimeout)
	defer cancel()
	if err := f.cfg.Local.Truncate(lctx, tp, to); err != nil {
		return fmt.Errorf("walstore: truncating %s to %d: %w", tp, to, &DependencyError{Dependency: "LocalLog.Truncate", Err: err})
	}
	end, err := f.cfg.Local.EndOffset(tp)
	if err != nil {
		return fmt.Errorf("walstore: end offset of %s: %w", tp, &DependencyError{Dependency: "LocalLog.EndOffset", Err: err})
	}
	if end != to {
		return fmt.Errorf("walstore: truncating %s to %d: %w", tp, to, &DependencyError{Dependency: "LocalLog.Truncate",
			Err: fmt.Errorf("%w: the log ends at %d afterwards", ErrContractViolation, end)})
	}
	return nil
}

// reportGap says, at most every 30 seconds per partition, that p cannot
// go on because the entries it holds start past its log end: offsets no
// entry covers, which only a leader that skipped offsets, or a metadata
// log that lost messages, would leave.
func (f *Follower) reportGap(p *fpart, now time.Time) {
	next := int64(math.MaxInt64)
	for _, pe := range p.pending {
		next = min(next, pe.e.FirstOffset)
	}
	if next <= p.leo || len(p.pending) == 0 {
		p.gapLog = time.Time{}
		return
	}
	if p.gapLog.IsZero() {
		p.gapLog = now // a gap that lasts a moment is reordering, not news
		return
	}
	if now.Sub(p.gapLog) < 30*time.Second {
		return
	}
	p.gapLog = now
	f.cfg.Logger.Warn("activetier: no entry continues the log; waiting", "partition", p.tp.String(), "end", p.leo, "next", next, "held", len(p.pending))
}

// step does all the work the current state allows: it drops and skips
// entries fencing rules out, applies fetched entries in offset order, and
// starts fetches for the entries that come next.
func (f *Follower) step(ctx context.Context, wg *sync.WaitGroup, results chan<- fetchDone) {
	now := f.cfg.Clock.Now()
	f.retryAt = time.Time{}
	for tp, until := range f.broken {
		if !now.Before(until) {
			f.part(ctx, tp) // its rest is over: load it again
		}
	}
	for r := range f.rounds {
		if hedge := r.start.Add(f.cfg.HedgeAfter); now.Before(hedge) {
			f.wakeAt(hedge)
		} else if t := now.Add(f.cfg.Backoff.Max); t.After(f.bucketBackoff[r.bucket]) {
			// Unanswered for too long: let copies elsewhere be used.
			f.bucketBackoff[r.bucket] = t
		}
	}
	var want []metadata.Entry
	var wantKeys []*pendingEntry
	held := 0
	for tp, p := range f.parts {
		f.learnEpoch(ctx, p)
		if f.parts[tp] != p {
			continue
		}
		err := f.bootstrap(ctx, p)
		if err == nil {
			err = f.applyReady(ctx, p)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.localFailed(tp, err)
			continue
		}
		f.sweep(p)
		f.reportGap(p, now)
		for _, pe := range f.chain(p, now) {
			want = append(want, pe.e)
			wantKeys = append(wantKeys, pe)
		}
		held += len(p.pending)
		f.mu.Lock()
		f.lag[p.tp] = max(0, p.maxSeen+1-p.leo)
		f.mu.Unlock()
	}
	if held > f.cfg.MaxHeld {
		held -= f.evict(held - f.cfg.MaxHeld)
	}
	f.mu.Lock()
	f.stats.held = held
	f.mu.Unlock()
	if f.evicted && len(want) == 0 && len(f.rounds) == 0 && now.Sub(f.lastRewind) >= f.cfg.Backoff.Max {
		// Nothing left to do with what is held: read the retained metadata
		// again for what was forgotten.
		f.evicted, f.lastRewind = false, now
		notify(f.rewind)
	}
	// One round per bucket, so that a bucket that does not answer holds up
	// only its own entries.
	byBucket := make(map[string][]int)
	var buckets []string
	for i, e := range want {
		if _, ok := byBucket[e.Object.Bucket]; !ok {
			buckets = append(buckets, e.Object.Bucket)
		}
		byBucket[e.Object.Bucket] = append(byBucket[e.Object.Bucket], i)
	}
	for _, b := range buckets {
		if len(f.rounds) >= f.cfg.FetchConcurrency {
			break
		}
		entries := make([]metadata.Entry, 0, len(byBucket[b]))
		for _, i := range byBucket[b] {
			wantKeys[i].fetching = true
			entries = append(entries, want[i])
		}
		r := &fetchRound{bucket: b, start: now}
		f.rounds[r] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			fctx, cancel := context.WithTimeout(ctx, f.cfg.FetchTimeout)
			defer cancel()
			res, err := f.mgr.Fetch(fctx, entries)
			if err != nil && ctx.Err() == nil {
				// The round timed out: report every entry as unavailable.
				res = make([]FetchResult, len(entries))
				for i, e := range entries {
					res[i] = FetchResult{Entry: e, Err: &FetchError{Object: e.Object, Partition: e.Partition, Position: e.Position, Length: e.Length, Err: fmt.Errorf("%w: no answer within %v", ErrUnavailable, f.cfg.FetchTimeout)}}
				}
				err = nil
			}
			f.fetchLat.observe(f.cfg.Clock.Now().Sub(r.start))
			select {
			case results <- fetchDone{round: r, results: res, err: err}:
			case <-ctx.Done():
			}
		}()
	}
}

// wakeAt makes the loop run again by itself at t, at the latest.
func (f *Follower) wakeAt(t time.Time) {
	if f.retryAt.IsZero() || t.Before(f.retryAt) {
		f.retryAt = t
	}
}

// evict forgets n held entries, those furthest ahead of their partition's
// log end (the last to be needed), and returns how many it forgot.
func (f *Follower) evict(n int) int {
	type ahead struct {
		p    *fpart
		k    pendingKey
		dist int64
	}
	var cands []ahead
	for _, p := range f.parts {
		for k, pe := range p.pending {
			if !pe.fetching && pe.batches == nil {
				cands = append(cands, ahead{p, k, pe.e.FirstOffset - p.leo})
			}
		}
	}
	slices.SortFunc(cands, func(a, b ahead) int { return cmp.Compare(b.dist, a.dist) })
	n = min(n, len(cands))
	for _, c := range cands[:n] {
		delete(c.p.pending, c.k)
	}
	if n > 0 {
		f.evicted = true
		f.count(func(c *followerCounters) { c.evicted += uint64(n) })
	}
	return n
}

// bootstrap starts an empty local log where the leader's lineage begins: a
// new replica has nothing to continue from, and waiting at offset 0 for
// data the leader no longer retains would hold it forever.
func (f *Follower) bootstrap(ctx context.Context, p *fpart) error {
	if _, ok := p.local.Latest(); ok {
		return nil
	}
	first, ok := p.leader.Lineage().Earliest()
	if !ok || first.StartOffset <= p.leo {
		return nil
	}
	f.cfg.Logger.Info("activetier: starting empty replica at the leader's earliest epoch", "partition", p.tp.String(), "offset", first.StartOffset)
	if err := f.truncateLocal(ctx, p.tp, first.StartOffset); err != nil {
		return err
	}
	p.leo = first.StartOffset
	return nil
}

// sweep forgets entries fencing says are duplicates or stale.
func (f *Follower) sweep(p *fpart) {
	for k, pe := range p.pending {
		if pe.fetching {
			continue
		}
		d := fencing.Decide(p.leo, &p.local, &p.leader, pe.e)
		switch d.Action {
		case fencing.Skip:
			delete(p.pending, k)
			f.count(func(c *followerCounters) { c.skipped++ })
		case fencing.Drop:
			f.cfg.Logger.Debug("activetier: dropping stale entry", "partition", p.tp.String(), "first", pe.e.FirstOffset, "epoch", pe.e.RecordEpoch, "reason", d.Reason)
			delete(p.pending, k)
			f.count(func(c *followerCounters) { c.dropped++ })
		}
	}
}

func (f *Follower) count(fn func(*followerCounters)) {
	f.mu.Lock()
	fn(&f.stats)
	f.mu.Unlock()
}

// candidate picks the entry to use for offset at: one fencing says to
// apply there, preferring one already fetched or being fetched, then one
// whose retry time and bucket allow a fetch now, newest publisher first (a
// republishing leader's bucket is the one most likely up).
func (f *Follower) candidate(p *fpart, at int64, now time.Time) (*pendingEntry, fencing.Decision, bool) {
	if latest, ok := p.leader.Latest(); !ok || latest.Epoch < p.known {
		// The broker knows of a leader epoch whose markers have not
		// arrived: until they do, where the epochs before it ended is
		// unknown, and an entry of an earlier leader may be one that epoch
		// fenced (a zombie's). A Kafka follower likewise fetches only from
		// the leader of the epoch it was told.
		return nil, fencing.Decision{}, false
	}
	var best *pendingEntry
	var bestD fencing.Decision
	// readyAt is when pe may be fetched again, after its own and its
	// bucket's backoff.
	readyAt := func(pe *pendingEntry) time.Time {
		if bt := f.bucketBackoff[pe.e.Object.Bucket]; bt.After(pe.notBefore) {
			return bt
		}
		return pe.notBefore
	}
	rank := func(pe *pendingEntry) int {
		switch {
		case pe.batches != nil:
			return 3
		case pe.fetching && !now.Before(f.bucketBackoff[pe.e.Object.Bucket]):
			return 2
		case pe.fetching:
			return 0 // its bucket stopped answering: prefer a copy elsewhere
		case !now.Before(readyAt(pe)):
			return 1
		}
		return 0
	}
	for _, pe := range p.pending {
		if pe.e.FirstOffset > at || pe.e.LastOffset < at {
			continue
		}
		d := fencing.Decide(at, &p.local, &p.leader, pe.e)
		if d.Action != fencing.Apply {
			continue
		}
		if rank(pe) == 0 {
			// Passed over for its backoff: the loop must wake when it ends.
			f.wakeAt(readyAt(pe))
		}
		if best == nil || rank(pe) > rank(best) ||
			(rank(pe) == rank(best) && pe.e.PublisherEpoch > best.e.PublisherEpoch) {
			best, bestD = pe, d
		}
	}
	if best == nil || rank(best) == 0 {
		return nil, fencing.Decision{}, false
	}
	return best, bestD, true
}

// chain returns the entries to fetch now: the run of entries that continue
// the log from its end, up to Readahead of them, skipping ones already
// fetched or in flight.
func (f *Follower) chain(p *fpart, now time.Time) []*pendingEntry {
	var out []*pendingEntry
	at := p.leo
	for range f.cfg.Readahead {
		pe, d, ok := f.candidate(p, at, now)
		if !ok {
			break
		}
		if pe.batches == nil && !pe.fetching {
			out = append(out, pe)
		}
		at = min(pe.e.LastOffset+1, d.Limit)
	}
	return out
}

// applyReady appends fetched entries that continue the log, in order,
// re-deciding each against the current state first: markers that arrived
// during the fetch may have fenced it.
func (f *Follower) applyReady(ctx context.Context, p *fpart) error {
	for {
		pe, d, ok := f.candidate(p, p.leo, f.cfg.Clock.Now())
		if !ok || pe.batches == nil {
			return nil
		}
		var batches []combiner.Batch
		for _, b := range pe.batches {
			if b.LastOffset < d.From {
				continue // below the log end: already applied
			}
			if b.FirstOffset >= d.Limit {
				break // past the end of the record epoch: superseded
			}
			if b.FirstOffset < d.From || b.LastOffset >= d.Limit {
				// Batch boundaries are the leader's and every replica's;
				// one straddling the log end or an epoch boundary means the
				// entry does not describe this lineage.
				f.cfg.Logger.Warn("activetier: dropping entry whose batches straddle the apply range", "partition", p.tp.String(), "object", pe.e.Object.String(), "from", d.From, "limit", d.Limit)
				delete(p.pending, pendingKey{pe.e.Object, pe.e.Position})
				f.count(func(c *followerCounters) { c.dropped++ })
				batches = nil
				break
			}
			batches = append(batches, b)
		}
		if len(batches) == 0 {
			delete(p.pending, pendingKey{pe.e.Object, pe.e.Position})
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, f.cfg.LocalTimeout)
		err := f.cfg.Local.Append(lctx, p.tp, batches)
		cancel()
		if err != nil {
			return fmt.Errorf("walstore: appending %s at %d: %w", p.tp, p.leo, &DependencyError{Dependency: "LocalLog.Append", Err: err})
		}
		// The progress reported next lets the leader delete what it
		// covers: it must describe the log as it is.
		want := batches[len(batches)-1].LastOffset + 1
		if end, err := f.cfg.Local.EndOffset(p.tp); err != nil {
			return fmt.Errorf("walstore: end offset of %s: %w", p.tp, &DependencyError{Dependency: "LocalLog.EndOffset", Err: err})
		} else if end != want {
			return fmt.Errorf("walstore: appending %s up to %d: %w", p.tp, want, &DependencyError{Dependency: "LocalLog.Append",
				Err: fmt.Errorf("%w: the log ends at %d afterwards", ErrContractViolation, end)})
		}
		var bytes int
		for _, b := range batches {
			if latest, ok := p.local.Latest(); !ok || b.Epoch > latest.Epoch {
				if err := p.local.Assign(b.Epoch, b.FirstOffset); err != nil {
					return fmt.Errorf("walstore: local epochs of %s: %w", p.tp, err)
				}
			}
			bytes += len(b.Data)
		}
		p.leo = batches[len(batches)-1].LastOffset + 1
		if p.leo > pe.e.LastOffset {
			delete(p.pending, pendingKey{pe.e.Object, pe.e.Position})
		}
		lag := f.cfg.Clock.Now().Sub(time.UnixMilli(pe.e.MaxTimestamp))
		f.applyLat.observe(lag)
		f.count(func(c *followerCounters) {
			c.applied++
			c.appliedBytes += uint64(bytes)
		})
		if f.cfg.OnApplied != nil {
			latest, _ := p.local.Latest()
			f.cfg.OnApplied(Progress{Partition: p.tp, Leader: f.roles[p.tp].leader, Follower: f.cfg.BrokerID, EndOffset: p.leo, LastEpoch: latest.Epoch})
		}
	}
}

// handleFetch records fetched batches, or schedules a retry. An unreachable
// bucket backs off every entry in it, so the follower turns to
// republished copies elsewhere if there are any and otherwise waits; a
// missing object is given up on, since no retry can bring it back.
func (f *Follower) handleFetch(done fetchDone) {
	now := f.cfg.Clock.Now()
	for _, r := range done.results {
		p := f.parts[r.Entry.Partition]
		if p == nil {
			continue
		}
		k := pendingKey{r.Entry.Object, r.Entry.Position}
		pe := p.pending[k]
		if pe == nil {
			continue
		}
		pe.fetching = false
		if r.Err == nil {
			if err := checkSection(r.Entry, r.Batches); err != nil {
				// The section's checksum held, so this is what its writer
				// stored: no other copy of it can be better. Appending it
				// would fail, again on every retry; a valid entry for the
				// same offsets may still come.
				f.cfg.Logger.Error("activetier: dropping entry whose batches do not match it", "err", err)
				delete(p.pending, k)
				f.count(func(c *followerCounters) { c.dropped++ })
				continue
			}
			pe.batches = r.Batches
			continue
		}
		f.count(func(c *followerCounters) { c.fetchErrors++ })
		switch {
		case errors.Is(r.Err, ErrNotFound), errors.Is(r.Err, ErrUnknownBucket), errors.Is(r.Err, ErrInvalidRange):
			f.cfg.Logger.Warn("activetier: giving up on entry", "err", r.Err)
			delete(p.pending, k)
			f.count(func(c *followerCounters) { c.notFound++ })
			continue
		case errors.Is(r.Err, ErrCorrupt):
			f.cfg.Logger.Error("activetier: fetched section failed verification; not applied", "err", r.Err)
			f.count(func(c *followerCounters) { c.corrupt++ })
		case errors.Is(r.Err, ErrUnavailable):
			b := r.Entry.Object.Bucket
			f.bucketBackoff[b] = now.Add(f.jitter.delay(f.cfg.Backoff, pe.attempts))
		default:
			f.cfg.Logger.Warn("activetier: fetch failed; retrying", "err", r.Err)
		}
		pe.notBefore = now.Add(f.jitter.delay(f.cfg.Backoff, pe.attempts))
		pe.attempts++
	}
	if done.err != nil {
		// ctx ended mid-fetch: unmark everything so nothing stays stuck.
		for _, p := range f.parts {
			for _, pe := range p.pending {
				pe.fetching = false
			}
		}
	}
}

// checkSection checks that a fetched section's batches are what its entry
// announces: whole batches, each continuing the one before, from the
// entry's first offset to its last.
func checkSection(e metadata.Entry, batches []combiner.Batch) error {
	next := e.FirstOffset
	for _, b := range batches {
		if b.FirstOffset != next || b.LastOffset < b.FirstOffset {
			return fmt.Errorf("walstore: %s section in %s at %d: batch %d-%d where offset %d was due", e.Partition, e.Object, e.Position, b.FirstOffset, b.LastOffset, next)
		}
		next = b.LastOffset + 1
	}
	if next != e.LastOffset+1 {
		return fmt.Errorf("walstore: %s section in %s at %d: batches end at %d, the entry at %d", e.Partition, e.Object, e.Position, next-1, e.LastOffset)
	}
	return nil
}

// nextRetry returns how long until the loop should run again by itself:
// when the earliest entry the last step passed over for its backoff may be
// fetched, or a re-read of forgotten entries is due. A time already past
// means at once: deciding from step's own clock reading, not a new one,
// is what keeps a retry that falls due in between from being lost.
func (f *Follower) nextRetry() (time.Duration, bool) {
	earliest := f.retryAt
	if f.evicted && len(f.rounds) == 0 {
		// A re-read of the metadata is due once the rate limit allows (a
		// fetch in flight wakes the loop by itself).
		if t := f.lastRewind.Add(f.cfg.Backoff.Max); earliest.IsZero() || t.Before(earliest) {
			earliest = t
		}
	}
	if earliest.IsZero() {
		return 0, false
	}
	return max(earliest.Sub(f.cfg.Clock.Now()), 0), true
}
