package readcore

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/metadata"
)

// Config configures a Core.
type Config struct {
	// Partitions are the partitions to read and the offset to start each
	// at. At least one.
	Partitions map[metadata.TopicPartition]int64
	// Durable serves every record published, not only the committed ones.
	Durable bool
	// MaxBytes bounds the section bytes one Plan hands out. Positive.
	MaxBytes int64
	// CorruptFor is how long a section must keep failing verification,
	// from its first failure, before it is given up as gone. Default 30s:
	// longer than a flaky network path corrupts reads, short enough that
	// a consumer goes to the broker instead of waiting on a bad object.
	CorruptFor time.Duration
	// UnavailableFor, if positive, is how long a section's fetches must
	// keep failing as unavailable (its AZ's store down) before it is
	// given up as gone, so that a consumer reads what only a lost AZ
	// holds from the broker instead of waiting out the outage. Zero
	// waits for as long as the outage lasts.
	UnavailableFor time.Duration
	// MetadataPartitions are the partitions of the metadata log the
	// driver reads, each round. At least one.
	MetadataPartitions []int32
	// Violation builds the error for an answer of the metadata log that
	// breaks its contract: call names the method ("metadata.Log.Read"),
	// detail what was wrong. Default: a plain error naming both.
	Violation func(call, detail string) error
	// MaxHeld bounds the entries held, over every partition, for their
	// turn to be fetched and yielded: a partition whose commit stalls
	// learns entries it cannot yield yet. Past it, those furthest ahead
	// of their partition's next offset are forgotten, and the metadata
	// holding them is read again once the partition reaches them.
	// Default DefaultMaxHeld.
	MaxHeld int
}

// DefaultMaxHeld is Config.MaxHeld's default: a decoded entry takes some
// 330 bytes, so 100,000 of them take some 33 MB.
const DefaultMaxHeld = 100_000

// Core is one reader's partitions and what it knows of them. It is not
// safe for concurrent use: its driver serializes calls.
type Core struct {
	cfg   Config
	parts map[metadata.TopicPartition]*partition
	order []metadata.TopicPartition
	round uint64 // metadata rounds begun
	meta  map[int32]*metaState
	mps   []int32 // meta's keys, in order
	// waiting: the last Plan found a partition that a proof of the
	// metadata read to its end in a round after waitAfter would judge
	// gone.
	waiting   bool
	waitAfter uint64
	// held counts the entries the partitions hold; evicted those
	// forgotten at the MaxHeld bound, and those not held for being past
	// their partition's horizon; rewinds the metadata partitions read
	// again.
	held             int
	evicted, rewinds uint64
	digests          digestLog
	// rd is what the events gathered since the last Advance.
	rd Ready
}

// Counters are a Core's running totals.
type Counters struct {
	// Held is the number of entries held now: at most Config.MaxHeld,
	// unless more than that hold their partitions' next offsets.
	Held int
	// Evicted counts entries forgotten, or not held, to stay within
	// MaxHeld; each is read again from the metadata when needed.
	Evicted uint64
	// Rewinds counts the metadata partitions read again: for entries
	// forgotten at the bound, and after seeks back.
	Rewinds uint64
	// DigestChecks counts comparisons of the rolling digest of what was
	// yielded (package digest) with one a leader published,
	// DigestMismatches those that differed (each also in
	// Ready.Mismatches), and DigestsTaken the times a partition that knew
	// no value (after a seek) took its leader's.
	DigestChecks, DigestMismatches, DigestsTaken uint64
}

// Counters returns the Core's running totals.
func (c *Core) Counters() Counters {
	return Counters{Held: c.held, Evicted: c.evicted, Rewinds: c.rewinds,
		DigestChecks: c.digests.checks, DigestMismatches: c.digests.mismatches, DigestsTaken: c.digests.taken}
}

// Rewind asks the driver to read metadata partition Partition again from
// offset From (or, if the log no longer holds From, from its start): to
// hand to Learn again every record from From on, and to move its cursor
// back to From if it is past it. (A driver that learns records out of
// order may have learned some past its cursor: From may be one of them.)
type Rewind struct {
	Partition int32
	From      int64
}

// metaState is how far the driver has read one metadata partition.
type metaState struct {
	// next is the driver's cursor after its last read: every record
	// below it that the log retains was handed to Learn.
	next int64
	// target is a high watermark taken after round targetRound began,
	// not yet reached by the cursor; targetRound 0: none.
	target      int64
	targetRound uint64
	// proven is the latest round the partition was proven read to its
	// end in (0: none yet), high the high watermark that proved it.
	proven uint64
	high   int64
	// atEnd: the last read found the partition at its end.
	atEnd bool
}

// New validates cfg and returns a Core.
func New(cfg Config) (*Core, error) {
	switch {
	case len(cfg.Partitions) == 0:
		return nil, errors.New("no partitions")
	case cfg.MaxBytes <= 0:
		return nil, fmt.Errorf("MaxBytes %d is not positive", cfg.MaxBytes)
	case cfg.CorruptFor < 0:
		return nil, fmt.Errorf("CorruptFor %v is negative", cfg.CorruptFor)
	case cfg.UnavailableFor < 0:
		return nil, fmt.Errorf("UnavailableFor %v is negative", cfg.UnavailableFor)
	case len(cfg.MetadataPartitions) == 0:
		return nil, errors.New("no metadata partitions")
	case cfg.MaxHeld < 0:
		return nil, fmt.Errorf("MaxHeld %d is negative", cfg.MaxHeld)
	}
	if cfg.MaxHeld == 0 {
		cfg.MaxHeld = DefaultMaxHeld
	}
	if cfg.CorruptFor == 0 {
		cfg.CorruptFor = 30 * time.Second
	}
	if cfg.Violation == nil {
		cfg.Violation = func(call, detail string) error { return fmt.Errorf("%s broke its contract: %s", call, detail) }
	}
	c := &Core{cfg: cfg, parts: make(map[metadata.TopicPartition]*partition, len(cfg.Partitions)), meta: make(map[int32]*metaState)}
	c.digests.found = &c.rd.Mismatches
	for _, mp := range cfg.MetadataPartitions {
		if mp < 0 {
			return nil, fmt.Errorf("metadata partition %d is negative", mp)
		}
		c.meta[mp] = &metaState{}
	}
	c.mps = slices.Sorted(maps.Keys(c.meta))
	for tp, start := range cfg.Partitions {
		if err := tp.Validate(); err != nil {
			return nil, err
		}
		if start < 0 {
			return nil, fmt.Errorf("%s start offset %d is negative", tp, start)
		}
		c.parts[tp] = newPartition(tp, start, cfg.Durable, &c.held, &c.digests)
	}
	c.order = slices.SortedFunc(maps.Keys(c.parts), metadata.TopicPartition.Compare)
	return c, nil
}

// Round begins a round of metadata reading: the high watermarks taken
// after it and what Learn hands over until the next Round belong to it.
// Ready then holds its number, the metadata partitions the driver must
// read again before reading on, and from where (Ready.Rewinds: the
// records holding the entries of a partition that reached its horizon,
// entries forgotten at the MaxHeld bound or yielded before a seek back),
// and the high watermarks to take before reading (Ready.Watermarks). The
// Core's cursors move back with the rewinds, and nothing such a
// partition's next offset rests on is judged gone until they were read
// to their end again.
func (c *Core) Round() {
	c.round++
	var to map[int32]int64
	for _, tp := range c.order {
		p := c.parts[tp]
		if p.paused != nil || p.next < p.horizon {
			continue
		}
		if to == nil {
			to = make(map[int32]int64)
		}
		p.rereadFrom(to)
		p.horizon, p.idle = math.MaxInt64, false
		p.touch(c.round)
	}
	c.rd.Round = c.round
	for _, mp := range c.mps {
		if at, ok := to[mp]; ok {
			m := c.meta[mp]
			m.next, m.targetRound, m.atEnd = min(m.next, at), 0, false
			c.rd.Rewinds = append(c.rd.Rewinds, Rewind{Partition: mp, From: at})
			c.rewinds++
		}
	}
	c.rd.Watermarks = c.wantWatermarks(nil)
}

// wantWatermarks appends to out the metadata partitions whose high
// watermark the driver should take in this round, before reading them,
// and hand over with MetadataRead: none unless a partition waits for a
// gone judgement (the last Plan found one), and then only those not yet
// proven read far enough that have no useful high watermark outstanding
// and whose last read did not find them at their end (an empty read
// proves as much for free).
func (c *Core) wantWatermarks(out []int32) []int32 {
	if !c.waiting {
		return out
	}
	for _, mp := range c.mps {
		m := c.meta[mp]
		if m.proven <= c.waitAfter && !m.atEnd && (m.targetRound == 0 || m.targetRound <= c.waitAfter) {
			out = append(out, mp)
		}
	}
	return out
}

// MetadataRead is what a round's read of one metadata partition found.
type MetadataRead struct {
	Partition int32
	// From is the offset the read began at: the driver's cursor, or the
	// low watermark if the log was trimmed past the cursor.
	From int64
	// Next is the driver's cursor after the read: every record below it
	// that the log retains was handed to Learn (in this round or before).
	Next int64
	// High, if HasHigh, is the partition's high watermark, taken after
	// the round began and before the read.
	High    int64
	HasHigh bool
	// AtEnd says that the partition held nothing at Next at some moment
	// after the round began: a read at Next came back empty.
	AtEnd bool
}

// MetadataRead records how far the driver read a metadata partition in
// the current round, after handing what it read to Learn. The partition
// is proven read to its end as of round r when its cursor reached a high
// watermark taken after round r began, or a read in round r found
// nothing: every record appended before round r began was then learned.
//
// An answer that breaks the metadata log's contract proves nothing, and
// is returned as an error built by Config.Violation: a negative high
// watermark, or one below the offset the read began at (Watermarks), and
// a read finding the partition at its end below a high watermark taken
// before it (high watermarks never go down; Read or Watermarks lied).
// Trusted, either could judge records gone that the log still describes.
func (c *Core) MetadataRead(r MetadataRead) error {
	m := c.meta[r.Partition]
	if m == nil {
		return fmt.Errorf("metadata partition %d is not one the reader reads", r.Partition)
	}
	if r.Next < r.From {
		return fmt.Errorf("metadata partition %d: cursor %d is behind the read's start %d", r.Partition, r.Next, r.From)
	}
	if r.From < m.next {
		// The log began again (a topic re-created): the target, and
		// where its records are, are another log's.
		m.targetRound = 0
		for _, p := range c.parts {
			delete(p.index, r.Partition)
		}
	}
	m.next, m.atEnd = r.Next, false
	if r.HasHigh {
		switch {
		case r.High < 0:
			return c.cfg.Violation("metadata.Log.Watermarks", fmt.Sprintf("partition %d: negative high watermark %d", r.Partition, r.High))
		case r.High < r.From:
			return c.cfg.Violation("metadata.Log.Watermarks", fmt.Sprintf("partition %d: high watermark %d is below offset %d, up to which the log was read", r.Partition, r.High, r.From))
		}
		m.target, m.targetRound = r.High, c.round
	}
	if r.AtEnd {
		if m.targetRound != 0 && r.Next < m.target {
			return c.cfg.Violation("metadata.Log.Read", fmt.Sprintf("partition %d: nothing at offset %d, below the high watermark %d taken before", r.Partition, r.Next, m.target))
		}
		m.proven, m.high, m.targetRound, m.atEnd = c.round, r.Next, 0, true
		return nil
	}
	if m.targetRound != 0 && r.Next >= m.target {
		if m.targetRound > m.proven {
			m.proven, m.high = m.targetRound, m.target
		}
		m.targetRound = 0
	}
	return nil
}

// Proof returns the latest round metadata partition mp was proven read to
// its end in, and the high watermark that proved it: what a gone
// judgement made now rests on. Round 0: none yet.
func (c *Core) Proof(mp int32) (round uint64, high int64) {
	if m := c.meta[mp]; m != nil {
		return m.proven, m.high
	}
	return 0, 0
}

// proven is the latest round every metadata partition was proven read to
// its end in.
func (c *Core) proven() uint64 {
	r := uint64(math.MaxUint64)
	for _, m := range c.meta {
		r = min(r, m.proven)
	}
	return r
}

// Learn hands what m, the record at offset rec of metadata partition mp,
// says of the Core's partitions to them. The markers one message carries
// for a partition are one publication. Where each entry is is noted, for
// reading it again; past MaxHeld, the entries furthest ahead are
// forgotten.
func (c *Core) Learn(mp int32, rec int64, m *metadata.Message) {
	var pubs map[metadata.TopicPartition][]metadata.EpochStart
	for _, mk := range m.Markers {
		if c.parts[mk.Partition] != nil {
			if pubs == nil {
				pubs = make(map[metadata.TopicPartition][]metadata.EpochStart)
			}
			pubs[mk.Partition] = append(pubs[mk.Partition], mk)
		}
	}
	for tp, pub := range pubs {
		c.parts[tp].learnMarkers(pub)
	}
	for _, cm := range m.Commits {
		if p := c.parts[cm.Partition]; p != nil {
			p.learnCommit(cm, c.round)
		}
	}
	indexed := c.meta[mp] != nil
	for i := range m.Entries {
		e := &m.Entries[i]
		p := c.parts[e.Partition]
		if p == nil {
			continue
		}
		if indexed {
			p.noteEntry(mp, rec, e)
		}
		if p.learnEntry(*e) {
			c.evicted++
		}
	}
	if c.held > c.cfg.MaxHeld {
		c.evict()
	}
}

// evict forgets the entries furthest ahead of their partition's next
// offset, down to 1/16 below MaxHeld so that the next eviction is some
// way off, and moves each partition's horizon to the first it forgot.
// Entries wholly below next (left by a seek forward) go first, and move
// no horizon: the next plan would skip them. An entry holding next is
// kept: it is the next to be fetched.
func (c *Core) evict() {
	type held struct {
		p     int // index in c.order
		k     entryKey
		first int64
		ahead int64 // math.MaxInt64: below next
	}
	var cands []held
	for i, tp := range c.order {
		p := c.parts[tp]
		for k, e := range p.pending {
			switch {
			case e.LastOffset < p.next:
				cands = append(cands, held{i, k, e.FirstOffset, math.MaxInt64})
			case e.FirstOffset > p.next:
				cands = append(cands, held{i, k, e.FirstOffset, e.FirstOffset - p.next})
			}
		}
	}
	// The order is total, so that what is forgotten does not depend on
	// the maps' order.
	slices.SortFunc(cands, func(a, b held) int {
		return cmp.Or(cmp.Compare(b.ahead, a.ahead), cmp.Compare(a.p, b.p), cmp.Compare(a.k.obj.AZ, b.k.obj.AZ), cmp.Compare(a.k.obj.Bucket, b.k.obj.Bucket),
			cmp.Compare(a.k.obj.Key, b.k.obj.Key), cmp.Compare(a.k.pos, b.k.pos), cmp.Compare(a.k.len, b.k.len), cmp.Compare(a.k.publisher, b.k.publisher))
	})
	n := min(c.held-(c.cfg.MaxHeld-c.cfg.MaxHeld/16), len(cands))
	for _, h := range cands[:n] {
		p := c.parts[c.order[h.p]]
		p.forget(h.k)
		if h.ahead != math.MaxInt64 {
			p.horizon = min(p.horizon, h.first)
		}
	}
	c.evicted += uint64(n)
}

// Want is a section to fetch and the offsets of it that may be yielded.
type Want struct {
	Entry metadata.Entry
	// From is the partition's next offset; Limit the offset below which
	// the section's batches may be yielded.
	From, Limit int64
}

// Pause says why a partition stopped until Seek: its records from Offset
// on are gone from object storage (directread's GoneError), or, with
// Truncated, records yielded from Offset on were truncated by a later
// leader (its TruncatedError).
type Pause struct {
	Partition metadata.TopicPartition
	Truncated bool
	Offset    int64
	// ResumeHint is, when gone, the first offset after Offset that the
	// Core knows it can describe, or Offset itself when it knows none.
	ResumeHint int64
	// Cause is why the last section that could not be read failed.
	Cause error
}

// Plan decides every partition, in partition order: Ready then holds the
// sections to fetch next (Ready.Fetches), at most MaxBytes of them (and
// at least one if any is due), and the partitions that paused since the
// last Plan (Ready.Pauses), each reported once.
//
// A partition is judged gone at its next offset when the records there
// were published (a commit past them is known) but no entry it holds
// describes them, once every metadata partition was proven read to its
// end (MetadataRead) as of a round r later than the round in which the
// partition last changed (learned the first commit past next, moved, or
// forgot an entry). That is enough, however busy the metadata log:
//
//   - A commit covers only offsets every in-sync follower applied, and a
//     follower applies only what it read in an entry from its metadata
//     partition (one of those the reader reads). So every entry
//     describing offsets below a commit was in the metadata log before
//     the commit was appended, possibly in another metadata partition.
//   - The commit was learned by the end of the round the partition last
//     changed in, before round r began. A Durable reader is judged by
//     commits too: an entry beyond next proves nothing, since a new
//     leader publishes new objects while it still republishes older
//     offsets.
//   - Every record appended to each metadata partition before round r
//     began was learned: the reader's cursor reached a high watermark
//     taken after r began, or a read in r found the partition at its end.
//   - Entries forgotten at the MaxHeld bound, or yielded before a seek
//     back, all describe offsets at or past the partition's horizon:
//     nothing at or past it is judged until Round has moved the cursors
//     back to the first record that may describe them (touching the
//     partition), so the proof above comes from a read past them again.
//
// So every entry that could describe next was learned; the ones the
// partition no longer holds were yielded past, fenced, or failed to
// fetch. Nothing waits on a round in which every metadata partition was
// empty, which a busy cluster never has.
func (c *Core) Plan() {
	budget := c.cfg.MaxBytes
	proven := c.proven()
	c.waiting, c.waitAfter = false, 0
	for _, tp := range c.order {
		p := c.parts[tp]
		ws := p.plan(budget, c.round)
		for _, w := range ws {
			c.rd.Fetches = append(c.rd.Fetches, w)
			budget -= w.Entry.Length
		}
		// A section planned holds next: nothing to judge (and no scan of
		// the pending entries for a partition that is reading).
		if len(ws) == 0 && p.gone(proven) {
			c.waiting, c.waitAfter = true, max(c.waitAfter, p.changed)
		}
		if ps := p.takeError(); ps != nil {
			c.rd.Pauses = append(c.rd.Pauses, *ps)
		}
	}
}

// Fetched hands over the result of fetching w's section at now, which the
// driver classifies with followcore.OutcomeOf (or as Gone when it has no
// store for the object's AZ). Ready then holds the batches to yield, in
// offset order (Ready.Yields), or, if the fetch should be retried after a
// backoff, Ready.Retry. A section that is gone is forgotten
// (Ready.GivenUp), and the partition is judged gone if nothing else
// describes its next offset; one that keeps failing verification for
// CorruptFor is too, and one whose store keeps being unavailable for
// UnavailableFor, if set. Any other failure is retried, another entry
// for the same offsets first.
func (c *Core) Fetched(now time.Time, w Want, r followcore.Result) {
	p := c.parts[w.Entry.Partition]
	if p == nil {
		return
	}
	switch r.Outcome {
	case followcore.Fetched:
		for _, b := range p.apply(w, r.Batches, c.round) {
			c.rd.Yields = append(c.rd.Yields, Yield{Partition: p.tp, Batch: b})
		}
		return
	case followcore.Gone:
		c.giveUp(p, w.Entry, r.Err)
		return
	case followcore.Corrupt:
		if p.keepsFailing(p.corruptSince, now, w.Entry, c.cfg.CorruptFor) {
			c.giveUp(p, w.Entry, r.Err)
			return
		}
	case followcore.Unavailable:
		if c.cfg.UnavailableFor > 0 && p.keepsFailing(p.unavailableSince, now, w.Entry, c.cfg.UnavailableFor) {
			c.giveUp(p, w.Entry, r.Err)
			return
		}
	}
	p.failures[keyOf(&w.Entry)]++
	p.idle = false
	c.rd.Retry = true
}

// giveUp forgets e, a section of p that cannot be read, for cause.
func (c *Core) giveUp(p *partition, e metadata.Entry, cause error) {
	p.drop(e, cause, c.round)
	c.rd.GivenUp = append(c.rd.GivenUp, GivenUp{Entry: e, Err: cause})
}

// Seek makes tp's next batch the one holding offset, and resumes it if a
// GoneError or TruncatedError paused it.
func (c *Core) Seek(tp metadata.TopicPartition, offset int64) error {
	if offset < 0 {
		return fmt.Errorf("seek %s to negative offset %d", tp, offset)
	}
	p := c.parts[tp]
	if p == nil {
		return fmt.Errorf("seek: %s is not one of the reader's partitions", tp)
	}
	p.seek(offset)
	p.touch(c.round)
	return nil
}

// Position returns tp's next offset and the highest committed offset
// learned for it, with ok false if tp is not one of the Core's
// partitions.
func (c *Core) Position(tp metadata.TopicPartition) (next, committed int64, ok bool) {
	p := c.parts[tp]
	if p == nil {
		return -1, -1, false
	}
	return p.next, p.highestCommit(), true
}

// Partitions returns the Core's partitions, in order.
func (c *Core) Partitions() []metadata.TopicPartition { return slices.Clone(c.order) }
