package followcore

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/internal/backoff"
	"github.com/activetier/activetier/internal/hedge"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Config configures a Core. Every field but Seed and Logger must be set;
// walstore's NodeConfig documents their meaning and defaults.
type Config struct {
	BrokerID         int32
	Readahead        int
	MaxHeld          int
	FetchConcurrency int
	HedgeAfter       time.Duration
	BackoffInitial   time.Duration
	BackoffMax       time.Duration
	// CoalesceGap is the largest hole between two sections of one object
	// read through to serve both with one GET; negative reads through
	// none (adjacent sections are still read together).
	CoalesceGap int64
	// ReportInterval is how often a partition whose log does not change
	// reports its progress again.
	ReportInterval time.Duration
	// Hedge is when a GET that has not answered is sent again; the zero
	// Policy never does.
	Hedge hedge.Policy
	Seed  uint64
	// Logger receives the core's decisions worth telling an operator.
	// Default: discard.
	Logger *slog.Logger
	// Violation makes the error for an answer of the local log's call
	// dependency (named like "LocalLog.Epochs") that breaks its contract,
	// so that the driver can name the call in its own error type.
	// Default: an error wrapping ErrContractViolation.
	Violation func(dependency, detail string) error
}

// ErrContractViolation marks an answer of the local log that breaks its
// contract (an end offset the request cannot have produced, epochs that
// are not a lineage), unless Config.Violation makes the errors.
var ErrContractViolation = errors.New("followcore: the local log's answer breaks its contract")

// maxWaiting bounds the marker publications a partition keeps while its
// broker has not learned their epoch; the leader republishes its markers
// periodically, so dropping the oldest loses nothing for good.
const maxWaiting = 8

// gapReport is how long a gap at a log's end must last to be logged, and
// how often it is logged again.
const gapReport = 30 * time.Second

// Core is the follower's state machine. It is not safe for concurrent use.
type Core struct {
	cfg Config
	log *slog.Logger
	rng *rand.Rand

	now    time.Time
	nextID uint64
	list   []*part // followed partitions, in an order fixed by the events
	parts  map[metadata.TopicPartition]*part
	ops    map[uint64]*part // local-log requests outstanding
	rounds []*round         // fetches outstanding, oldest first, hedges included

	// dirty are the partitions the next step visits: those an event
	// touched, whose timer fell due, or that waited for a fetch slot. A
	// step costs in proportion to them, not to every partition followed.
	// visited is the array the last step visited, which the next takes
	// over for dirty, rather than grow a new one every step.
	dirty    []*part
	visited  []*part
	want     []*pendingEntry // a step's entries to fetch, kept for the next step's
	timers   timerHeap
	timerSeq uint64
	starved  []*part // entries left unfetched for want of a slot

	bucketBackoff map[string]time.Time
	// latency learns each bucket's GET latency, for hedging; budget
	// bounds the hedges.
	latency    map[string]*hedge.Estimator
	budget     hedge.Budget
	retryAt    time.Time // the earliest hedge of a fetch outstanding
	evicted    bool      // held entries were forgotten: re-read when idle
	lastRewind time.Time

	// free are entries appended and forgotten, whose memory the next
	// entries held reuse: an entry a section is the follower's commonest
	// allocation otherwise.
	free []*pendingEntry

	// out is the Ready being filled since the last Advance; handed the
	// one Advance last acknowledged, whose arrays out takes over at the
	// next Advance. lastWake is the WakeAt that Advance acknowledged.
	out, handed Ready
	lastWake    time.Time
	Counters
}

// maxFree bounds Core.free: enough for the sections of a few objects of a
// thousand partitions each, between their appends and the next entries.
const maxFree = 1024

type role struct {
	epoch  int32
	leader int32
}

type partState uint8

const (
	loading partState = iota // a Load (and maybe a truncation) outstanding
	ready
	resting // the local log failed; waits until restUntil
)

// opKind is what a partition's outstanding local-log request is for.
type opKind uint8

const (
	opLoad opKind = iota
	opTrimEmptyEpoch
	opTruncateDiverged
	opBootstrap
	opAppend
	opVerify
)

// part is the core's state for one followed partition.
type part struct {
	tp    metadata.TopicPartition
	role  role
	state partState

	dirty   bool      // in Core.dirty
	starved bool      // in Core.starved
	gone    bool      // unfollowed: events and timers that name it are stale
	timerAt time.Time // the earliest timer pending for it, if any
	counted int       // its held entries as Core.Held counts them

	op        uint64 // the outstanding local-log request, 0 if none
	opKind    opKind
	opTo      int64         // a truncation's target
	appending *pendingEntry // an append's entry
	loaded    LocalState    // a load's answer, while its empty epoch is trimmed
	restUntil time.Time
	// failSince is when its local log began failing, zero while it does
	// not (see Failure); quietAt, once it started again, when it recovers
	// unless it fails again.
	failSince, quietAt time.Time
	missed             bool // metadata for it was passed over while it loaded or rested
	// stash keeps what metadata brings while the partition loads, to
	// handle once it has: a message handled is handled whole.
	stash []stashed

	leo      int64
	local    fencing.Lineage       // epochs of the local log
	leader   fencing.LeaderLineage // epochs learned from markers
	held     []*pendingEntry       // by first offset, then arrival
	pending  map[pendingKey]*pendingEntry
	maxSeen  int64
	lag      int64
	checkDiv bool // markers were merged: check for divergence
	// known is the leader epoch the broker knows; waiting holds marker
	// publications of later epochs until it does, newest last.
	known   int32
	waiting [][]metadata.EpochStart
	gapLog  time.Time
	// reported is when its progress was last reported.
	reported time.Time
	// chain is its log's rolling digest (package digest); verifying the
	// range of it a Verify outstanding reads back, and reread one to read
	// back once the local log is idle.
	chain     digest.Tracker
	verifying digest.Reread
	reread    *digest.Reread
}

// stashed is one marker publication or one entry.
type stashed struct {
	pub   []metadata.EpochStart
	entry metadata.Entry
}

// pendingKey identifies an entry by where its bytes are, so the same
// section announced twice is held once.
type pendingKey struct {
	object   metadata.ObjectRef
	position int64
}

type pendingEntry struct {
	e         metadata.Entry
	fetching  bool
	batches   []storage.Batch // set once fetched and verified
	buf       Releaser        // the driver's hold on the memory batches alias
	attempts  int
	notBefore time.Time
	// applyFrom and applyTo delimit the batches an append outstanding
	// carries.
	applyFrom, applyTo int
}

func (pe *pendingEntry) key() pendingKey { return pendingKey{pe.e.Object, pe.e.Position} }

// round is one fetch outstanding: one ranged GET.
type round struct {
	id      uint64
	bucket  string
	start   time.Time
	entries []metadata.Entry
	// twin is the other request of a hedged pair while it is outstanding;
	// hedge marks the one sent second, hedged the one it hedges (once).
	// denied: the budget refused its hedge (counted once).
	twin                  *round
	hedge, hedged, denied bool
}

// touch makes the next step visit p.
func (c *Core) touch(p *part) {
	if !p.dirty && !p.gone {
		p.dirty = true
		c.dirty = append(c.dirty, p)
	}
}

// timer makes the step at or after t visit p.
func (c *Core) timer(p *part, t time.Time) {
	if !p.timerAt.IsZero() && !p.timerAt.After(t) && p.timerAt.After(c.now) {
		return // an earlier one is pending
	}
	p.timerAt = t
	c.timerSeq++
	c.timers.push(timer{at: t, seq: c.timerSeq, p: p})
}

// New returns a Core following nothing.
func New(cfg Config) (*Core, error) {
	switch {
	case cfg.BrokerID < 0:
		return nil, fmt.Errorf("followcore: negative BrokerID %d", cfg.BrokerID)
	case cfg.Readahead <= 0, cfg.MaxHeld <= 0, cfg.FetchConcurrency <= 0:
		return nil, fmt.Errorf("followcore: Readahead %d, MaxHeld %d and FetchConcurrency %d must be positive", cfg.Readahead, cfg.MaxHeld, cfg.FetchConcurrency)
	case cfg.HedgeAfter <= 0, cfg.BackoffInitial <= 0, cfg.ReportInterval <= 0, cfg.BackoffMax < cfg.BackoffInitial:
		return nil, fmt.Errorf("followcore: HedgeAfter %v, BackoffInitial %v and ReportInterval %v must be positive, BackoffMax %v at least BackoffInitial",
			cfg.HedgeAfter, cfg.BackoffInitial, cfg.ReportInterval, cfg.BackoffMax)
	}
	if err := cfg.Hedge.Validate(); err != nil {
		return nil, fmt.Errorf("followcore: %w", err)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if cfg.Violation == nil {
		cfg.Violation = func(_, detail string) error { return fmt.Errorf("%w: %s", ErrContractViolation, detail) }
	}
	return &Core{
		cfg:           cfg,
		log:           lg,
		rng:           rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		parts:         make(map[metadata.TopicPartition]*part),
		ops:           make(map[uint64]*part),
		bucketBackoff: make(map[string]time.Time),
		latency:       make(map[string]*hedge.Estimator),
	}, nil
}

func (c *Core) id() uint64 {
	c.nextID++
	return c.nextID
}

// Follow makes the core follow tp, whose leader at epoch is leader, as the
// broker learned from its controller. A partition not followed before
// starts from its local log (a Load) and the metadata is read again from
// its start; a later epoch lets the core act on that epoch's markers,
// which it holds back until the broker knows the epoch (a marker of an
// epoch the broker has not heard of may be forged). An epoch below the
// one the core has is an error; the same epoch again changes nothing.
func (c *Core) Follow(now time.Time, tp metadata.TopicPartition, epoch, leader int32) error {
	c.now = now
	defer c.step()
	switch err := tp.Validate(); {
	case err != nil:
		return err
	case epoch < 0:
		return fmt.Errorf("negative epoch %d", epoch)
	case leader < 0 || leader == c.cfg.BrokerID:
		return fmt.Errorf("leader %d is not another broker", leader)
	}
	if p, ok := c.parts[tp]; ok {
		if epoch < p.role.epoch {
			return fmt.Errorf("epoch %d is below the epoch %d the engine has", epoch, p.role.epoch)
		}
		changed := p.role != role{epoch: epoch, leader: leader}
		p.role = role{epoch: epoch, leader: leader}
		c.touch(p)
		if changed && p.state == ready {
			c.report(p) // to the new leader, or for the new epoch
		}
		return nil
	}
	p := &part{tp: tp, role: role{epoch: epoch, leader: leader}}
	c.parts[tp] = p
	c.list = append(c.list, p)
	c.load(p)
	c.out.Rewind = true
	return nil
}

// Unfollow makes the core forget tp; following it again starts afresh
// from the local log. The driver must not perform a request of tp handed
// out before that it has not performed yet: the core would load the log
// as it is and then not know of the change. Answers to requests it did
// perform are ignored.
func (c *Core) Unfollow(now time.Time, tp metadata.TopicPartition) {
	c.now = now
	defer c.step()
	p, ok := c.parts[tp]
	if !ok {
		return
	}
	delete(c.parts, tp)
	delete(c.ops, p.op)
	i := slices.Index(c.list, p)
	c.list = slices.Delete(c.list, i, i+1)
	p.gone = true
	c.Held -= p.counted
	if !p.failSince.IsZero() {
		c.out.Failures = append(c.out.Failures, Failure{Partition: tp})
	}
}

// Pending reports whether request id is still to be answered: a request
// of a partition unfollowed since it was handed out is not, and the
// driver must not perform it.
func (c *Core) Pending(id uint64) bool { return c.ops[id] != nil }

// Tick tells the core the time, and does what falls due by then:
// retries whose backoff ended, hedges, rests that ended, reports due.
func (c *Core) Tick(now time.Time) {
	c.now = now
	c.step()
}

// load asks for p's local state.
func (c *Core) load(p *part) {
	p.state, p.op, p.opKind = loading, c.id(), opLoad
	c.ops[p.op] = p
	c.out.Loads = append(c.out.Loads, Load{ID: p.op, Partition: p.tp})
}

// answer returns the partition whose outstanding request id is, and
// clears it; nil for an answer nobody waits for.
func (c *Core) answer(id uint64) *part {
	p := c.ops[id]
	if p == nil {
		return nil
	}
	delete(c.ops, id)
	p.op = 0
	c.touch(p)
	return p
}

// Loaded answers Load id with the partition's local state, or err.
func (c *Core) Loaded(now time.Time, id uint64, st LocalState, err error) {
	c.now = now
	defer c.step()
	p := c.answer(id)
	if p == nil {
		return
	}
	if err == nil {
		err = c.checkLocal(st)
	}
	if err != nil {
		c.localFailed(p, fmt.Errorf("loading the local log: %w", err))
		return
	}
	if n := len(st.Epochs); n > 0 && st.Epochs[n-1].StartOffset == st.EndOffset {
		// An epoch with no records: the broker led it and wrote nothing
		// (or its records were truncated). As a follower the broker no
		// longer writes it, and kept, it would make every entry of an
		// earlier epoch wait for good (the local log looks ahead of it).
		// Kafka's follower truncation drops it too.
		p.loaded = st
		c.truncate(p, opTrimEmptyEpoch, st.EndOffset, false)
		return
	}
	c.ready(p, st)
}

// checkLocal checks a local state against the LocalLog contract.
func (c *Core) checkLocal(st LocalState) error {
	if st.EndOffset < 0 {
		return c.cfg.Violation("LocalLog.EndOffset", fmt.Sprintf("negative end offset %d", st.EndOffset))
	}
	var l fencing.Lineage
	for i, e := range st.Epochs {
		if e.StartOffset > st.EndOffset || i > 0 && (e.Epoch <= st.Epochs[i-1].Epoch || e.StartOffset < st.Epochs[i-1].StartOffset) {
			return c.cfg.Violation("LocalLog.Epochs", fmt.Sprintf("epochs %v are not an ascending lineage within the log end %d", st.Epochs, st.EndOffset))
		}
		if err := l.Assign(e.Epoch, e.StartOffset); err != nil {
			return c.cfg.Violation("LocalLog.Epochs", err.Error())
		}
	}
	return nil
}

// ready starts p from its local state. The leader lineage starts as the
// local one: epochs the local log holds were validated against a leader
// lineage when applied.
func (c *Core) ready(p *part, st LocalState) {
	p.state, p.leo, p.maxSeen, p.known = ready, st.EndOffset, st.EndOffset-1, p.role.epoch
	p.local, p.leader = fencing.Lineage{}, fencing.LeaderLineage{}
	p.held, p.pending, p.waiting, p.gapLog, p.checkDiv = nil, make(map[pendingKey]*pendingEntry), nil, time.Time{}, false
	p.chain.Reset()
	p.reread = nil
	markers := make([]metadata.EpochStart, 0, len(st.Epochs))
	for _, e := range st.Epochs {
		_ = p.local.Assign(e.Epoch, e.StartOffset) // checked by checkLocal
		markers = append(markers, metadata.EpochStart{Partition: p.tp, Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	if err := p.leader.Merge(markers...); err != nil {
		c.localFailed(p, c.cfg.Violation("LocalLog.Epochs", fmt.Sprintf("epochs %v: %v", st.Epochs, err)))
		return
	}
	stash := p.stash
	p.stash = nil
	for _, st := range stash {
		if st.pub != nil {
			c.mergeMarkers(p, st.pub)
		} else {
			c.hold(p, st.entry)
		}
	}
	if p.missed {
		// Metadata for it went by while it rested or while its stash was
		// full.
		p.missed = false
		c.out.Rewind = true
	}
	if !p.failSince.IsZero() {
		p.quietAt = c.now.Add(c.cfg.BackoffMax)
		c.timer(p, p.quietAt)
	}
	// A follower that holds everything already appends nothing: without
	// this its leader would never learn how far it is.
	c.report(p)
}

// localFailed sets p aside for the longest backoff after its local log
// failed; it then starts again from what the log says.
func (c *Core) localFailed(p *part, err error) {
	c.log.Error("activetier: the local log failed; the partition rests and starts again", "partition", p.tp.String(), "err", err)
	if p.failSince.IsZero() {
		p.failSince = c.now
	}
	p.quietAt = time.Time{}
	c.out.Failures = append(c.out.Failures, Failure{Partition: p.tp, Since: p.failSince, Err: err})
	delete(c.ops, p.op)
	p.state, p.op, p.appending = resting, 0, nil
	p.held, p.pending, p.waiting, p.stash = nil, nil, nil, nil
	p.restUntil = c.now.Add(c.cfg.BackoffMax)
	p.missed = true
	c.timer(p, p.restUntil)
	c.LocalErrors++
}

// recovered records that p's local log works again, if it failed: an
// append or a truncation succeeded, or p went a backoff since it started
// again without a failure (a load that succeeds does not say the append
// that failed will, and a partition with nothing more to write must not
// stay failing for good).
func (c *Core) recovered(p *part) {
	if p.failSince.IsZero() {
		return
	}
	p.failSince, p.quietAt = time.Time{}, time.Time{}
	c.out.Failures = append(c.out.Failures, Failure{Partition: p.tp})
}

// truncate asks for p's log to be truncated to end at to.
func (c *Core) truncate(p *part, kind opKind, to int64, atBatch bool) {
	p.op, p.opKind, p.opTo = c.id(), kind, to
	c.ops[p.op] = p
	c.out.Truncates = append(c.out.Truncates, Truncate{ID: p.op, Partition: p.tp, To: to, AtBatch: atBatch})
}

// Truncated answers Truncate id: the log was truncated to end at to (the
// request's To, or with AtBatch the first offset of the batch holding it)
// and now ends at end; or err.
func (c *Core) Truncated(now time.Time, id uint64, to, end int64, err error) {
	c.now = now
	defer c.step()
	p := c.answer(id)
	if p == nil {
		return
	}
	switch {
	case err != nil:
	case to > p.opTo || to < 0:
		err = c.cfg.Violation("LocalLog.Truncate", fmt.Sprintf("truncated to %d when asked for %d", to, p.opTo))
	case end != to:
		err = c.cfg.Violation("LocalLog.Truncate", fmt.Sprintf("truncated to %d, the log ends at %d afterwards", to, end))
	}
	if err != nil {
		c.localFailed(p, fmt.Errorf("truncating to %d: %w", p.opTo, err))
		return
	}
	c.recovered(p)
	switch p.opKind {
	case opTrimEmptyEpoch:
		st := p.loaded
		p.loaded = LocalState{}
		st.Epochs = st.Epochs[:len(st.Epochs)-1]
		c.ready(p, st)
	case opTruncateDiverged:
		c.log.Info("activetier: truncated diverged log", "partition", p.tp.String(), "from", p.leo, "to", end)
		p.local.TruncateFromEnd(end)
		p.leo = end
		p.chain.Truncated(end)
		// Entries for offsets at and above the truncation point were
		// forgotten once applied; read the metadata again to find them.
		// What is still applied is skipped as duplicate.
		c.out.Rewind = true
		c.Truncations++
		c.report(p)
	case opBootstrap:
		p.leo = end
		p.chain.Reset()
		c.report(p)
	}
}

// Records hands the core what a read of the broker's metadata partition
// returned. A record that does not decode is counted and skipped: a
// poisoned message cannot be trusted for anything; the data it named is
// reached through republished entries.
func (c *Core) Records(now time.Time, recs []metadata.Record) {
	c.now = now
	defer c.step()
	for _, r := range recs {
		m, err := metadata.DecodeMessage(r.Value)
		if err != nil {
			c.log.Error("activetier: skipping undecodable metadata message", "offset", r.Offset, "err", err)
			c.Poisoned++
			continue
		}
		c.message(m)
	}
}

func (c *Core) message(m *metadata.Message) {
	c.Messages++
	// The markers one message carries for a partition are one leader's
	// lineage, merged as one publication. They are adjacent: a decoded
	// message has its markers sorted by partition.
	for i := 0; i < len(m.Markers); {
		j := i + 1
		for j < len(m.Markers) && m.Markers[j].Partition == m.Markers[i].Partition {
			j++
		}
		pub := m.Markers[i:j:j]
		i = j
		if p := c.usable(pub[0].Partition, stashed{pub: pub}); p != nil {
			c.mergeMarkers(p, pub)
		}
	}
	for _, e := range m.Entries {
		c.entry(e)
	}
}

// usable returns tp's state if it is followed and loaded. What comes for
// a partition that is loading is stashed until it has; what comes for one
// that rests is passed over, and read again once it starts again.
func (c *Core) usable(tp metadata.TopicPartition, st stashed) *part {
	p := c.parts[tp]
	switch {
	case p == nil:
		return nil
	case p.state == loading && len(p.stash) < c.cfg.MaxHeld:
		p.stash = append(p.stash, st)
		return nil
	case p.state != ready:
		p.missed = true
		return nil
	}
	return p
}

func (c *Core) entry(e metadata.Entry) {
	p := c.parts[e.Partition]
	if p == nil {
		return
	}
	if e.PublisherEpoch == p.role.epoch && e.WriterBrokerID != p.role.leader {
		c.log.Warn("activetier: dropping an entry published at the current epoch by a broker that is not its leader",
			"partition", e.Partition.String(), "epoch", e.PublisherEpoch, "writer", e.WriterBrokerID, "leader", p.role.leader)
		c.Forged++
		return
	}
	if c.usable(e.Partition, stashed{entry: e}) == nil {
		return
	}
	c.hold(p, e)
}

// hold keeps e, an entry for p, unless p holds it already.
func (c *Core) hold(p *part, e metadata.Entry) {
	k := pendingKey{object: e.Object, position: e.Position}
	if _, dup := p.pending[k]; dup {
		return
	}
	var pe *pendingEntry
	if n := len(c.free); n > 0 {
		pe = c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
		*pe = pendingEntry{e: e}
	} else {
		pe = &pendingEntry{e: e}
	}
	p.pending[k] = pe
	i, _ := slices.BinarySearchFunc(p.held, e.FirstOffset+1, func(h *pendingEntry, off int64) int { return cmp.Compare(h.e.FirstOffset, off) })
	p.held = slices.Insert(p.held, i, pe)
	p.maxSeen = max(p.maxSeen, e.LastOffset)
	c.Entries++
	c.touch(p)
}

// forget drops a held entry.
func (p *part) forget(pe *pendingEntry) {
	delete(p.pending, pe.key())
	if i := slices.Index(p.held, pe); i >= 0 {
		p.held = slices.Delete(p.held, i, i+1)
	}
}

// mergeMarkers merges one publication of p's markers, or keeps it waiting
// if its latest epoch is later than the broker knows. A publication whose
// latest epoch is the known one must come from that epoch's leader.
func (c *Core) mergeMarkers(p *part, pub []metadata.EpochStart) {
	top, writer := pub[0].Epoch, pub[0].LeaderBrokerID
	for _, mk := range pub {
		if mk.Epoch > top {
			top, writer = mk.Epoch, mk.LeaderBrokerID
		}
	}
	switch {
	case top > p.known:
		if len(p.waiting) == maxWaiting {
			p.waiting = p.waiting[1:]
		}
		p.waiting = append(p.waiting, pub)
		return
	case top == p.role.epoch && writer != p.role.leader:
		c.log.Warn("activetier: ignoring epoch markers of the current epoch from a broker that is not its leader",
			"partition", p.tp.String(), "epoch", top, "writer", writer, "leader", p.role.leader)
		c.Forged++
		return
	}
	if err := p.leader.Merge(pub...); err != nil {
		c.log.Error("activetier: ignoring invalid epoch markers", "partition", p.tp.String(), "err", err)
		c.Poisoned++
		return
	}
	p.checkDiv = true
	c.touch(p)
}

// learnEpoch acts on a later epoch the broker has learned for p: the
// marker publications waiting for it are merged, in the order they came.
func (c *Core) learnEpoch(p *part) {
	if p.role.epoch <= p.known {
		return
	}
	p.known = p.role.epoch
	waiting := p.waiting
	p.waiting = nil
	for _, pub := range waiting {
		c.mergeMarkers(p, pub)
	}
}

// Appended answers Append id: the local log now ends at end, or err.
func (c *Core) Appended(now time.Time, id uint64, end int64, err error) {
	c.now = now
	defer c.step()
	p := c.answer(id)
	if p == nil {
		return
	}
	pe := p.appending
	p.appending = nil
	batches := pe.batches[pe.applyFrom:pe.applyTo]
	want := batches[len(batches)-1].LastOffset + 1
	if err == nil && end != want {
		// The progress reported next lets the leader delete what it
		// covers: it must describe the log as it is.
		err = c.cfg.Violation("LocalLog.Append", fmt.Sprintf("the log ends at %d afterwards, not %d", end, want))
	}
	if err != nil {
		c.localFailed(p, fmt.Errorf("appending at %d: %w", p.leo, err))
		return
	}
	var bytes int
	for _, b := range batches {
		if latest, ok := p.local.Latest(); !ok || b.Epoch > latest.Epoch {
			if err := p.local.Assign(b.Epoch, b.FirstOffset); err != nil {
				c.localFailed(p, fmt.Errorf("local epochs: %w", err))
				return
			}
		}
		bytes += len(b.Data)
	}
	p.leo = want
	c.counted(p.chain.Applied(pe.e, batches, want))
	c.recovered(p)
	c.Applied++
	c.AppliedBytes += uint64(bytes)
	c.report(p)
	c.out.Applied = append(c.out.Applied, Applied{Partition: p.tp, Bytes: bytes, MaxTimestamp: pe.e.MaxTimestamp})
	if p.leo > pe.e.LastOffset {
		p.forget(pe)
		// Appended and forgotten: nothing refers to the batches, nor to
		// pe, any more.
		if pe.buf != nil {
			pe.buf.Release()
		}
		*pe = pendingEntry{}
		if len(c.free) < maxFree {
			c.free = append(c.free, pe)
		}
	}
}

// report tells p's leader where p's log is.
func (c *Core) report(p *part) {
	p.reported = c.now
	c.timer(p, c.now.Add(c.cfg.ReportInterval))
	last := int32(-1)
	if latest, ok := p.local.Latest(); ok {
		last = latest.Epoch
	}
	c.out.Progress = append(c.out.Progress, Progress{Partition: p.tp, Leader: p.role.leader, EndOffset: p.leo, LastEpoch: last})
}

// Fetched answers Fetch id with one result per entry of the fetch.
// Fetched sections are kept for their turn; an unreachable bucket backs
// off every entry in it, so the core turns to republished copies
// elsewhere if there are any and otherwise waits; what does not exist is
// given up on, since no retry can bring it back.
//
// Of a hedged pair the first answer wins and the other is cancelled
// (Ready.Cancels), unless it is only transient failures while the other
// may still succeed: that one is awaited instead.
func (c *Core) Fetched(now time.Time, id uint64, results []Result) {
	c.now = now
	defer c.step()
	i := slices.IndexFunc(c.rounds, func(r *round) bool { return r.id == id })
	if i < 0 {
		return
	}
	r := c.rounds[i]
	c.rounds = slices.Delete(c.rounds, i, i+1)
	answered := !transientOnly(results)
	if slices.ContainsFunc(results, func(r Result) bool { return r.Outcome == Fetched }) {
		// Only a bucket that served data is learned: entries may name
		// any bucket, and an estimate each would be memory without bound.
		c.estimator(r.bucket).Observe(now.Sub(r.start))
	}
	if tw := r.twin; tw != nil {
		tw.twin = nil
		if !answered {
			return // the other may still succeed
		}
		c.cancelRound(tw)
		if r.hedge {
			c.HedgeWins++
		}
	}
	// A slot is free: entries left for want of one may be fetched.
	for _, p := range c.starved {
		p.starved = false
		c.touch(p)
	}
	c.starved = c.starved[:0]
	for _, r := range results {
		p := c.parts[r.Entry.Partition]
		if p == nil || p.state != ready {
			continue
		}
		pe := p.pending[pendingKey{r.Entry.Object, r.Entry.Position}]
		if pe == nil {
			continue
		}
		pe.fetching = false
		c.touch(p)
		c.fetched(p, pe, r)
	}
}

// transientOnly reports whether every result is a failure that another
// attempt may not meet: the store did not really answer.
func transientOnly(results []Result) bool {
	for _, r := range results {
		if r.Outcome != Unavailable && r.Outcome != Failed {
			return false
		}
	}
	return len(results) > 0
}

// cancelRound gives up on r, the loser of a hedged pair. Its latency is
// observed as the time it was given up on, a lower bound: learning only
// from winners would lower the threshold with every hedge.
func (c *Core) cancelRound(r *round) {
	if i := slices.Index(c.rounds, r); i >= 0 {
		c.rounds = slices.Delete(c.rounds, i, i+1)
	}
	if e := c.latency[r.bucket]; e != nil {
		e.Observe(c.now.Sub(r.start))
	}
	c.out.Cancels = append(c.out.Cancels, r.id)
}

// estimator returns bucket's latency estimate, creating it.
func (c *Core) estimator(bucket string) *hedge.Estimator {
	e := c.latency[bucket]
	if e == nil {
		e = new(hedge.Estimator)
		c.latency[bucket] = e
	}
	return e
}

func (c *Core) fetched(p *part, pe *pendingEntry, r Result) {
	if r.Outcome == Fetched {
		if err := checkSection(r.Entry, r.Batches); err != nil {
			// The section's checksum held, so this is what its writer
			// stored: no other copy of it can be better. Appending it
			// would fail, again on every retry; a valid entry for the
			// same offsets may still come.
			c.log.Error("activetier: dropping entry whose batches do not match it", "err", err)
			p.forget(pe)
			c.Dropped++
			return
		}
		pe.batches, pe.buf = r.Batches, r.Buffer
		return
	}
	c.FetchErrors++
	switch r.Outcome {
	case Gone:
		c.log.Warn("activetier: giving up on entry", "err", r.Err)
		p.forget(pe)
		c.NotFound++
		return
	case Corrupt:
		c.log.Error("activetier: fetched section failed verification; not applied", "err", r.Err)
		c.Corrupt++
	case Unavailable:
		c.bucketBackoff[pe.e.Object.Bucket] = c.now.Add(c.jitter(pe.attempts))
	case Refused:
		c.log.Error("activetier: the store refuses to read the object; retrying after the longest backoff", "err", r.Err)
		c.bucketBackoff[pe.e.Object.Bucket] = c.now.Add(c.cfg.BackoffMax)
	default:
		c.log.Warn("activetier: fetch failed; retrying", "err", r.Err)
	}
	pe.notBefore = c.now.Add(c.jitter(pe.attempts))
	pe.attempts++
}

// checkSection checks that a fetched section's batches are what its entry
// announces: whole batches, each continuing the one before, from the
// entry's first offset to its last.
func checkSection(e metadata.Entry, batches []storage.Batch) error {
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

// jitter returns the wait before retry number attempt.
func (c *Core) jitter(attempt int) time.Duration {
	return backoff.Delay(c.rng, c.cfg.BackoffInitial, c.cfg.BackoffMax, attempt)
}

// wakeAt makes the core ask for a Tick at t, at the latest.
func (c *Core) wakeAt(t time.Time) {
	if c.retryAt.IsZero() || t.Before(c.retryAt) {
		c.retryAt = t
	}
}

// gapOf returns the first offset of p's held entries when they all start
// past its log end: offsets no entry covers, which only a leader that
// skipped offsets, or a metadata log that lost messages, would leave.
func gapOf(p *part) (int64, bool) {
	if len(p.held) == 0 || p.held[0].e.FirstOffset <= p.leo {
		return 0, false
	}
	return p.held[0].e.FirstOffset, true
}

// reportGap logs, at most every gapReport per partition, that p cannot go
// on because of a gap at its log end.
func (c *Core) reportGap(p *part) {
	next, gap := gapOf(p)
	switch {
	case !gap:
		p.gapLog = time.Time{}
	case p.gapLog.IsZero():
		p.gapLog = c.now // a gap that lasts a moment is reordering, not news
		c.timer(p, c.now.Add(gapReport))
	case c.now.Sub(p.gapLog) >= gapReport:
		p.gapLog = c.now
		c.timer(p, c.now.Add(gapReport))
		c.log.Warn("activetier: no entry continues the log; waiting", "partition", p.tp.String(), "end", p.leo, "next", next, "held", len(p.held))
	default:
		// Visited before it is due (a timer that was earlier took the
		// place of its own): look again then.
		c.timer(p, p.gapLog.Add(gapReport))
	}
}
