package walstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/activetier/activetier/combiner"
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

// EpochView is the broker's current view of partition leadership. The
// leader engine asks it before publishing, so that a broker that has lost
// leadership stops publishing as soon as it knows.
type EpochView interface {
	// LeaderEpoch returns the epoch at which this broker leads tp, and
	// false if it does not lead tp.
	LeaderEpoch(tp metadata.TopicPartition) (epoch int32, leader bool)
}

// Placement names each partition's follower brokers (not the leader).
type Placement func(tp metadata.TopicPartition) []int32

// LeaderConfig configures a Leader. Zero durations and sizes mean the
// documented default; negative ones are rejected.
type LeaderConfig struct {
	// BrokerID is this broker's id. Must be >= 0.
	BrokerID int32
	// Store writes to this broker's AZ's bucket. Required.
	Store ObjectStore
	// Log carries the metadata. Required.
	Log metadata.Log
	// Followers is the placement. Required.
	Followers Placement
	// Local is read when republishing after a failover. Required.
	Local LocalLog
	// View is consulted before each publish; nil means the engine's own
	// record of BecomeLeader and Resign calls is the view.
	View EpochView
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
	// BufferBytes bounds the batch bytes appended but not yet uploaded.
	// Default 64 MiB.
	BufferBytes int
	// Overflow is the policy when BufferBytes is reached. Default Block.
	Overflow Overflow
	// MaxInflight bounds concurrent uploads. Default 4.
	MaxInflight int
	// Backoff paces retries of uploads and publishes.
	Backoff Backoff
	// DegradedAfter is how long uploads or publishes may keep failing
	// before the engine reports itself degraded (the broker's cue to fall back to ordinary
	// replication). Default 5s.
	DegradedAfter time.Duration
	// OnHealth, if set, is called when the engine becomes degraded or
	// recovers: when uploads, or metadata publishes, have kept failing for
	// DegradedAfter, and when they succeed again. It must not block.
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
	case c.Followers == nil:
		return errors.New("walstore: LeaderConfig.Followers is required")
	case c.Local == nil:
		return errors.New("walstore: LeaderConfig.Local is required")
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
		{"Backoff.Initial", int64(c.Backoff.Initial)}, {"Backoff.Max", int64(c.Backoff.Max)},
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

// Health is the leader engine's upload health.
type Health struct {
	// Degraded is true while uploads have kept failing for at least
	// DegradedAfter: the broker should replicate this data the ordinary
	// way until it clears.
	Degraded bool
	// Since is when the current run of failures began (zero if healthy).
	Since time.Time
	// Err is the latest upload error.
	Err error
}

// Leader is the leader-side engine: it buffers the batches the broker
// appends, cuts them into combined objects, uploads several at a time,
// and publishes each partition's entries in offset order once their object
// is stored. Create it with NewLeader and drive it with Run.
type Leader struct {
	cfg    LeaderConfig
	mgr    *Manager
	jitter *jitter
	gc     *collector

	mu          sync.Mutex
	builder     *combiner.Builder // where Append adds; guarded by mu
	spare       *combiner.Builder // empty, or being cut by Run outside mu
	leading     map[metadata.TopicPartition]int32
	accepted    map[*combiner.Builder]map[metadata.TopicPartition][]acceptMark // leaderships pending data was appended under
	buffered    int
	space       chan struct{} // closed when buffered bytes drop; then replaced
	queue       []*upload     // cut, not yet published, in cut order
	durable     map[metadata.TopicPartition]int64
	catchUp     map[metadata.TopicPartition]republishMark // BecomeLeader republishes not yet stored
	durableCh   chan struct{}                             // closed when any durable offset advances; then replaced
	health      Health
	uploadFail  failure
	publishFail failure
	stopped     bool
	stats       leaderCounters

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

// acceptMark says that a partition's pending data from offset from on was
// appended while the engine led the partition at epoch.
type acceptMark struct {
	from  int64
	epoch int32
}

// acceptedEpoch returns the epoch of the leadership under which the pending
// data in [first, last] was appended, or -1 if marks do not cover it; the
// oldest, should the range hold data of two (a section has one record
// epoch, so only batches of an old record epoch appended after a new
// BecomeLeader could make that).
func acceptedEpoch(marks []acceptMark, first, last int64) int32 {
	epoch := int32(-1)
	for i, m := range marks {
		if m.from > last || i+1 < len(marks) && marks[i+1].from <= first {
			continue
		}
		if epoch < 0 || m.epoch < epoch {
			epoch = m.epoch
		}
	}
	return epoch
}

// republishMark is how far the republish a BecomeLeader at epoch started
// has got: the log below upTo is stored (or on every follower).
type republishMark struct {
	epoch int32
	upTo  int64
}

// upload is one cut object on its way to being stored and published.
type upload struct {
	obj        combiner.Object
	pubEpochs  []int32 // per section: the epoch of the leadership that accepted its data
	bytes      int     // buffer bytes this object accounts for
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
	var builders [2]*combiner.Builder
	for i := range builders {
		builders[i], err = combiner.NewBuilder(combiner.BuilderConfig{
			Interval:      cfg.Interval,
			TargetBytes:   cfg.ObjectBytes,
			MaxPartitions: cfg.MaxPartitions,
			Encoder:       combiner.EncoderOptions{Codec: cfg.Codec},
			Followers:     cfg.Followers,
		})
		if err != nil {
			mgr.Close()
			if builders[0] != nil {
				builders[0].Close()
			}
			return nil, fmt.Errorf("walstore: leader: %w", err)
		}
	}
	l := &Leader{
		cfg:       cfg,
		mgr:       mgr,
		jitter:    newJitter(cfg.Seed ^ 0x1eade7),
		builder:   builders[0],
		spare:     builders[1],
		leading:   make(map[metadata.TopicPartition]int32),
		accepted:  make(map[*combiner.Builder]map[metadata.TopicPartition][]acceptMark),
		space:     make(chan struct{}),
		durable:   make(map[metadata.TopicPartition]int64),
		catchUp:   make(map[metadata.TopicPartition]republishMark),
		durableCh: make(chan struct{}),
		flushCh:   make(chan struct{}, 1),
		publishCh: make(chan struct{}, 1),
		slots:     make(chan struct{}, cfg.MaxInflight),
	}
	l.gc = newCollector(l)
	return l, nil
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// BecomeLeader tells the engine this broker now leads tp at epoch, with the
// local log's leader-epoch cache already holding that epoch (as Kafka's
// makeLeader does). It publishes the epoch-start markers of tp's lineage to
// every follower, and then, if republishFrom >= 0, republishes the local log
// from that offset (see Republish). It returns when the markers are
// published and the log republished, or ctx ends. At a new epoch the durable offset
// starts over (DurableOffset is -1 until this leadership publishes), whatever
// an earlier leadership of tp by this engine made durable; while the
// republish is under way it does not pass how far the republish has got,
// since the log above that is on this broker only.
func (l *Leader) BecomeLeader(ctx context.Context, tp metadata.TopicPartition, epoch int32, republishFrom int64) error {
	if epoch < 0 {
		return fmt.Errorf("walstore: BecomeLeader %s: negative epoch %d", tp, epoch)
	}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return ErrStopped
	}
	if prev, ok := l.leading[tp]; !ok || prev != epoch {
		// A new leadership has published nothing yet. A durable offset
		// left from an earlier one describes a log that has since been
		// a follower's, possibly truncated and rewritten: keeping it
		// would acknowledge records of this epoch never uploaded.
		l.durable[tp] = -1
		l.gc.forgetApplied(tp)
	}
	l.leading[tp] = epoch
	delete(l.catchUp, tp)
	if republishFrom >= 0 {
		// Until the log from republishFrom is stored again, this broker
		// alone holds it: nothing above it is durable yet.
		l.catchUp[tp] = republishMark{epoch: epoch, upTo: republishFrom}
	}
	l.mu.Unlock()
	if err := l.publishMarkers(ctx, tp, epoch); err != nil {
		return err
	}
	if republishFrom < 0 {
		return nil
	}
	if err := l.Republish(ctx, tp, republishFrom); err != nil {
		return err
	}
	l.mu.Lock()
	if m, ok := l.catchUp[tp]; ok && m.epoch == epoch {
		delete(l.catchUp, tp)
		l.durableAdvancedLocked()
	}
	l.mu.Unlock()
	return nil
}

// Resign tells the engine this broker no longer leads tp. Data of tp not
// yet published is withheld from publication.
func (l *Leader) Resign(tp metadata.TopicPartition) {
	l.mu.Lock()
	delete(l.leading, tp)
	l.mu.Unlock()
}

// currentEpoch is the epoch at which this broker leads tp right now.
func (l *Leader) currentEpoch(tp metadata.TopicPartition) (int32, bool) {
	if l.cfg.View != nil {
		return l.cfg.View.LeaderEpoch(tp)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.leading[tp]
	return e, ok
}

// markersFor returns tp's lineage as markers, from the local log's epoch
// cache, ensuring the current epoch is among them.
func (l *Leader) markersFor(tp metadata.TopicPartition, epoch int32) ([]metadata.EpochStart, error) {
	epochs, err := l.cfg.Local.Epochs(tp)
	if err != nil {
		return nil, fmt.Errorf("walstore: epochs of %s: %w", tp, err)
	}
	markers := make([]metadata.EpochStart, 0, len(epochs)+1)
	for _, e := range epochs {
		markers = append(markers, metadata.EpochStart{Partition: tp, Epoch: e.Epoch, StartOffset: e.StartOffset, LeaderBrokerID: l.cfg.BrokerID})
	}
	if len(epochs) == 0 || epochs[len(epochs)-1].Epoch < epoch {
		leo, err := l.cfg.Local.EndOffset(tp)
		if err != nil {
			return nil, fmt.Errorf("walstore: end offset of %s: %w", tp, err)
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

// Append queues one batch of tp for upload. The batch's Data must not be
// modified until the engine has uploaded it (WaitDurable tells when).
// Batches of a partition must be appended in offset order. When the buffer
// is full, Append blocks (Overflow Block) until space frees or ctx ends, or
// returns ErrBufferFull (Overflow Reject).
func (l *Leader) Append(ctx context.Context, tp metadata.TopicPartition, b combiner.Batch) error {
	n := len(b.Data)
	if n > l.cfg.BufferBytes {
		return fmt.Errorf("walstore: append to %s: batch of %d bytes exceeds BufferBytes %d: %w", tp, n, l.cfg.BufferBytes, ErrBufferFull)
	}
	for {
		l.mu.Lock()
		if l.stopped {
			l.mu.Unlock()
			return ErrStopped
		}
		epoch, ok := l.leading[tp]
		if !ok {
			l.mu.Unlock()
			return fmt.Errorf("walstore: append to %s: %w", tp, ErrNotLeader)
		}
		if b.Epoch > epoch {
			l.mu.Unlock()
			return fmt.Errorf("walstore: append to %s: batch epoch %d is newer than leader epoch %d", tp, b.Epoch, epoch)
		}
		if l.buffered+n <= l.cfg.BufferBytes {
			err := l.addLocked(tp, b, epoch)
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

func (l *Leader) addLocked(tp metadata.TopicPartition, b combiner.Batch, epoch int32) error {
	now := l.cfg.Clock.Now()
	first := l.builder.Stats().Batches == 0
	if err := l.builder.Add(tp, b, now); err != nil {
		return fmt.Errorf("walstore: append to %s: %w", tp, err)
	}
	acc := l.accepted[l.builder]
	if acc == nil {
		acc = make(map[metadata.TopicPartition][]acceptMark)
		l.accepted[l.builder] = acc
	}
	if m := acc[tp]; len(m) == 0 || m[len(m)-1].epoch != epoch {
		acc[tp] = append(m, acceptMark{from: b.FirstOffset, epoch: epoch})
	}
	l.buffered += len(b.Data)
	l.stats.appends++
	l.stats.appendedBytes += uint64(len(b.Data))
	if first || l.builder.Due(now) {
		// Wake Run: to cut now, or to time the first batch's interval.
		notify(l.flushCh)
	}
	return nil
}

// DurableOffset returns the offset below which tp's appended data is stored
// in object storage and its metadata published, or -1 if none is.
func (l *Leader) DurableOffset(tp metadata.TopicPartition) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durableLocked(tp)
}

// durableLocked is tp's durable offset: what this leadership published,
// but not past a republish still under way.
func (l *Leader) durableLocked(tp metadata.TopicPartition) int64 {
	d, ok := l.durable[tp]
	if !ok {
		return -1
	}
	if m, ok := l.catchUp[tp]; ok && d > m.upTo {
		return m.upTo
	}
	return d
}

// durableAdvancedLocked wakes WaitDurable callers.
func (l *Leader) durableAdvancedLocked() {
	close(l.durableCh)
	l.durableCh = make(chan struct{})
}

// WaitDurable blocks until tp's data up to and including offset is stored
// and published (the acks-on-upload mode), or ctx ends.
func (l *Leader) WaitDurable(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	for {
		l.mu.Lock()
		if l.durableLocked(tp) > offset {
			l.mu.Unlock()
			return nil
		}
		if l.stopped {
			l.mu.Unlock()
			return ErrStopped
		}
		ch := l.durableCh
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("walstore: waiting for %s offset %d to be durable: %w", tp, offset, ctx.Err())
		case <-ch:
		}
	}
}

// Health returns the engine's upload health.
func (l *Leader) Health() Health {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.health
}

// Run drives the engine: it cuts objects when they are due, uploads them,
// publishes their entries, refreshes epoch markers and collects garbage. It
// returns when ctx ends, after its goroutines have stopped, and releases
// the engine's resources: call it once. Data not yet uploaded is dropped
// from the engine but remains in the broker's log.
func (l *Leader) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		l.mu.Lock()
		l.stopped = true
		close(l.space)
		close(l.durableCh)
		l.mu.Unlock()
		l.mgr.Close()
		l.builder.Close()
		l.spare.Close()
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
		u := &upload{obj: o, appendedAt: appendedAt, pubEpochs: make([]int32, len(o.Sections))}
		for i, s := range o.Sections {
			// The leadership that accepted the data publishes it, or
			// nobody does: data left from an earlier leadership stays
			// withheld even if the engine leads tp again by now, since
			// the log may have been truncated below it meanwhile.
			u.pubEpochs[i] = acceptedEpoch(acc[s.Partition], s.FirstOffset, s.LastOffset)
			u.bytes += int(s.UncompressedSize)
		}
		l.queue = append(l.queue, u)
		ups = append(ups, u)
	}
	l.stats.inflight += len(ups)
	l.mu.Unlock()
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

// upload stores u's object, retrying with backoff until it succeeds or ctx
// ends. Failures are never dropped: they keep the data queued, count against
// the buffer, and mark the engine degraded after DegradedAfter.
func (l *Leader) upload(ctx context.Context, u *upload) {
	start := l.cfg.Clock.Now()
	for attempt := 0; ; attempt++ {
		ref, err := l.mgr.put(ctx, u.obj.Data)
		if err == nil {
			l.uploadLat.observe(l.cfg.Clock.Now().Sub(start))
			l.mu.Lock()
			u.ref, u.uploaded = ref, true
			l.stats.objectBytes += uint64(len(u.obj.Data))
			u.obj.Data = nil
			l.buffered -= u.bytes
			close(l.space)
			l.space = make(chan struct{})
			l.stats.inflight--
			l.stats.objects++
			h, changed := l.recordLocked(false, nil)
			l.mu.Unlock()
			l.report(h, changed)
			notify(l.publishCh)
			return
		}
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		l.stats.uploadRetries++
		h, changed := l.recordLocked(false, err)
		l.mu.Unlock()
		l.report(h, changed)
		l.cfg.Logger.Warn("activetier: upload failed; retrying", "attempt", attempt+1, "err", err)
		if sleep(ctx, l.cfg.Clock, l.jitter.delay(l.cfg.Backoff, attempt)) != nil {
			return
		}
	}
}

// failure is a run of failures of one kind of request.
type failure struct {
	since time.Time // zero while the requests succeed
	err   error
}

// recordLocked records the outcome of an upload (publish false) or a
// metadata publish (publish true), err nil for success, and returns the
// health to report through OnHealth if it changed. The engine is degraded
// while either kind has kept failing for DegradedAfter: data that cannot
// be uploaded, or uploaded data followers cannot learn of, both mean the
// broker should replicate the ordinary way.
func (l *Leader) recordLocked(publish bool, err error) (Health, bool) {
	f := &l.uploadFail
	if publish {
		f = &l.publishFail
	}
	now := l.cfg.Clock.Now()
	if err == nil {
		*f = failure{}
	} else {
		if f.since.IsZero() {
			f.since = now
		}
		f.err = err
	}
	before := l.health.Degraded
	l.health = Health{}
	for _, f := range []failure{l.uploadFail, l.publishFail} {
		if f.since.IsZero() {
			continue
		}
		if l.health.Since.IsZero() || f.since.Before(l.health.Since) {
			l.health.Since = f.since
		}
		l.health.Err = f.err
		l.health.Degraded = l.health.Degraded || now.Sub(f.since) >= l.cfg.DegradedAfter
	}
	return l.health, l.health.Degraded != before
}

// report calls OnHealth, outside the engine's lock, if health changed.
func (l *Leader) report(h Health, changed bool) {
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
			if err := l.publishUpload(ctx, u); err != nil {
				if ctx.Err() != nil {
					return
				}
				// Only an entry the codec rejects gets here: a bug, not
				// a transient failure. Say so; the data stays in the
				// broker's log and the object is left for Sweep.
				l.cfg.Logger.Error("activetier: publishing an object's entries failed", "object", u.ref.String(), "err", err)
				l.mu.Lock()
				l.removeLocked(u)
				l.mu.Unlock()
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

func (l *Leader) publishUpload(ctx context.Context, u *upload) error {
	entries := make([]metadata.Entry, 0, len(u.obj.Sections))
	for i, s := range u.obj.Sections {
		if epoch, ok := l.currentEpoch(s.Partition); !ok || epoch != u.pubEpochs[i] {
			// Leadership moved on: this broker's data is no longer the
			// partition's to publish. Followers would fence it anyway.
			l.mu.Lock()
			l.stats.fenced++
			l.mu.Unlock()
			continue
		}
		entries = append(entries, s.Entry(u.ref, u.pubEpochs[i], l.cfg.BrokerID))
	}
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
		return err
	}
	l.publishLat.observe(l.cfg.Clock.Now().Sub(u.appendedAt))
	l.gc.track(u.ref, u.obj.Sections, offsets)
	l.mu.Lock()
	l.removeLocked(u)
	for _, e := range entries {
		if e.LastOffset+1 > l.durable[e.Partition] {
			l.durable[e.Partition] = e.LastOffset + 1
		}
	}
	close(l.durableCh)
	l.durableCh = make(chan struct{})
	l.mu.Unlock()
	return nil
}

func (l *Leader) removeLocked(u *upload) {
	for i, q := range l.queue {
		if q == u {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			return
		}
	}
}

// publish routes msg to the metadata partitions of the followers of its
// entries' and markers' partitions and appends one message to each,
// retrying until it succeeds or ctx ends. It returns the metadata offset of
// each message by metadata partition.
func (l *Leader) publish(ctx context.Context, msg metadata.Message) (map[int32]int64, error) {
	part, err := metadata.NewPartitioner(l.cfg.Log.Partitions())
	if err != nil {
		return nil, fmt.Errorf("walstore: metadata log: %w", err)
	}
	routed, err := part.Split(&msg, l.cfg.Followers)
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
		for attempt := 0; ; attempt++ {
			off, err := l.cfg.Log.Append(ctx, r.Partition, buf)
			if err == nil {
				offsets[r.Partition] = off
				l.mu.Lock()
				h, changed := l.recordLocked(true, nil)
				l.mu.Unlock()
				l.report(h, changed)
				break
			}
			if ctx.Err() != nil || errors.Is(err, metadata.ErrClosed) {
				return nil, fmt.Errorf("walstore: publishing to metadata partition %d: %w", r.Partition, err)
			}
			l.mu.Lock()
			l.stats.publishRetries++
			h, changed := l.recordLocked(true, err)
			l.mu.Unlock()
			l.report(h, changed)
			l.cfg.Logger.Warn("activetier: publishing metadata failed; retrying", "partition", r.Partition, "err", err)
			if err := sleep(ctx, l.cfg.Clock, l.jitter.delay(l.cfg.Backoff, attempt)); err != nil {
				return nil, err
			}
		}
	}
	return offsets, nil
}

func (l *Leader) refreshMarkers(ctx context.Context) {
	l.mu.Lock()
	led := make(map[metadata.TopicPartition]int32, len(l.leading))
	for tp, e := range l.leading {
		led[tp] = e
	}
	l.mu.Unlock()
	for tp, epoch := range led {
		if err := l.publishMarkers(ctx, tp, epoch); err != nil && ctx.Err() == nil {
			l.cfg.Logger.Warn("activetier: refreshing epoch markers failed", "partition", tp.String(), "err", err)
		}
	}
}

// Republish copies tp's local log from offset from to its end into this
// broker's own bucket and publishes it at the current epoch, for followers
// that could not read the previous leader's objects (an AZ outage) or that
// start empty (a reassignment). Records keep their original epochs; the
// entries name this leader's epoch as publisher. It returns when all of it
// is published, or ctx ends.
func (l *Leader) Republish(ctx context.Context, tp metadata.TopicPartition, from int64) error {
	epoch, ok := l.currentEpoch(tp)
	if !ok {
		return fmt.Errorf("walstore: republish %s: %w", tp, ErrNotLeader)
	}
	end, err := l.cfg.Local.EndOffset(tp)
	if err != nil {
		return fmt.Errorf("walstore: republish %s: %w", tp, err)
	}
	for from < end {
		batches, err := l.cfg.Local.Read(ctx, tp, from, l.cfg.ObjectBytes)
		if err != nil {
			return fmt.Errorf("walstore: republish %s from %d: %w", tp, from, err)
		}
		if len(batches) == 0 {
			return fmt.Errorf("walstore: republish %s: local log returned nothing at %d below its end %d", tp, from, end)
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
			return fmt.Errorf("walstore: republish %s from %d: %w", tp, from, err)
		}
		offsets, err := l.publish(ctx, metadata.Message{Object: entries[0].Object, WriterBrokerID: l.cfg.BrokerID, Entries: entries})
		if err != nil {
			return err
		}
		sections := make([]combiner.SectionInfo, len(entries))
		for i, e := range entries {
			sections[i] = combiner.SectionOf(e)
		}
		l.gc.track(entries[0].Object, sections, offsets)
		next := batches[len(batches)-1].LastOffset + 1
		l.mu.Lock()
		l.stats.republished += uint64(len(entries))
		if m, ok := l.catchUp[tp]; ok && m.epoch == epoch && m.upTo == from {
			l.catchUp[tp] = republishMark{epoch: epoch, upTo: next}
			l.durableAdvancedLocked()
		}
		l.mu.Unlock()
		from = next
	}
	return nil
}

func (l *Leader) copyWithRetry(ctx context.Context, inputs []CopyInput) ([]metadata.Entry, error) {
	for attempt := 0; ; attempt++ {
		entries, err := l.mgr.Copy(ctx, inputs)
		if err == nil || !errors.Is(err, ErrUnavailable) {
			return entries, err
		}
		l.mu.Lock()
		l.stats.uploadRetries++
		l.mu.Unlock()
		if err := sleep(ctx, l.cfg.Clock, l.jitter.delay(l.cfg.Backoff, attempt)); err != nil {
			return nil, err
		}
	}
}
