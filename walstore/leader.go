package walstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
)

// Errors returned by the leader engine, to be tested with errors.Is.
var (
	// ErrBufferFull: Append would take the buffered bytes past
	// LeaderConfig.BufferBytes and the overflow policy is Reject.
	ErrBufferFull = errors.New("walstore: leader buffer full")
	// ErrNotLeader: Append or Republish for a partition this engine was not
	// told it leads (see BecomeLeader).
	ErrNotLeader = errors.New("walstore: not the leader of the partition")
	// ErrStopped: the engine's Run has returned.
	ErrStopped = errors.New("walstore: engine stopped")
	// ErrInvalidBatch: a batch that cannot be part of a partition's log:
	// an inverted or negative offset range or a negative epoch (for
	// LocalLog.Append too), and, for the leader's Append, no data, an
	// epoch other than the leadership's, or a first offset that does not
	// continue the batches appended before it.
	ErrInvalidBatch = errors.New("walstore: invalid batch")
)

// Overflow says what Append does when the buffer is full.
type Overflow int

const (
	// Block makes Append wait, up to its context's deadline, until uploads
	// free enough space.
	Block Overflow = iota
	// Reject makes Append return ErrBufferFull at once, so the broker can
	// fail the produce request or fall back to ordinary replication.
	Reject
)

// LeaderConfig configures a Leader. Zero durations and sizes mean the
// documented default; negative ones are rejected.
type LeaderConfig struct {
	// BrokerID is this broker's id. Must be >= 0.
	BrokerID int32
	// Store writes to this broker's AZ's bucket. Required.
	Store ObjectStore
	// Log carries the metadata. Required.
	Log metadata.Log
	// Local is read when republishing after a failover. Required.
	Local LocalLog
	// KeyPrefix is prepended to object keys.
	KeyPrefix string
	// Codec for sections. Default none.
	Codec metadata.Codec
	// Interval is the longest a batch waits before its object is cut.
	// Default 100ms.
	Interval time.Duration
	// ObjectBytes is the size at which an object is cut early. Default 4 MiB.
	ObjectBytes int
	// MaxPartitions caps the partitions in one object. Default 1000.
	MaxPartitions int
	// BufferBytes bounds the batch bytes appended but not yet published:
	// buffered, uploading, or stored and waiting for the metadata log.
	// Default 64 MiB.
	BufferBytes int
	// Overflow is the policy when BufferBytes is reached. Default Block.
	Overflow Overflow
	// MaxInflight bounds concurrent uploads. Default 4.
	MaxInflight int
	// Backoff paces retries of uploads and publishes.
	Backoff Backoff
	// DegradedAfter is how long an upload or a metadata publish may go
	// without succeeding, whether its attempts fail or never return, before
	// the engine reports itself degraded (the broker's cue to fall back to
	// ordinary replication). Default 5s.
	DegradedAfter time.Duration
	// RequestTimeout bounds one attempt of a PUT or of a metadata append;
	// an attempt that runs out counts as a transient failure and is
	// retried. Default 10s.
	RequestTimeout time.Duration
	// OnHealth, if set, is called when the engine becomes degraded or
	// recovers. It must not block.
	OnHealth func(Health)
	// MarkerRefresh is how often the epoch markers of every led partition
	// are published again, so that trimming the metadata log never leaves a
	// restarted follower without them. Default 30s.
	MarkerRefresh time.Duration
	// GCInterval is how often Run collects garbage. Default 1s.
	GCInterval time.Duration
	// Clock and Seed make runs reproducible. Default: the wall clock, seed 0.
	Clock Clock
	Seed  uint64
	// Logger receives the engine's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c *LeaderConfig) validate() error {
	switch {
	case c.BrokerID < 0:
		return fmt.Errorf("walstore: LeaderConfig.BrokerID %d is negative", c.BrokerID)
	case c.Store == nil:
		return errors.New("walstore: LeaderConfig.Store is required")
	case c.Log == nil:
		return errors.New("walstore: LeaderConfig.Log is required")
	case c.Local == nil:
		return errors.New("walstore: LeaderConfig.Local is required")
	case c.Log.Partitions() <= 0:
		return fmt.Errorf("walstore: LeaderConfig.Log: %w", &DependencyError{Dependency: "metadata.Log.Partitions",
			Err: fmt.Errorf("%w: %d partitions", ErrContractViolation, c.Log.Partitions())})
	case !c.Codec.Valid():
		return fmt.Errorf("walstore: LeaderConfig.Codec %v is not a known codec", c.Codec)
	case c.Overflow != Block && c.Overflow != Reject:
		return fmt.Errorf("walstore: LeaderConfig.Overflow %d is not Block or Reject", c.Overflow)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Interval", int64(c.Interval)}, {"ObjectBytes", int64(c.ObjectBytes)},
		{"MaxPartitions", int64(c.MaxPartitions)}, {"BufferBytes", int64(c.BufferBytes)},
		{"MaxInflight", int64(c.MaxInflight)}, {"DegradedAfter", int64(c.DegradedAfter)},
		{"MarkerRefresh", int64(c.MarkerRefresh)}, {"GCInterval", int64(c.GCInterval)},
		{"RequestTimeout", int64(c.RequestTimeout)}, {"Backoff.Initial", int64(c.Backoff.Initial)}, {"Backoff.Max", int64(c.Backoff.Max)},
	} {
		if f.v < 0 {
			return fmt.Errorf("walstore: LeaderConfig.%s %d is negative", f.name, f.v)
		}
	}
	c.Interval = orDefault(c.Interval, 100*time.Millisecond)
	c.ObjectBytes = orDefault(c.ObjectBytes, 4<<20)
	c.MaxPartitions = orDefault(c.MaxPartitions, 1000)
	c.BufferBytes = orDefault(c.BufferBytes, 64<<20)
	c.MaxInflight = orDefault(c.MaxInflight, 4)
	c.DegradedAfter = orDefault(c.DegradedAfter, 5*time.Second)
	c.MarkerRefresh = orDefault(c.MarkerRefresh, 30*time.Second)
	c.GCInterval = orDefault(c.GCInterval, time.Second)
	c.RequestTimeout = orDefault(c.RequestTimeout, 10*time.Second)
	c.Backoff = c.Backoff.withDefaults()
	if c.ObjectBytes > c.BufferBytes {
		return fmt.Errorf("walstore: LeaderConfig.ObjectBytes %d exceeds BufferBytes %d", c.ObjectBytes, c.BufferBytes)
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

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
	// returned.
	Err error
}

// Leader is the leader-side engine: it buffers the batches the broker
// appends, cuts them into combined objects, uploads several at a time,
// and publishes each partition's entries in offset order once their object
// is stored. Most brokers use it through a Node; create it with NewLeader
// and drive it with Run.
type Leader struct {
	cfg    LeaderConfig
	mgr    *Manager
	jitter *jitter
	gc     *collector

	ran atomic.Bool // Run was called

	mu        sync.Mutex
	builder   *combiner.Builder // where Append adds; guarded by mu
	spare     *combiner.Builder // empty, or being cut by Run outside mu
	leading   map[metadata.TopicPartition]*leadership
	gens      uint64                                                   // leaderships begun
	accepted  map[*combiner.Builder]map[metadata.TopicPartition]uint64 // leadership each partition's pending data was appended under
	buffered  int
	space     chan struct{} // closed when buffered bytes drop; then replaced
	queue     []*upload     // cut, not yet published, in cut order
	durableCh chan struct{} // closed when a durable offset advances or a leadership ends; then replaced
	ops       map[*operation]struct{}
	okCh      map[string]chan struct{} // per kind, closed when one succeeds; then replaced
	health    Health
	reported  bool       // the Degraded last given to OnHealth
	reportMu  sync.Mutex // serializes OnHealth calls; taken before mu
	stopped   bool
	stats     leaderCounters

	fmu       sync.RWMutex // guards followers, read by the builder and the collector
	followers map[metadata.TopicPartition][]int32

	flushCh    chan struct{}
	publishCh  chan struct{}
	slots      chan struct{}
	uploadLat  histogram
	publishLat histogram
}

type leaderCounters struct {
	appends, appendedBytes        uint64
	objects, objectBytes          uint64
	uploadRetries, publishRetries uint64
	fenced, republished           uint64
	inflight                      int
}

// leadership is the engine's state for one partition it leads. A
// leadership spans re-elections of this broker at higher epochs as long as
// the broker never stopped leading in between: the log is the same, so
// data accepted at the earlier epoch is published at the later one.
type leadership struct {
	epoch int32
	gen   uint64
	// next is the offset the next Append must start at.
	next int64
	// durable: every offset below it is stored and published by this
	// leadership, or was on every follower when it began. above holds the
	// ranges published beyond a hole (a republish still under way),
	// merged and ascending.
	durable int64
	above   []offsetRange
	// failed is set when data of this leadership can never be published;
	// WaitDurable beyond durable then returns it.
	failed error
	chore  *chore
}

type offsetRange struct{ from, to int64 } // [from, to)

// published records that [from, to) is stored and published and reports
// whether the durable offset advanced.
func (ld *leadership) published(from, to int64) bool {
	if to <= ld.durable {
		return false
	}
	if from > ld.durable {
		ld.above = mergeRange(ld.above, offsetRange{from, to})
		return false
	}
	ld.durable = to
	for len(ld.above) > 0 && ld.above[0].from <= ld.durable {
		ld.durable = max(ld.durable, ld.above[0].to)
		ld.above = ld.above[1:]
	}
	return true
}

func mergeRange(rs []offsetRange, r offsetRange) []offsetRange {
	i, _ := slices.BinarySearchFunc(rs, r, func(a, b offsetRange) int { return cmp.Compare(a.from, b.from) })
	rs = slices.Insert(rs, i, r)
	out := rs[:1]
	for _, r := range rs[1:] {
		if last := &out[len(out)-1]; r.from <= last.to {
			last.to = max(last.to, r.to)
			continue
		}
		out = append(out, r)
	}
	return out
}

// chore is the background work a new leadership starts: publishing the
// epoch markers, then republishing the log from an offset.
type chore struct {
	gen   uint64
	epoch int32
	from  int64 // republish from here; -1 for none. Advanced by the chore as it goes
	// republish: from was set; unlike from, never written by the chore.
	republish bool
	started   bool
	cancel    context.CancelFunc
}

// operation is one upload or metadata publish, from its first attempt to
// its success, for health: one that takes DegradedAfter degrades the engine
// whether its attempts fail or never return.
type operation struct {
	what  string
	start time.Time
	err   error
}

// upload is one cut object on its way to being stored and published.
type upload struct {
	obj        combiner.Object
	gens       []uint64 // per section: the leadership that accepted its data
	bytes      int      // buffer bytes this object accounts for
	appendedAt time.Time
	ref        metadata.ObjectRef
	uploaded   bool
	publishing bool
}

// NewLeader validates cfg and returns a Leader. Nothing runs until Run.
func NewLeader(cfg LeaderConfig) (*Leader, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	mgr, err := NewManager(ManagerConfig{
		Store: cfg.Store, BrokerID: cfg.BrokerID, KeyPrefix: cfg.KeyPrefix,
		Codec: cfg.Codec, Seed: cfg.Seed, Clock: cfg.Clock, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	l := &Leader{
		cfg:       cfg,
		mgr:       mgr,
		jitter:    newJitter(cfg.Seed ^ 0x1eade7),
		leading:   make(map[metadata.TopicPartition]*leadership),
		accepted:  make(map[*combiner.Builder]map[metadata.TopicPartition]uint64),
		space:     make(chan struct{}),
		durableCh: make(chan struct{}),
		ops:       make(map[*operation]struct{}),
		okCh:      make(map[string]chan struct{}),
		followers: make(map[metadata.TopicPartition][]int32),
		flushCh:   make(chan struct{}, 1),
		publishCh: make(chan struct{}, 1),
		slots:     make(chan struct{}, cfg.MaxInflight),
	}
	var builders [2]*combiner.Builder
	for i := range builders {
		builders[i], err = combiner.NewBuilder(combiner.BuilderConfig{
			Interval:      cfg.Interval,
			TargetBytes:   cfg.ObjectBytes,
			MaxPartitions: cfg.MaxPartitions,
			Encoder:       combiner.EncoderOptions{Codec: cfg.Codec},
			Followers:     l.followersOf,
		})
		if err != nil {
			mgr.Close()
			if builders[0] != nil {
				builders[0].Close()
			}
			return nil, fmt.Errorf("walstore: leader: %w", err)
		}
	}
	l.builder, l.spare = builders[0], builders[1]
	l.gc = newCollector(l)
	return l, nil
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// followersOf is the placement the broker gave with BecomeLeader.
func (l *Leader) followersOf(tp metadata.TopicPartition) []int32 {
	l.fmu.RLock()
	defer l.fmu.RUnlock()
	return l.followers[tp]
}

// BecomeLeader makes this engine tp's leader at epoch, with followers as
// its follower brokers, and returns once Append accepts tp's batches. The
// broker's local log must already hold epoch in its epoch cache, starting
// at its end offset, as Kafka's makeLeader leaves it. In the background
// the engine then publishes tp's epoch lineage as markers and, if
// republishFrom >= 0, republishes the local log from that offset (see
// Republish), retrying until done or the leadership ends.
//
// If the engine already leads tp (it never resigned since), the
// leadership continues at the new epoch: data appended at the old epoch and
// not yet published is published at the new one, since it is the same log.
// Calling it again at the same epoch only updates the followers.
// Otherwise a new leadership begins: its durable offset starts at
// republishFrom, or at the log end if republishFrom is negative (the
// broker says every follower holds the log up to there).
func (l *Leader) BecomeLeader(ctx context.Context, tp metadata.TopicPartition, epoch int32, followers []int32, republishFrom int64) error {
	if err := tp.Validate(); err != nil {
		return fmt.Errorf("walstore: BecomeLeader: %w", err)
	}
	if epoch < 0 {
		return fmt.Errorf("walstore: BecomeLeader %s: negative epoch %d", tp, epoch)
	}
	followers = slices.Compact(slices.Sorted(slices.Values(followers)))
	if slices.Contains(followers, l.cfg.BrokerID) {
		return fmt.Errorf("walstore: BecomeLeader %s: the leader, broker %d, is among its followers %v", tp, l.cfg.BrokerID, followers)
	}
	if len(followers) > 0 && followers[0] < 0 {
		return fmt.Errorf("walstore: BecomeLeader %s: negative follower id in %v", tp, followers)
	}
	leo, err := l.cfg.Local.EndOffset(tp)
	if err != nil {
		return fmt.Errorf("walstore: BecomeLeader %s: %w", tp, &DependencyError{Dependency: "LocalLog.EndOffset", Err: err})
	}
	if leo < 0 {
		return fmt.Errorf("walstore: BecomeLeader %s: %w", tp, &DependencyError{Dependency: "LocalLog.EndOffset", Err: fmt.Errorf("%w: negative end offset %d", ErrContractViolation, leo)})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return ErrStopped
	}
	l.fmu.Lock()
	before := l.followers[tp]
	l.followers[tp] = followers
	l.fmu.Unlock()
	ld := l.leading[tp]
	if ld != nil {
		// A follower that joins may have held the partition before and
		// deleted it since (a reassignment): what it reported then is
		// not what it holds now. One that lacks the log from
		// republishFrom holds nothing above it.
		l.gc.followersChanged(tp, before, followers, republishFrom)
	}
	switch {
	case ld != nil && epoch == ld.epoch && republishFrom < 0:
		return nil
	case ld != nil && epoch < ld.epoch:
		return fmt.Errorf("walstore: BecomeLeader %s: epoch %d is below the current epoch %d", tp, epoch, ld.epoch)
	case ld != nil && ld.next <= leo:
		// Re-elected without a break: the same log goes on. A republish
		// asked for now is for followers that lack the log from there (a
		// reassignment): until it is done, only this broker is sure to
		// hold it, so the durable offset goes back to where it starts.
		ld.epoch = epoch
		if republishFrom >= 0 && republishFrom < ld.durable {
			ld.durable, ld.above = max(republishFrom, 0), nil
		}
	default:
		if ld != nil {
			// The local log is behind what was appended here: the
			// broker broke the contract, and nothing pending can be
			// trusted to be in its log. Start afresh.
			l.endLocked(tp)
		}
		l.gens++
		start := leo
		if republishFrom >= 0 {
			start = min(republishFrom, leo)
		}
		ld = &leadership{epoch: epoch, gen: l.gens, next: leo, durable: start}
		l.leading[tp] = ld
		l.gc.newLeadership(tp, ld.gen)
	}
	from := int64(-1)
	if republishFrom >= 0 {
		from = min(republishFrom, leo)
	}
	if c := ld.chore; c != nil {
		if c.cancel != nil {
			c.cancel()
		}
		if c.republish {
			// The republish it replaces is unfinished: it has published
			// up to the durable offset (it fills the lowest hole), and
			// the rest must still be, or the followers that lacked the
			// log never get it and the durable offset never moves on.
			if from < 0 || ld.durable < from {
				from = ld.durable
			}
		}
	}
	ld.chore = &chore{gen: ld.gen, epoch: epoch, from: from, republish: from >= 0}
	l.durableAdvancedLocked()
	notify(l.flushCh)
	return nil
}

// Resign ends this engine's leadership of tp. Data of tp not yet published
// is withheld from publication, and WaitDurable calls waiting for it
// return an error matching ErrNotLeader. Resigning a partition the engine
// does not lead does nothing.
func (l *Leader) Resign(tp metadata.TopicPartition) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leading[tp] != nil {
		l.endLocked(tp)
		// Objects cut while leading keep their followers; the collector
		// needs no current ones for a partition it no longer leads.
		l.fmu.Lock()
		delete(l.followers, tp)
		l.fmu.Unlock()
	}
}

// endLocked ends tp's leadership: its pending data is dropped and its
// chores stopped; waiters learn of it.
func (l *Leader) endLocked(tp metadata.TopicPartition) {
	ld := l.leading[tp]
	if ld.chore != nil && ld.chore.cancel != nil {
		ld.chore.cancel()
	}
	delete(l.leading, tp)
	if n := l.builder.Remove(tp); n > 0 {
		delete(l.accepted[l.builder], tp)
		l.stats.fenced++
		l.releaseLocked(n)
	}
	l.gc.endLeadership(tp)
	l.durableAdvancedLocked()
}

// releaseLocked frees n bytes of buffer space.
func (l *Leader) releaseLocked(n int) {
	l.buffered -= n
	close(l.space)
	l.space = make(chan struct{})
}

// leaderEpoch is the epoch at which this engine leads tp right now.
func (l *Leader) leaderEpoch(tp metadata.TopicPartition) (int32, uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ld := l.leading[tp]
	if ld == nil {
		return 0, 0, false
	}
	return ld.epoch, ld.gen, true
}

// markersFor returns tp's lineage as markers, from the local log's epoch
// cache, ensuring the current epoch is among them.
func (l *Leader) markersFor(tp metadata.TopicPartition, epoch int32) ([]metadata.EpochStart, error) {
	epochs, err := l.cfg.Local.Epochs(tp)
	if err != nil {
		return nil, fmt.Errorf("walstore: epochs of %s: %w", tp, &DependencyError{Dependency: "LocalLog.Epochs", Err: err})
	}
	lin, err := fencing.NewLineage(epochs...)
	if err != nil || len(lin.Entries()) != len(epochs) {
		return nil, fmt.Errorf("walstore: epochs of %s: %w", tp, &DependencyError{Dependency: "LocalLog.Epochs",
			Err: fmt.Errorf("%w: %v is not an ascending epoch lineage (%v)", ErrContractViolation, epochs, err)})
	}
	markers := make([]metadata.EpochStart, 0, len(epochs)+1)
	for _, e := range epochs {
		if e.Epoch > epoch {
			break // a later epoch is not this leadership's to announce
		}
		markers = append(markers, metadata.EpochStart{Partition: tp, Epoch: e.Epoch, StartOffset: e.StartOffset, LeaderBrokerID: l.cfg.BrokerID})
	}
	if len(markers) == 0 || markers[len(markers)-1].Epoch < epoch {
		leo, err := l.cfg.Local.EndOffset(tp)
		if err != nil {
			return nil, fmt.Errorf("walstore: end offset of %s: %w", tp, &DependencyError{Dependency: "LocalLog.EndOffset", Err: err})
		}
		if n := len(markers); n > 0 && markers[n-1].StartOffset > leo {
			return nil, fmt.Errorf("walstore: epochs of %s: %w", tp, &DependencyError{Dependency: "LocalLog",
				Err: fmt.Errorf("%w: epoch %d starts at %d, past the end offset %d", ErrContractViolation, markers[n-1].Epoch, markers[n-1].StartOffset, leo)})
		}
		if n := len(markers); n > 0 && markers[n-1].StartOffset == leo {
			markers = markers[:n-1] // an epoch with no records is superseded at once
		}
		markers = append(markers, metadata.EpochStart{Partition: tp, Epoch: epoch, StartOffset: leo, LeaderBrokerID: l.cfg.BrokerID})
	}
	return markers, nil
}

func (l *Leader) publishMarkers(ctx context.Context, tp metadata.TopicPartition, epoch int32) error {
	markers, err := l.markersFor(tp, epoch)
	if err != nil {
		return err
	}
	offsets, err := l.publish(ctx, metadata.Message{WriterBrokerID: l.cfg.BrokerID, Markers: markers})
	if err != nil {
		return err
	}
	l.gc.trackMarkers(offsets)
	return nil
}

// Append queues one batch of tp for upload. The broker appends the batch
// to its local log first; the batch's Data must not be modified until the
// engine has uploaded it (WaitDurable tells when). Batches must continue
// one another: the first one of a leadership starts at the local log's end
// offset when BecomeLeader was called, each next one right after the last,
// all with the leadership's epoch; anything else is ErrInvalidBatch, and
// the batch is not queued. When the buffer is full, Append blocks
// (Overflow Block) until space frees or ctx ends, or returns
// ErrBufferFull (Overflow Reject).
func (l *Leader) Append(ctx context.Context, tp metadata.TopicPartition, b combiner.Batch) error {
	n := len(b.Data)
	switch {
	case n == 0:
		return fmt.Errorf("walstore: append to %s: %w: no data", tp, ErrInvalidBatch)
	case b.FirstOffset < 0 || b.LastOffset < b.FirstOffset || b.LastOffset == math.MaxInt64:
		return fmt.Errorf("walstore: append to %s: %w: offsets %d-%d", tp, ErrInvalidBatch, b.FirstOffset, b.LastOffset)
	case b.Epoch < 0:
		return fmt.Errorf("walstore: append to %s: %w: negative epoch %d", tp, ErrInvalidBatch, b.Epoch)
	case n > l.cfg.BufferBytes:
		return fmt.Errorf("walstore: append to %s: batch of %d bytes exceeds BufferBytes %d: %w", tp, n, l.cfg.BufferBytes, ErrBufferFull)
	}
	for {
		l.mu.Lock()
		if l.stopped {
			l.mu.Unlock()
			return ErrStopped
		}
		ld := l.leading[tp]
		switch {
		case ld == nil:
			l.mu.Unlock()
			return fmt.Errorf("walstore: append to %s: %w", tp, ErrNotLeader)
		case b.Epoch != ld.epoch:
			l.mu.Unlock()
			return fmt.Errorf("walstore: append to %s: %w: batch epoch %d is not the leader epoch %d", tp, ErrInvalidBatch, b.Epoch, ld.epoch)
		case b.FirstOffset != ld.next:
			l.mu.Unlock()
			return fmt.Errorf("walstore: append to %s: %w: batch starts at %d, the log continues at %d", tp, ErrInvalidBatch, b.FirstOffset, ld.next)
		}
		if l.buffered+n <= l.cfg.BufferBytes {
			err := l.addLocked(tp, b, ld)
			l.mu.Unlock()
			return err
		}
		space := l.space
		buffered := l.buffered
		l.mu.Unlock()
		if l.cfg.Overflow == Reject {
			return fmt.Errorf("walstore: append to %s: %d bytes buffered of %d: %w", tp, buffered, l.cfg.BufferBytes, ErrBufferFull)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("walstore: append to %s: waiting for buffer space: %w", tp, ctx.Err())
		case <-space:
		}
	}
}

func (l *Leader) addLocked(tp metadata.TopicPartition, b combiner.Batch, ld *leadership) error {
	now := l.cfg.Clock.Now()
	first := l.builder.Stats().Batches == 0
	if err := l.builder.Add(tp, b, now); err != nil {
		return fmt.Errorf("walstore: append to %s: %w: %w", tp, ErrInvalidBatch, err)
	}
	acc := l.accepted[l.builder]
	if acc == nil {
		acc = make(map[metadata.TopicPartition]uint64)
		l.accepted[l.builder] = acc
	}
	acc[tp] = ld.gen
	ld.next = b.LastOffset + 1
	l.buffered += len(b.Data)
	l.stats.appends++
	l.stats.appendedBytes += uint64(len(b.Data))
	if first || l.builder.Due(now) {
		// Wake Run: to cut now, or to time the first batch's interval.
		notify(l.flushCh)
	}
	return nil
}

// DurableOffset returns the offset below which tp's log is stored in
// object storage and its metadata published by this engine's current
// leadership (or was on every follower when it began), or -1 if the engine
// does not lead tp.
func (l *Leader) DurableOffset(tp metadata.TopicPartition) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ld := l.leading[tp]; ld != nil {
		return ld.durable
	}
	return -1
}

// durableAdvancedLocked wakes WaitDurable callers.
func (l *Leader) durableAdvancedLocked() {
	close(l.durableCh)
	l.durableCh = make(chan struct{})
}

// WaitDurable blocks until tp's data up to and including offset is stored
// and published (the acks-on-upload mode), or ctx ends. It fails with an
// error matching ErrNotLeader if the engine does not lead tp, or if the
// leadership it found ends before the offset is durable: data accepted
// under a leadership that ended is never published, and must not be
// acknowledged.
func (l *Leader) WaitDurable(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	var gen uint64
	for {
		l.mu.Lock()
		ld := l.leading[tp]
		switch {
		case l.stopped:
			l.mu.Unlock()
			return ErrStopped
		case ld == nil || gen != 0 && ld.gen != gen:
			l.mu.Unlock()
			return fmt.Errorf("walstore: waiting for %s offset %d to be durable: %w", tp, offset, ErrNotLeader)
		case ld.durable > offset:
			l.mu.Unlock()
			return nil
		case ld.failed != nil:
			l.mu.Unlock()
			return fmt.Errorf("walstore: waiting for %s offset %d to be durable: %w", tp, offset, ld.failed)
		}
		gen = ld.gen
		ch := l.durableCh
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("walstore: waiting for %s offset %d to be durable: %w", tp, offset, ctx.Err())
		case <-ch:
		}
	}
}

// Health returns the engine's health.
func (l *Leader) Health() Health {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.health
}

// Run drives the engine: it cuts objects when they are due, uploads them,
// publishes their entries, publishes new leaderships' markers and
// republishes, refreshes epoch markers and collects garbage. It returns
// when ctx ends, after its goroutines have stopped, and releases the
// engine's resources: call it once. Data not yet uploaded is dropped from
// the engine but remains in the broker's log.
func (l *Leader) Run(ctx context.Context) error {
	if !l.ran.CompareAndSwap(false, true) {
		return fmt.Errorf("walstore: leader: Run called twice: %w", ErrStopped)
	}
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		l.mu.Lock()
		l.stopped = true
		// Wake Append and WaitDurable callers to find the engine stopped.
		// The channels are replaced, not left closed: a Resign after Run
		// closes them again.
		l.releaseLocked(0)
		l.durableAdvancedLocked()
		l.mu.Unlock()
		l.release()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.publishLoop(ctx)
	}()
	markersDue := l.cfg.Clock.Now().Add(l.cfg.MarkerRefresh)
	gcDue := l.cfg.Clock.Now().Add(l.cfg.GCInterval)
	for {
		now := l.cfg.Clock.Now()
		l.startChores(ctx, &wg)
		if !now.Before(markersDue) {
			l.refreshMarkers(ctx)
			markersDue = now.Add(l.cfg.MarkerRefresh)
		}
		if !now.Before(gcDue) {
			if _, err := l.CollectGarbage(ctx); err != nil && ctx.Err() == nil {
				l.cfg.Logger.Warn("activetier: garbage collection failed", "err", err)
			}
			gcDue = now.Add(l.cfg.GCInterval)
		}
		wait := min(markersDue.Sub(now), gcDue.Sub(now))
		l.mu.Lock()
		if l.healthLocked(now) {
			l.mu.Unlock()
			l.report()
			l.mu.Lock()
		}
		if len(l.ops) > 0 {
			// Look again when the oldest operation may cross DegradedAfter.
			wait = min(wait, l.cfg.DegradedAfter/4)
		}
		due := l.builder.Due(now)
		if p := l.builder.Stats(); p.Batches > 0 {
			wait = min(wait, p.Oldest.Add(l.cfg.Interval).Sub(now))
		}
		l.mu.Unlock()
		if due {
			select {
			case l.slots <- struct{}{}:
				// A slot is free: cut now. The slot is handed to the
				// first upload of this cut.
				l.cut(ctx, &wg)
				continue
			case <-ctx.Done():
				return nil
			case <-l.cfg.Clock.After(max(wait, time.Millisecond)):
				continue // uploads hang: keep judging health and running chores
			case <-l.flushCh:
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.flushCh:
		case <-l.cfg.Clock.After(max(wait, time.Millisecond)):
		}
	}
}

// release frees the encoder and builders.
func (l *Leader) release() {
	l.mgr.Close()
	l.builder.Close()
	l.spare.Close()
}

// startChores starts the markers-and-republish work of new leaderships.
func (l *Leader) startChores(ctx context.Context, wg *sync.WaitGroup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for tp, ld := range l.leading {
		c := ld.chore
		if c == nil || c.started {
			continue
		}
		c.started = true
		cctx, cancel := context.WithCancel(ctx)
		c.cancel = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			l.runChore(cctx, tp, c)
		}()
	}
}

// runChore publishes the markers of c's leadership and republishes from
// c.from, retrying until done or the leadership ends.
func (l *Leader) runChore(ctx context.Context, tp metadata.TopicPartition, c *chore) {
	markers := false
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := error(nil)
		if !markers {
			if err = l.publishMarkers(ctx, tp, c.epoch); err == nil {
				markers = true
			}
		}
		if err == nil && c.from >= 0 {
			err = l.republish(ctx, tp, c.gen, c.epoch, &c.from)
		}
		if err == nil {
			l.mu.Lock()
			if ld := l.leading[tp]; ld != nil && ld.chore == c {
				ld.chore = nil
			}
			l.mu.Unlock()
			return
		}
		if ctx.Err() != nil {
			return
		}
		l.cfg.Logger.Warn("activetier: taking up leadership failed; retrying", "partition", tp.String(), "epoch", c.epoch, "err", err)
		if sleep(ctx, l.cfg.Clock, l.jitter.delay(l.cfg.Backoff, attempt)) != nil {
			return
		}
	}
}

// cut encodes the builder's pending data into objects and starts their
// uploads. The caller holds one upload slot, given to the first object.
func (l *Leader) cut(ctx context.Context, wg *sync.WaitGroup) {
	// Swap in the empty builder and encode the full one outside the lock,
	// so that Append never waits for an object to be encoded.
	l.mu.Lock()
	full := l.builder
	l.builder, l.spare = l.spare, full
	l.mu.Unlock()
	appendedAt := full.Stats().Oldest
	objs, err := full.Cut(nil)
	if err != nil {
		// The builder validated every batch on Add, so this is a bug in
		// the engine or the combiner; the data stays in the builder, to be
		// tried again, and the error is said loudly.
		<-l.slots
		l.cfg.Logger.Error("activetier: cutting an object failed", "err", err)
		return
	}
	l.mu.Lock()
	acc := l.accepted[full]
	delete(l.accepted, full) // Cut took all of full's pending data
	ups := make([]*upload, 0, len(objs))
	for _, o := range objs {
		u := &upload{obj: o, appendedAt: appendedAt, gens: make([]uint64, len(o.Sections))}
		for i, s := range o.Sections {
			u.gens[i] = acc[s.Partition]
			u.bytes += int(s.UncompressedSize)
		}
		l.queue = append(l.queue, u)
		ups = append(ups, u)
	}
	l.stats.inflight += len(ups)
	l.mu.Unlock()
	if len(ups) == 0 {
		<-l.slots
		return
	}
	for i, u := range ups {
		wg.Add(1)
		go func(haveSlot bool) {
			defer wg.Done()
			if !haveSlot {
				select {
				case l.slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
			defer func() { <-l.slots }()
			l.upload(ctx, u)
		}(i == 0)
	}
}

// begin registers an operation for health; end removes it, saying
// whether it succeeded.
func (l *Leader) begin(what string) *operation {
	op := &operation{what: what, start: l.cfg.Clock.Now()}
	l.mu.Lock()
	l.ops[op] = struct{}{}
	l.mu.Unlock()
	return op
}

func (l *Leader) end(op *operation, ok bool) {
	l.mu.Lock()
	delete(l.ops, op)
	if ok {
		if ch := l.okCh[op.what]; ch != nil {
			close(ch)
			delete(l.okCh, op.what)
		}
	}
	changed := l.healthLocked(l.cfg.Clock.Now())
	l.mu.Unlock()
	if changed {
		l.report()
	}
}

// failed records a failed attempt of op.
func (l *Leader) failed(op *operation, err error) {
	l.mu.Lock()
	op.err = err
	changed := l.healthLocked(l.cfg.Clock.Now())
	l.mu.Unlock()
	if changed {
		l.report()
	}
}

// retryAfter waits out the backoff before attempt n+1 of an operation of
// kind what, or less: a success of another operation of its kind means the
// dependency answers again, and the retry goes at once. Without that, an
// operation asleep in its backoff when the dependency recovers would keep
// the engine degraded, or degrade it anew, after every other succeeded.
func (l *Leader) retryAfter(ctx context.Context, what string, n int) error {
	l.mu.Lock()
	ch := l.okCh[what]
	if ch == nil {
		ch = make(chan struct{})
		l.okCh[what] = ch
	}
	l.mu.Unlock()
	d := l.jitter.delay(l.cfg.Backoff, n)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ch:
		return nil
	case <-l.cfg.Clock.After(d):
		return nil
	}
}

// attempt runs one attempt of a store or log call with RequestTimeout. An
// attempt that runs out while ctx is live fails with ErrUnavailable.
func attempt[T any](ctx context.Context, timeout time.Duration, what string, fn func(context.Context) (T, error)) (T, error) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := fn(actx)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		err = fmt.Errorf("%s: %w: no answer within %v (%w)", what, ErrUnavailable, timeout, err)
	}
	return v, err
}

// upload stores u's object, retrying with backoff until it succeeds or ctx
// ends. Failures are never dropped: they keep the data queued, count against
// the buffer, and degrade the engine after DegradedAfter.
func (l *Leader) upload(ctx context.Context, u *upload) {
	op := l.begin("upload")
	ok := false
	defer func() { l.end(op, ok) }()
	start := l.cfg.Clock.Now()
	for n := 0; ; n++ {
		ref, err := attempt(ctx, l.cfg.RequestTimeout, "walstore: upload", func(ctx context.Context) (metadata.ObjectRef, error) {
			return l.mgr.put(ctx, u.obj.Data)
		})
		if err == nil {
			l.uploadLat.observe(l.cfg.Clock.Now().Sub(start))
			l.mu.Lock()
			u.ref, u.uploaded = ref, true
			l.stats.objectBytes += uint64(len(u.obj.Data))
			u.obj.Data = nil
			l.stats.inflight--
			l.stats.objects++
			l.mu.Unlock()
			notify(l.publishCh)
			ok = true
			return
		}
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		l.stats.uploadRetries++
		l.mu.Unlock()
		l.failed(op, err)
		l.cfg.Logger.Warn("activetier: upload failed; retrying", "attempt", n+1, "err", err)
		if l.retryAfter(ctx, op.what, n) != nil {
			return
		}
	}
}

// healthLocked recomputes the health at now and says whether Degraded
// changed. The engine is degraded while some upload or publish has gone
// DegradedAfter without succeeding: data that cannot be uploaded, or
// uploaded data followers cannot learn of, both mean the broker should
// replicate the ordinary way.
func (l *Leader) healthLocked(now time.Time) bool {
	var oldest *operation
	for op := range l.ops {
		if oldest == nil || op.start.Before(oldest.start) {
			oldest = op
		}
	}
	for op := range l.ops {
		// A store that refuses for good will not answer otherwise later:
		// the broker hears of it at once, and why.
		if errors.Is(op.err, ErrPermanent) && (oldest == nil || !errors.Is(oldest.err, ErrPermanent) || op.start.Before(oldest.start)) {
			oldest = op
		}
	}
	before := l.health.Degraded
	l.health = Health{}
	if oldest != nil && (now.Sub(oldest.start) >= l.cfg.DegradedAfter || errors.Is(oldest.err, ErrPermanent)) {
		l.health = Health{Degraded: true, Since: oldest.start, Err: oldest.err}
		if oldest.err == nil {
			l.health.Err = fmt.Errorf("walstore: %s: %w: no answer for %v", oldest.what, ErrUnavailable, now.Sub(oldest.start))
		}
	}
	return l.health.Degraded != before
}

// report calls OnHealth, outside the engine's lock, if the health it last
// reported is no longer the current one. Reports are made one at a time
// and always of the current health, so that two goroutines that saw the
// health change never deliver their news out of order: the last report
// is always the engine's health.
func (l *Leader) report() {
	l.reportMu.Lock()
	defer l.reportMu.Unlock()
	l.mu.Lock()
	h := l.health
	changed := h.Degraded != l.reported
	l.reported = h.Degraded
	l.mu.Unlock()
	if changed && l.cfg.OnHealth != nil {
		l.cfg.OnHealth(h)
	}
}

// publishLoop publishes uploaded objects' entries. One goroutine publishes
// so that the metadata log sees each partition's entries in offset order.
func (l *Leader) publishLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.publishCh:
		}
		for _, u := range l.publishable() {
			if err := l.publishUpload(ctx, u); err != nil && ctx.Err() != nil {
				return
			}
		}
	}
}

// publishable returns, in cut order, the uploaded objects none of whose
// partitions has data in an earlier object still unpublished. That is what
// keeps each partition's entries in offset order when uploads finish out of
// order, without making unrelated partitions wait.
func (l *Leader) publishable() []*upload {
	l.mu.Lock()
	defer l.mu.Unlock()
	blocked := make(map[metadata.TopicPartition]bool)
	var ready []*upload
	for _, u := range l.queue {
		ok := u.uploaded && !u.publishing
		for _, s := range u.obj.Sections {
			if blocked[s.Partition] {
				ok = false
			}
		}
		if ok {
			u.publishing = true
			ready = append(ready, u)
			continue
		}
		for _, s := range u.obj.Sections {
			blocked[s.Partition] = true
		}
	}
	return ready
}

// publishUpload publishes the entries of u's sections whose leadership is
// still on, at its current epoch. An entry the metadata codec rejects (an
// engine bug) fails its own partition's leadership, not the others'.
func (l *Leader) publishUpload(ctx context.Context, u *upload) error {
	entries := make([]metadata.Entry, 0, len(u.obj.Sections))
	sections := make([]combiner.SectionInfo, 0, len(u.obj.Sections))
	followers := make([][]int32, 0, len(u.obj.Sections))
	gens := make([]uint64, 0, len(u.obj.Sections))
	l.mu.Lock()
	for i, s := range u.obj.Sections {
		ld := l.leading[s.Partition]
		if ld == nil || ld.gen != u.gens[i] {
			// The leadership that accepted the data is over: it is no
			// longer this broker's to publish. Followers would fence it.
			l.stats.fenced++
			continue
		}
		e := s.Entry(u.ref, ld.epoch, l.cfg.BrokerID)
		if err := e.Validate(); err != nil {
			ld.failed = fmt.Errorf("walstore: %s: entry for offsets %d-%d cannot be published: %w", s.Partition, s.FirstOffset, s.LastOffset, err)
			l.cfg.Logger.Error("activetier: withholding an entry the metadata codec rejects", "partition", s.Partition.String(), "err", err)
			l.durableAdvancedLocked()
			continue
		}
		entries = append(entries, e)
		sections = append(sections, s)
		followers = append(followers, u.obj.Followers[i])
		gens = append(gens, ld.gen)
	}
	l.mu.Unlock()
	if len(entries) == 0 {
		// Every section was withheld: no entry names the object, which
		// is left for Sweep. Publishing nothing is not an error.
		l.mu.Lock()
		l.removeLocked(u)
		l.mu.Unlock()
		return nil
	}
	offsets, err := l.publish(ctx, metadata.Message{Object: u.ref, WriterBrokerID: l.cfg.BrokerID, Entries: entries})
	if err != nil {
		if ctx.Err() == nil {
			l.cfg.Logger.Error("activetier: publishing an object's entries failed", "object", u.ref.String(), "err", err)
		}
		l.mu.Lock()
		l.removeLocked(u)
		for _, e := range entries {
			if ld := l.leading[e.Partition]; ld != nil && ld.failed == nil {
				ld.failed = err
			}
		}
		l.durableAdvancedLocked()
		l.mu.Unlock()
		return err
	}
	l.publishLat.observe(l.cfg.Clock.Now().Sub(u.appendedAt))
	l.gc.track(u.ref, sections, followers, offsets)
	l.mu.Lock()
	l.removeLocked(u)
	for i, e := range entries {
		if ld := l.leading[e.Partition]; ld != nil && ld.gen == gens[i] {
			ld.published(e.FirstOffset, e.LastOffset+1)
		}
	}
	l.durableAdvancedLocked()
	l.mu.Unlock()
	return nil
}

// removeLocked takes u off the queue, published or withheld, and frees its
// buffer space: space is held until then, not only until the upload, so
// that a metadata log that stops accepting pushes back on Append instead
// of letting the queue of stored, unpublished objects grow without bound.
func (l *Leader) removeLocked(u *upload) {
	for i, q := range l.queue {
		if q == u {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			l.releaseLocked(u.bytes)
			return
		}
	}
}

// publish routes msg to the metadata partitions of the followers of its
// entries' and markers' partitions and appends one message to each,
// retrying until it succeeds or ctx ends. It returns the metadata offset of
// each message by metadata partition.
func (l *Leader) publish(ctx context.Context, msg metadata.Message) (map[int32]int64, error) {
	n := l.cfg.Log.Partitions()
	part, err := metadata.NewPartitioner(n)
	if err != nil {
		return nil, fmt.Errorf("walstore: %w", &DependencyError{Dependency: "metadata.Log.Partitions", Err: fmt.Errorf("%w: %w", ErrContractViolation, err)})
	}
	routed, err := part.Split(&msg, l.followersOf)
	if err != nil {
		return nil, fmt.Errorf("walstore: routing metadata: %w", err)
	}
	offsets := make(map[int32]int64, len(routed))
	var buf []byte
	for _, r := range routed {
		buf, err = metadata.AppendMessage(buf[:0], r.Message)
		if err != nil {
			return nil, fmt.Errorf("walstore: encoding metadata: %w", err)
		}
		op := l.begin("metadata publish")
		for n := 0; ; n++ {
			off, err := attempt(ctx, l.cfg.RequestTimeout, "walstore: metadata publish", func(ctx context.Context) (int64, error) {
				return l.cfg.Log.Append(ctx, r.Partition, buf)
			})
			if err == nil && off < 0 {
				err = &DependencyError{Dependency: "metadata.Log.Append", Err: fmt.Errorf("%w: negative offset %d", ErrContractViolation, off)}
			}
			if err == nil {
				offsets[r.Partition] = off
				break
			}
			if ctx.Err() != nil || errors.Is(err, metadata.ErrClosed) {
				l.end(op, false)
				return nil, fmt.Errorf("walstore: publishing to metadata partition %d: %w", r.Partition, err)
			}
			l.mu.Lock()
			l.stats.publishRetries++
			l.mu.Unlock()
			l.failed(op, err)
			l.cfg.Logger.Warn("activetier: publishing metadata failed; retrying", "partition", r.Partition, "err", err)
			if err := l.retryAfter(ctx, op.what, n); err != nil {
				l.end(op, false)
				return nil, err
			}
		}
		l.end(op, true)
	}
	return offsets, nil
}

func (l *Leader) refreshMarkers(ctx context.Context) {
	l.mu.Lock()
	led := make(map[metadata.TopicPartition]int32, len(l.leading))
	for tp, ld := range l.leading {
		if ld.chore == nil { // a chore publishes them itself
			led[tp] = ld.epoch
		}
	}
	l.mu.Unlock()
	for _, tp := range slices.SortedFunc(maps.Keys(led), compareTP) {
		if err := l.publishMarkers(ctx, tp, led[tp]); err != nil && ctx.Err() == nil {
			l.cfg.Logger.Warn("activetier: refreshing epoch markers failed", "partition", tp.String(), "err", err)
		}
	}
}

// Republish copies tp's local log from offset from to its end into this
// broker's own bucket and publishes it at the current epoch, for followers
// that could not read the previous leader's objects (an AZ outage) or that
// start empty (a reassignment). Records keep their original epochs; the
// entries name this leader's epoch as publisher. It returns when all of it
// is published, or ctx ends, or the leadership does.
func (l *Leader) Republish(ctx context.Context, tp metadata.TopicPartition, from int64) error {
	l.mu.Lock()
	stopped := l.stopped
	l.mu.Unlock()
	if stopped {
		return ErrStopped
	}
	epoch, gen, ok := l.leaderEpoch(tp)
	if !ok {
		return fmt.Errorf("walstore: republish %s: %w", tp, ErrNotLeader)
	}
	if from < 0 {
		return fmt.Errorf("walstore: republish %s: negative offset %d", tp, from)
	}
	return l.republish(ctx, tp, gen, epoch, &from)
}

// republish copies tp's log from *from to its end, advancing *from as it
// goes, for leadership gen at epoch.
func (l *Leader) republish(ctx context.Context, tp metadata.TopicPartition, gen uint64, epoch int32, from *int64) error {
	end, err := l.cfg.Local.EndOffset(tp)
	if err != nil {
		return fmt.Errorf("walstore: republish %s: %w", tp, &DependencyError{Dependency: "LocalLog.EndOffset", Err: err})
	}
	for *from < end {
		batches, err := l.cfg.Local.Read(ctx, tp, *from, l.cfg.ObjectBytes)
		if err != nil {
			return fmt.Errorf("walstore: republish %s from %d: %w", tp, *from, &DependencyError{Dependency: "LocalLog.Read", Err: err})
		}
		if err := checkRead(batches, *from, end); err != nil {
			return fmt.Errorf("walstore: republish %s from %d: %w", tp, *from, err)
		}
		// What was appended after the republish began is published the
		// ordinary way.
		batches = slices.DeleteFunc(batches, func(b combiner.Batch) bool { return b.FirstOffset >= end })
		if len(batches) == 0 {
			return nil
		}
		var inputs []CopyInput
		for _, b := range batches {
			if n := len(inputs); n > 0 && inputs[n-1].Batches[0].Epoch == b.Epoch {
				inputs[n-1].Batches = append(inputs[n-1].Batches, b)
				continue
			}
			inputs = append(inputs, CopyInput{Partition: tp, PublisherEpoch: epoch, Batches: []combiner.Batch{b}})
		}
		entries, err := l.copyWithRetry(ctx, inputs)
		if err != nil {
			return fmt.Errorf("walstore: republish %s from %d: %w", tp, *from, err)
		}
		if _, g, ok := l.leaderEpoch(tp); !ok || g != gen {
			return fmt.Errorf("walstore: republish %s: %w", tp, ErrNotLeader)
		}
		offsets, err := l.publish(ctx, metadata.Message{Object: entries[0].Object, WriterBrokerID: l.cfg.BrokerID, Entries: entries})
		if err != nil {
			return err
		}
		sections := make([]combiner.SectionInfo, len(entries))
		followers := make([][]int32, len(entries))
		for i, e := range entries {
			sections[i] = combiner.SectionOf(e)
			followers[i] = l.followersOf(tp)
		}
		l.gc.track(entries[0].Object, sections, followers, offsets)
		next := batches[len(batches)-1].LastOffset + 1
		l.mu.Lock()
		l.stats.republished += uint64(len(entries))
		if ld := l.leading[tp]; ld != nil && ld.gen == gen && ld.published(*from, next) {
			l.durableAdvancedLocked()
		}
		l.mu.Unlock()
		*from = next
	}
	return nil
}

// checkRead checks what LocalLog.Read returned for offset from of a log
// ending at end: whole batches in offset order, the first holding from or
// starting above it (records below the log start are gone). Batches past
// end are records appended since; the caller leaves them out.
func checkRead(batches []combiner.Batch, from, end int64) error {
	bad := func(format string, args ...any) error {
		return &DependencyError{Dependency: "LocalLog.Read", Err: fmt.Errorf("%w: "+format, append([]any{ErrContractViolation}, args...)...)}
	}
	if len(batches) == 0 {
		return bad("nothing at %d below the end offset %d", from, end)
	}
	if batches[0].LastOffset < from {
		return bad("first batch %d-%d ends below %d", batches[0].FirstOffset, batches[0].LastOffset, from)
	}
	for i, b := range batches {
		switch {
		case b.FirstOffset < 0 || b.LastOffset < b.FirstOffset || b.Epoch < 0 || len(b.Data) == 0:
			return bad("invalid batch (epoch %d, offsets %d-%d, %d bytes)", b.Epoch, b.FirstOffset, b.LastOffset, len(b.Data))
		case i > 0 && (b.FirstOffset != batches[i-1].LastOffset+1 || b.Epoch < batches[i-1].Epoch):
			return bad("batch %d-%d (epoch %d) does not continue %d-%d (epoch %d)", b.FirstOffset, b.LastOffset, b.Epoch,
				batches[i-1].FirstOffset, batches[i-1].LastOffset, batches[i-1].Epoch)
		}
	}
	return nil
}

func (l *Leader) copyWithRetry(ctx context.Context, inputs []CopyInput) ([]metadata.Entry, error) {
	op := l.begin("republish upload")
	ok := false
	defer func() { l.end(op, ok) }()
	for n := 0; ; n++ {
		entries, err := attempt(ctx, l.cfg.RequestTimeout, "walstore: republish upload", func(ctx context.Context) ([]metadata.Entry, error) {
			return l.mgr.Copy(ctx, inputs)
		})
		if err == nil || !errors.Is(err, ErrUnavailable) {
			ok = err == nil
			return entries, err
		}
		l.mu.Lock()
		l.stats.uploadRetries++
		l.mu.Unlock()
		l.failed(op, err)
		if err := l.retryAfter(ctx, op.what, n); err != nil {
			return nil, err
		}
	}
}

// compareTP orders partitions by topic name, topic ID and number, so that
// work over many partitions happens in the same order on every run.
func compareTP(a, b metadata.TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	if c := slices.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}
