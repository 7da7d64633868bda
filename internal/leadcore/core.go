package leadcore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/internal/backoff"
	"github.com/activetier/activetier/internal/hedge"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Config configures a Core. Every size and duration must be positive: the
// caller applies its defaults first.
type Config struct {
	// BrokerID is this broker's id, written into entries and markers.
	BrokerID int32
	// MetadataPartitions is the number of partitions of the metadata log
	// that messages are routed over.
	MetadataPartitions int32
	// Codec compresses sections.
	Codec metadata.Codec
	// Interval is the longest a batch waits before its object is cut.
	Interval time.Duration
	// WaitCutDelay, if positive, is the longest a batch waits before its
	// object is cut once a caller waits for it to become durable or
	// replicated (Wait): such an acknowledgement then costs about one
	// upload, not Interval and an upload, for up to one more upload per
	// WaitCutDelay. Zero cuts at Interval whoever waits. It may not
	// exceed Interval, which would cut first.
	WaitCutDelay time.Duration
	// NoDigests: entries carry no rolling digest (walstore's
	// NodeConfig.NoDigests).
	NoDigests bool
	// ObjectBytes is the size at which an object is cut early, and the
	// most a republish reads from the local log at a time.
	ObjectBytes int
	// MaxPartitions caps the partitions in one object.
	MaxPartitions int
	// BufferBytes bounds the batch bytes appended and not yet published.
	BufferBytes int
	// MaxInflight bounds the cut objects being encoded or uploaded.
	MaxInflight int
	// DegradedAfter is how long an upload or publish may go without
	// succeeding before the engine is degraded.
	DegradedAfter time.Duration
	// MarkerRefresh is how often the markers of every led partition are
	// published again; GCInterval how often garbage is collected.
	MarkerRefresh, GCInterval time.Duration
	// SweepUnpublished makes Sweep offer the objects a leadership
	// still means to publish (stored while the metadata log refused
	// their entries), as Sweep did before it kept them. It exists only so that
	// the simulation can show it catches such a Sweep
	// (internal/harness/sim's Weaken.Sweep); nothing else may set it.
	SweepUnpublished bool
	// SkipCatchUp makes a leadership never republish for lagging
	// followers (catchup.go), as it did not before it learned to. Like
	// SweepUnpublished, it exists only for the simulation's proof
	// (Weaken.CatchUp); nothing else may set it.
	SkipCatchUp bool
	// RetainFor keeps every object at least this long after its entries
	// were published, whatever the followers applied, for direct readers
	// that lag them.
	RetainFor time.Duration
	// BackoffInitial and BackoffMax shape the retry delays: full jitter
	// below min(BackoffMax, BackoffInitial*2^attempt).
	BackoffInitial, BackoffMax time.Duration
	// Hedge is when an upload attempt that has not answered is made
	// again alongside it (Ready.Hedges); the zero Policy never does.
	Hedge hedge.Policy
	// Seed seeds the jitter of retry delays.
	Seed uint64
	// Logger receives the core's logs. Default: discard.
	Logger *slog.Logger
	// Violation makes the error for an answer of a dependency (named like
	// "LocalLog.Read") that breaks its contract. Default: a plain error.
	Violation func(dependency, detail string) error
	// NoAnswer makes the health error of an operation of kind what that
	// has not answered for d. Default: a plain error.
	NoAnswer func(what string, d time.Duration) error
	// ObjectBuffer, if set, supplies the buffers cut objects are encoded
	// into (combiner.BuilderConfig.Buffer), so that the driver can reuse
	// the Data of an Upload of WhatUpload once its upload succeeded: the
	// core lets go of it then. Default: a new allocation per object.
	ObjectBuffer func(n int) []byte
}

func (c *Config) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MetadataPartitions", int64(c.MetadataPartitions)}, {"Interval", int64(c.Interval)},
		{"ObjectBytes", int64(c.ObjectBytes)}, {"MaxPartitions", int64(c.MaxPartitions)},
		{"BufferBytes", int64(c.BufferBytes)}, {"MaxInflight", int64(c.MaxInflight)},
		{"DegradedAfter", int64(c.DegradedAfter)}, {"MarkerRefresh", int64(c.MarkerRefresh)},
		{"GCInterval", int64(c.GCInterval)}, {"BackoffInitial", int64(c.BackoffInitial)}, {"BackoffMax", int64(c.BackoffMax)},
	} {
		if f.v <= 0 {
			return fmt.Errorf("leadcore: Config.%s %d is not positive", f.name, f.v)
		}
	}
	switch {
	case c.BrokerID < 0:
		return fmt.Errorf("leadcore: Config.BrokerID %d is negative", c.BrokerID)
	case c.WaitCutDelay < 0:
		return fmt.Errorf("leadcore: Config.WaitCutDelay %v is negative", c.WaitCutDelay)
	case c.WaitCutDelay > c.Interval:
		return fmt.Errorf("leadcore: Config.WaitCutDelay %v exceeds Interval %v, which cuts first", c.WaitCutDelay, c.Interval)
	case c.RetainFor < 0:
		return fmt.Errorf("leadcore: Config.RetainFor %v is negative", c.RetainFor)
	case !c.Codec.Valid():
		return fmt.Errorf("leadcore: Config.Codec %v is not a known codec", c.Codec)
	}
	if err := c.Hedge.Validate(); err != nil {
		return fmt.Errorf("leadcore: Config.Hedge: %w", err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Violation == nil {
		c.Violation = func(dep, detail string) error { return fmt.Errorf("%s: broke its contract: %s", dep, detail) }
	}
	if c.NoAnswer == nil {
		c.NoAnswer = func(what string, d time.Duration) error { return fmt.Errorf("%s: no answer for %v", what, d) }
	}
	return nil
}

// Kind classifies the error of a failed request, as the driver judged it.
type Kind int

const (
	// Other is any failure not named below: retried where the protocol
	// retries.
	Other Kind = iota
	// Unavailable: the dependency did not answer or said to try again.
	Unavailable
	// Permanent: the store refuses for good; the engine degrades at once.
	Permanent
	// Closed: the metadata log is closed; a publish gives up.
	Closed
)

// KindOf classifies the error of a failed request as the core needs it:
// a closed metadata log, and the ObjectStore contract's permanent and
// transient refusals.
func KindOf(err error) Kind {
	switch {
	case errors.Is(err, metadata.ErrClosed):
		return Closed
	case errors.Is(err, storage.ErrPermanent):
		return Permanent
	case errors.Is(err, storage.ErrUnavailable):
		return Unavailable
	}
	return Other
}

// Code says why the core refused a call of the broker.
type Code int

const (
	// NotLeader: the engine does not lead the partition (any more).
	NotLeader Code = iota + 1
	// InvalidBatch: the batch cannot continue the partition's log.
	InvalidBatch
	// BufferFull: the buffer has no room for the batch now.
	BufferFull
	// TooLarge: the batch is larger than the whole buffer.
	TooLarge
	// StaleEpoch: a leadership at an epoch not above one this engine
	// already led the partition at.
	StaleEpoch
)

// Error is a refusal of the core; the driver maps Code to its own typed
// errors.
type Error struct {
	Code Code
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

func refuse(code Code, format string, args ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, args...)}
}

// CodeOf returns the Code of a refusal in err's chain, or 0.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// What an operation is, for health and for which retries a success wakes.
const (
	WhatUpload    = "upload"
	WhatCopy      = "republish upload"
	WhatPublish   = "metadata publish"
	whatLocalRead = "local read"
	whatEncode    = "encode"
	whatDelete    = "delete"
)

// Encode asks the driver to cut Builder (Builder.Cut) and report Encoded.
// The builder is the driver's until then.
type Encode struct {
	ID      uint64
	Builder *combiner.Builder
}

// Upload asks the driver to store Data under a fresh key, retrying as
// Retry and Cancel say, and to report every attempt with Uploaded.
type Upload struct {
	ID   uint64
	What string // WhatUpload or WhatCopy
	Data []byte
}

// Publish asks the driver to append Data to metadata partition Partition,
// retrying as Retry and Cancel say, and to report every attempt with
// Published.
type Publish struct {
	ID        uint64
	Partition int32
	Data      []byte
}

// ReadWhat is what a LocalRead reads.
type ReadWhat int

const (
	// ReadLineage: the partition's epochs, then its end offset.
	ReadLineage ReadWhat = iota
	// ReadEnd: the end offset.
	ReadEnd
	// ReadBatches: batches from From, up to MaxBytes.
	ReadBatches
)

// LocalRead asks the driver to read the broker's local log and report Read.
type LocalRead struct {
	ID        uint64
	What      ReadWhat
	Partition metadata.TopicPartition
	From      int64
	MaxBytes  int
}

// LocalResult is the answer to a LocalRead. Errors are the driver's,
// naming the call.
type LocalResult struct {
	Epochs    []storage.EpochEntry
	EpochsErr error
	End       int64
	EndErr    error
	Batches   []storage.Batch
	ReadErr   error
}

// Delete asks the driver to delete objects and report Deleted. Call is
// the broker's call it is for (CollectGarbage, Sweep), or zero for the
// periodic collection.
type Delete struct {
	ID   uint64
	Refs []metadata.ObjectRef
	Call uint64
}

// Hedge asks the driver to make one more attempt of upload ID now,
// alongside the one in flight, which has not answered in time, and to
// report it with HedgeUploaded. Like every attempt, it stores the same
// bytes under a fresh key (If-None-Match: *), so no attempt can overwrite
// another's object, and only the reference of the first to succeed is
// published; the other's object, if it lands, is one no entry names,
// which Sweep deletes. The driver stops it when the upload finishes
// (Uploaded succeeds, or Cancels names it).
type Hedge = Upload

// Retry tells the driver when to make the next attempt of request ID.
type Retry struct {
	ID uint64
	At time.Time
}

// CallDone is the end of a broker's call the driver named Call
// (CollectGarbage, Sweep): how many objects it deleted, or why it failed.
type CallDone struct {
	Call    uint64
	Deleted int
	Err     error
}

// TaskDone is the end of a Republish call.
type TaskDone struct {
	ID  uint64
	Err error
}

// Ready is the work the core hands out and the news for the driver's
// callers. Take it with Ready, then call Advance.
type Ready struct {
	Encodes   []Encode
	Uploads   []Upload
	Publishes []Publish
	Reads     []LocalRead
	Deletes   []Delete
	Hedges    []Hedge
	Retries   []Retry
	// Cancels are requests the core no longer wants: stop retrying them,
	// and drop their results.
	Cancels []uint64
	// Done are Republish calls that finished; Calls the other broker's
	// calls that did (CollectGarbage, Sweep).
	Done  []TaskDone
	Calls []CallDone
	// DurableChanged: a durable offset advanced, or a leadership ended or
	// failed: wake WaitDurable callers. SpaceFreed: buffer space freed:
	// wake blocked Appends. HealthChanged: Degraded changed, or the set
	// of failing partitions (Failures).
	DurableChanged, SpaceFreed, HealthChanged bool
	// CommitChanged: a high watermark advanced, or a leadership ended:
	// wake WaitReplicated callers.
	CommitChanged bool
	// Failures are the led partitions that began or stopped failing, or
	// failed again, in order; HealthChanged is set when the set of
	// failing partitions changed.
	Failures []Failure
	// UploadLatency and PublishLatency are observations for the
	// driver's histograms.
	UploadLatency, PublishLatency []time.Duration
	// WakeAt is when the driver must call Tick (zero: no timer).
	WakeAt time.Time
}

func (rd *Ready) empty() bool {
	return len(rd.Encodes)+len(rd.Uploads)+len(rd.Publishes)+len(rd.Reads)+len(rd.Deletes)+len(rd.Hedges)+
		len(rd.Retries)+len(rd.Cancels)+len(rd.Done)+len(rd.Calls)+len(rd.UploadLatency)+len(rd.PublishLatency)+len(rd.Failures) == 0 &&
		!rd.DurableChanged && !rd.SpaceFreed && !rd.HealthChanged && !rd.CommitChanged
}

// Stats are the core's counters.
type Stats struct {
	Appends, AppendedBytes        uint64
	Objects, ObjectBytes          uint64
	UploadRetries, PublishRetries uint64
	// UploadHedges counts hedged upload attempts, UploadHedgeWins those
	// that succeeded first, UploadHedgesDenied those the budget refused.
	UploadHedges, UploadHedgeWins, UploadHedgesDenied uint64
	Fenced, Republished                               uint64
	ObjectsDeleted                                    uint64
	// BufferedBytes is what is appended and not yet published;
	// UploadsInFlight counts objects cut and not yet stored.
	BufferedBytes, UploadsInFlight int
}

// Health is the core's judgement of its uploads and publishes.
type Health struct {
	Degraded bool
	// Since is when the oldest failing operation began.
	Since time.Time
	// Err is its latest error, or a NoAnswer error.
	Err error
}

// request is a request handed out and not yet finished.
type request struct {
	id    uint64
	what  string
	start time.Time
	// health: an upload or publish, which degrades the engine when it
	// takes DegradedAfter.
	health   bool
	err      error
	kind     Kind
	attempts int
	backoff  bool // waiting for its next attempt
	// tried is when the upload's current attempt began (or begins, after
	// a backoff); hedged is when its hedge began, zero if it has none.
	tried, hedged time.Time
	up            *upload
	msg           *message
	task          *task
	// A Delete's: its objects, the broker's call it is for (zero: the
	// periodic collection), whether they count as collected, and the
	// call's error should it succeed.
	refs      []metadata.ObjectRef
	call      uint64
	collected bool
	callErr   error
}

// Core is the leader's protocol state. It is not safe for concurrent use.
type Core struct {
	cfg  Config
	rng  *rand.Rand
	part metadata.Partitioner
	enc  *combiner.Encoder // republish copies

	active, spare *slot // spare is nil while handed out for encoding
	encoding      *slot // the slot handed out, or nil
	flush         flushState
	leading       map[metadata.TopicPartition]*leadership
	led           map[metadata.TopicPartition]int32 // the last epoch of each ended leadership
	followers     map[metadata.TopicPartition][]int32
	gens          uint64

	queue    []*upload // cut, not yet published, in cut order
	waiting  []*upload // cut, waiting for an upload slot
	slotsUse int       // encodes and uploads handed out
	entryPub *message  // the entries being published, one object at a time

	commitQueue map[metadata.TopicPartition]struct{} // high watermarks to publish
	commitDue   time.Time                            // when to publish them alone
	commitPub   *message                             // the commits-only message in flight

	nextID     uint64
	reqs       map[uint64]*request
	tasks      map[uint64]*task // Republish calls
	refresh    []metadata.TopicPartition
	refreshing int // refresh tasks of the group under way
	// refreshGroup is the group of refresh tasks last started: a
	// leadership that ends stops its own, so that markers it read are
	// never published by, or alongside, a later leadership's.
	refreshGroup []*task
	// catchingUp counts the catch-ups under way; catchupQueue are the
	// partitions waiting for one to end (see catchup.go).
	catchingUp   int
	catchupQueue []metadata.TopicPartition
	sleeping     int // chores and catch-ups waiting out a backoff

	markerQueue   []markerBatch // markers waiting for the next marker message
	markersQueued int           // the markers in markerQueue
	markerPub     *message      // the marker message being published
	markersSent   time.Time     // when the last marker message started

	started           bool
	markersDue, gcDue time.Time
	gcDelete          uint64

	// putLatency learns the upload attempts' latency; putBudget bounds
	// their hedges; putting are the cut objects' uploads under way.
	putLatency hedge.Estimator
	putBudget  hedge.Budget
	putting    []*request

	health    Health
	healthDue time.Time // when the oldest operation may cross DegradedAfter
	gc        collector
	stats     Stats
	rd        Ready
	lastWake  time.Time
}

// New returns a Core, or an error if cfg is invalid.
func New(cfg Config) (*Core, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	part, err := metadata.NewPartitioner(cfg.MetadataPartitions)
	if err != nil {
		return nil, fmt.Errorf("leadcore: %w", err)
	}
	c := &Core{
		cfg:       cfg,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		part:      part,
		leading:   make(map[metadata.TopicPartition]*leadership),
		led:       make(map[metadata.TopicPartition]int32),
		followers: make(map[metadata.TopicPartition][]int32),
		reqs:      make(map[uint64]*request),
		tasks:     make(map[uint64]*task),
		gc:        newCollector(),

		commitQueue: make(map[metadata.TopicPartition]struct{}),
	}
	if c.enc, err = combiner.NewEncoder(combiner.EncoderOptions{Codec: cfg.Codec}); err != nil {
		return nil, fmt.Errorf("leadcore: %w", err)
	}
	if c.active, err = c.newSlot(); err == nil {
		c.spare, err = c.newSlot()
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("leadcore: %w", err)
	}
	return c, nil
}

// Close releases the encoder and builders. Builders handed out must have
// come back (Encoded) or no longer be in use.
func (c *Core) Close() {
	c.enc.Close()
	for _, s := range []*slot{c.active, c.spare, c.encoding} {
		if s != nil {
			s.b.Close()
		}
	}
}

// Ready returns the work and news gathered since the last Advance.
func (c *Core) Ready() Ready {
	rd := c.rd
	rd.WakeAt = c.wakeAt()
	return rd
}

// HasReady reports whether Ready holds anything new: requests, news, or a
// WakeAt other than the one last taken.
func (c *Core) HasReady() bool {
	return !c.rd.empty() || !c.wakeAt().Equal(c.lastWake)
}

// Advance acknowledges the last Ready: its requests are the driver's.
func (c *Core) Advance() {
	c.lastWake = c.wakeAt()
	c.rd = Ready{}
}

// Start begins the periodic work (marker refresh, garbage collection);
// the driver calls it when it starts running.
func (c *Core) Start(now time.Time) {
	c.started = true
	c.markersDue = now.Add(c.cfg.MarkerRefresh)
	c.gcDue = now.Add(c.cfg.GCInterval)
	c.maybeCut(now)
	c.startChores(now)
}

// Tick does what is due at now.
func (c *Core) Tick(now time.Time) {
	if c.started && !now.Before(c.markersDue) {
		c.startRefresh(now)
		c.markersDue = now.Add(c.cfg.MarkerRefresh)
	}
	if c.started && !now.Before(c.gcDue) {
		c.collectDue(now)
		c.gcDue = now.Add(c.cfg.GCInterval)
	}
	c.wakeTasks(now)
	c.hedgeUploads(now)
	c.pumpMarkers(now)
	c.maybeCut(now)
	c.publishCommits(now)
	c.judgeHealth(now)
}

// wakeAt is the earliest time something is due, or zero.
func (c *Core) wakeAt() time.Time {
	var at time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	if c.started {
		earlier(c.markersDue)
		earlier(c.gcDue)
	}
	if p := c.active.b.Stats(); p.Batches > 0 && c.spare != nil && c.slotsUse < c.cfg.MaxInflight {
		earlier(p.Oldest.Add(c.cfg.Interval))
		earlier(c.flush.due)
	}
	if c.sleeping > 0 {
		for _, ld := range c.leading { // the earliest: order does not matter
			for _, t := range ld.duties() {
				if t != nil {
					earlier(t.wakeAt)
				}
			}
		}
	}
	earlier(c.markersWait())
	earlier(c.healthDue)
	earlier(c.commitsAlone())
	if c.cfg.Hedge.Enabled() {
		threshold := c.putLatency.Threshold(c.cfg.Hedge)
		for _, r := range c.putting {
			if r.hedged.IsZero() {
				earlier(r.tried.Add(threshold))
			}
		}
	}
	return at
}

// newRequest registers a request of kind what begun at now.
func (c *Core) newRequest(now time.Time, what string) *request {
	c.nextID++
	r := &request{id: c.nextID, what: what, start: now, health: what == WhatUpload || what == WhatCopy || what == WhatPublish}
	c.reqs[r.id] = r
	return r
}

// take returns the live request id, removing it: its result is being
// handled. Nil for a request cancelled or unknown.
func (c *Core) take(id uint64) *request {
	r := c.reqs[id]
	delete(c.reqs, id)
	return r
}

// Live reports whether request id is still under way: handed out, and
// neither finished nor cancelled.
func (c *Core) Live(id uint64) bool {
	_, ok := c.reqs[id]
	return ok
}

// retry schedules the next attempt of r after a failure at now.
func (c *Core) retry(now time.Time, r *request) {
	c.reqs[r.id] = r
	r.backoff = true
	at := now.Add(c.delay(r.attempts))
	r.tried = at
	c.rd.Retries = append(c.rd.Retries, Retry{ID: r.id, At: at})
	r.attempts++
}

// cancel drops request id: the driver stops it and its result is ignored.
func (c *Core) cancel(id uint64) {
	if _, ok := c.reqs[id]; ok {
		delete(c.reqs, id)
		c.rd.Cancels = append(c.rd.Cancels, id)
	}
}

// delay is the wait before retry number attempt.
func (c *Core) delay(attempt int) time.Duration {
	return backoff.Delay(c.rng, c.cfg.BackoffInitial, c.cfg.BackoffMax, attempt)
}

// Stats returns the core's counters.
func (c *Core) Stats() Stats {
	s := c.stats
	s.ObjectsDeleted = c.gc.deleted
	return s
}

// Health returns the health as last judged.
func (c *Core) Health() Health { return c.health }
