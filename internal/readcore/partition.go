package readcore

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// partition is what a Reader knows and has yielded of one partition. Its
// methods make every decision and do no I/O, so they are tested as tables
// of messages in and batches out.
type partition struct {
	tp      metadata.TopicPartition
	durable bool // serve what is published, not only what is committed
	// next is the offset to yield next; local the epochs of what was
	// yielded (the consumer's log, as fencing sees it).
	next  int64
	local fencing.Lineage
	// leader is the lineage learned from markers; commits the highest
	// committed offset published under each leader epoch.
	leader  fencing.LeaderLineage
	commits map[int32]int64
	// pending are the entries not yet yielded, skipped or dropped.
	pending map[entryKey]metadata.Entry
	// changed is the last metadata round in which something a gone
	// judgement at next rests on changed: next moved, a pending entry was
	// forgotten, or the records at next became known to be published (a
	// commit past next). Gone is judged only on metadata proven read to
	// its end in a later round. Learning more of what is already known (a
	// higher commit) leaves it be, so a busy partition is judged too.
	changed uint64
	// paused is why the partition stopped until Seek.
	paused *Pause
	// cause is why the last section that could not be read failed.
	cause error
	// reported: paused was handed to the caller.
	reported bool
	// failures counts the failed fetches of each pending entry: another
	// entry for the same offsets (a republished copy in a bucket that is
	// up) is tried first.
	failures map[entryKey]int
	// corruptSince is when each pending entry's section first failed
	// verification; unavailableSince when its fetch first failed as
	// unavailable.
	corruptSince, unavailableSince map[entryKey]time.Time
	// idle: the last plan found nothing to fetch, and nothing it depends
	// on changed since, so the next would find nothing either. A reader
	// polls far more often than its partitions change.
	idle bool
	// horizon is the lowest offset that entries no longer held may
	// describe: entries from it on were forgotten at the Core's bound
	// (and those learned since are not held), or yielded before a seek
	// back to it. math.MaxInt64: none. Once next reaches it, nothing at
	// next is judged gone until the metadata holding those entries is
	// read again (Core.Round asks for it).
	horizon int64
	// index says where in each metadata partition the partition's
	// entries are, for reading them again.
	index map[int32]*recIndex
	// held is the Core's count of the entries its partitions hold.
	held *int
	// chain is the rolling digest of what was yielded (package digest),
	// checked against the leaders'; digests gathers what it learns.
	chain   digest.Tracker
	digests *digestLog
}

// digestLog gathers what a Core's partitions learn from their digests:
// the counts, and the mismatches for the Ready.
type digestLog struct {
	checks, mismatches, taken uint64
	found                     *[]digest.Mismatch
}

func (d *digestLog) note(r digest.Result) {
	if r.Checked {
		d.checks++
	}
	if r.Taken {
		d.taken++
	}
	if r.Mismatch != nil {
		d.mismatches++
		if d.found != nil {
			*d.found = append(*d.found, *r.Mismatch)
		}
	}
}

// entryKey identifies a section: the same entry read from two metadata
// partitions, or published twice, is held once.
type entryKey struct {
	obj       metadata.ObjectRef
	pos, len  int64
	publisher int32
}

func keyOf(e *metadata.Entry) entryKey {
	return entryKey{obj: e.Object, pos: e.Position, len: e.Length, publisher: e.PublisherEpoch}
}

func newPartition(tp metadata.TopicPartition, start int64, durable bool, held *int, digests *digestLog) *partition {
	p := &partition{tp: tp, durable: durable, horizon: math.MaxInt64, index: make(map[int32]*recIndex), held: held, digests: digests}
	p.seek(start)
	return p
}

// seek restarts the partition at offset: what was yielded is forgotten,
// what was learned of the leader is kept. The entries of what was yielded
// were forgotten, so a seek back moves the horizon there; so does a seek
// into what a pause reported gone, [next, ResumeHint), whose entries were
// dropped as unreadable: the caller asks for those records again (their
// objects may be back), and without reading the metadata again nothing
// would describe them.
func (p *partition) seek(offset int64) {
	if offset < p.next || p.paused != nil && (offset == p.next || offset < p.paused.ResumeHint) {
		p.horizon = min(p.horizon, offset)
	}
	p.next, p.local, p.paused, p.cause, p.reported, p.idle = offset, fencing.Lineage{}, nil, nil, false, false
	p.chain.Truncated(offset) // back to an end it remembers, the chain goes on
	if p.commits == nil {
		p.commits = make(map[int32]int64)
		p.pending = make(map[entryKey]metadata.Entry)
		p.failures = make(map[entryKey]int)
		p.corruptSince = make(map[entryKey]time.Time)
		p.unavailableSince = make(map[entryKey]time.Time)
	}
}

// touch records that something a gone judgement at next rests on
// changed in metadata round.
func (p *partition) touch(round uint64) { p.changed = round }

// learnMarkers merges one publication of the partition's markers (the
// markers one message carries for it). The lineage decides which entries
// plan forgets, and forgetting one touches the partition; the gone
// judgement itself reads no marker.
func (p *partition) learnMarkers(pub []metadata.EpochStart) {
	if p.leader.Merge(pub...) == nil {
		p.idle = false
	}
}

// learnCommit learns c, read in metadata round. The first commit past
// next is what makes the records there published.
func (p *partition) learnCommit(c metadata.Commit, round uint64) {
	if c.Offset <= p.commits[c.Epoch] {
		return
	}
	if c.Offset > p.next && p.highestCommit() <= p.next {
		p.touch(round)
	}
	p.commits[c.Epoch] = c.Offset
	p.idle = false
}

// learnEntry learns e. An entry beyond next does
// not make the records at next gone, durable or not: a new leader
// publishes its new objects while it republishes older offsets, so the
// entry for next may still come. Only a commit past next says that it
// was published.
//
// An entry at or past the horizon is not held either: entries before it
// were forgotten, and it will be read again with them once next reaches
// the horizon. It reports whether it was left out so.
func (p *partition) learnEntry(e metadata.Entry) (beyond bool) {
	if e.LastOffset < p.next {
		return false
	}
	k := keyOf(&e)
	if _, ok := p.pending[k]; ok {
		return false
	}
	if e.FirstOffset >= p.horizon {
		return true
	}
	p.pending[k], p.idle = e, false
	*p.held++
	return false
}

// noteEntry records that metadata partition mp holds e at record rec.
func (p *partition) noteEntry(mp int32, rec int64, e *metadata.Entry) {
	x := p.index[mp]
	if x == nil {
		x = &recIndex{}
		p.index[mp] = x
	}
	x.note(rec, e.LastOffset+1)
}

// rereadFrom lowers to[mp], for each metadata partition mp, to the record
// from which to read it again for the partition's entries of the offsets
// from the horizon on, and leaves out one that holds no such entry.
func (p *partition) rereadFrom(to map[int32]int64) {
	for mp, x := range p.index {
		if at, ok := x.from(p.horizon); ok {
			if cur, seen := to[mp]; !seen || at < cur {
				to[mp] = at
			}
		}
	}
}

// takeError returns why the partition paused, once.
func (p *partition) takeError() *Pause {
	if p.paused == nil || p.reported {
		return nil
	}
	p.reported = true
	return p.paused
}

// committed is the offset below which records at p.next may be yielded:
// the highest commit whose epoch is no later than the publisher whose
// lineage describes p.next. A commit of epoch E vouches for E's log; the
// lineage there is E's (or a later leader's, which holds E's committed
// records) only if a publication of E or later covers it. The lineage's
// publishers only grow with the offset, so the one at p.next is the
// smallest over the records to yield.
func (p *partition) committed() int64 {
	if p.durable {
		return math.MaxInt64
	}
	_, publisher, ok := p.leader.At(p.next)
	if !ok {
		return 0
	}
	var best int64
	for epoch, off := range p.commits {
		if epoch <= publisher {
			best = max(best, off)
		}
	}
	return best
}

// highestCommit is the highest commit learned, whatever its epoch: how
// far the partition's consumers could read, for lag.
func (p *partition) highestCommit() int64 {
	var best int64
	for _, off := range p.commits {
		best = max(best, off)
	}
	return best
}

// plan decides the pending entries in offset order, as a follower whose
// log ends at p.next would, and returns the ones to fetch next: a chain
// of applies, each starting where the one before ends, up to maxBytes of
// sections. Entries to skip or drop are forgotten (in metadata round); a
// truncation pauses the partition.
func (p *partition) plan(maxBytes int64, round uint64) (out []Want) {
	if p.paused != nil || p.idle || len(p.pending) == 0 || maxBytes <= 0 {
		return nil
	}
	defer func() { p.idle = len(out) == 0 && p.paused == nil }()
	entries := make([]metadata.Entry, 0, len(p.pending))
	for _, e := range p.pending {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b metadata.Entry) int {
		return cmp.Or(cmp.Compare(p.failures[keyOf(&a)], p.failures[keyOf(&b)]), cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(b.PublisherEpoch, a.PublisherEpoch),
			cmp.Compare(a.Object.Key, b.Object.Key), cmp.Compare(a.Position, b.Position))
	})
	committed := p.committed()
	next, local := p.next, p.local.Clone()
	var bytes int64
	for progressed := true; progressed && bytes < maxBytes; {
		progressed = false
		for _, e := range entries {
			k := keyOf(&e)
			if _, ok := p.pending[k]; !ok {
				continue
			}
			d := fencing.Decide(next, local, &p.leader, e)
			switch d.Action {
			case fencing.Skip, fencing.Drop:
				if next == p.next {
					if d.Action == fencing.Skip {
						epoch, ok := p.local.EpochFor(e.LastOffset)
						if !ok {
							epoch = -1
						}
						p.digests.note(p.chain.Held(e, p.next, epoch))
					}
					p.forget(k)
					p.touch(round)
				}
				continue
			case fencing.Truncate:
				if next == p.next {
					p.paused = &Pause{Partition: p.tp, Truncated: true, Offset: d.TruncateTo}
				}
				return out
			case fencing.Hold:
				continue
			}
			limit := min(d.Limit, committed)
			if limit <= d.From {
				return out
			}
			out = append(out, Want{Entry: e, From: d.From, Limit: limit})
			bytes += e.Length
			_ = local.Assign(e.RecordEpoch, d.From)
			next, progressed = limit, true
			break
		}
	}
	return out
}

// apply yields the batches of w's section, fetched and verified, that lie
// in [w.From, w.Limit), if w still continues the partition, in metadata
// round. A batch that holds w.From but starts below it (a start offset
// inside a batch) is yielded whole, as Kafka's fetch does; one that runs
// past w.Limit waits for the commit to cover it.
func (p *partition) apply(w Want, batches []storage.Batch, round uint64) []storage.Batch {
	if p.paused != nil || w.From != p.next {
		return nil
	}
	p.idle = false
	var out []storage.Batch
	for _, b := range batches {
		if b.LastOffset < w.From || b.LastOffset >= w.Limit || b.Epoch != w.Entry.RecordEpoch {
			continue
		}
		if b.FirstOffset > p.next {
			break // a hole in the section: it was verified, so never
		}
		_ = p.local.Assign(b.Epoch, max(b.FirstOffset, 0))
		out = append(out, b)
		p.next = b.LastOffset + 1
	}
	if p.next > w.Entry.LastOffset {
		p.forget(keyOf(&w.Entry))
	}
	if len(out) > 0 {
		p.digests.note(p.chain.Applied(w.Entry, out, p.next))
		p.touch(round)
	}
	return out
}

// drop forgets an entry whose section cannot be read (gone or corrupt),
// in metadata round, remembering why for the Pause it may lead to.
func (p *partition) drop(e metadata.Entry, cause error, round uint64) {
	p.forget(keyOf(&e))
	p.touch(round)
	p.cause = cause
}

func (p *partition) forget(k entryKey) {
	p.idle = false
	if _, ok := p.pending[k]; ok {
		delete(p.pending, k)
		*p.held--
	}
	delete(p.failures, k)
	delete(p.corruptSince, k)
	delete(p.unavailableSince, k)
}

// keepsFailing records in since that e's section failed at now, and
// reports whether it has kept failing for at least d: then it is given
// up. A corrupted read can be the network's, an unavailable store a
// blip, so one failure is not enough.
func (p *partition) keepsFailing(since map[entryKey]time.Time, now time.Time, e metadata.Entry, d time.Duration) bool {
	k := keyOf(&e)
	first, ok := since[k]
	if !ok {
		since[k] = now
		return false
	}
	return now.Sub(first) >= d
}

// gone pauses the partition as gone at p.next if the records there were
// published (a commit is past them) but no pending entry describes them, judged on metadata proven read to
// its end in round proven (see Core.Plan for why that is enough) after
// the partition last changed. It reports whether the partition waits for
// such a proof: it would be judged gone on one.
func (p *partition) gone(proven uint64) (waiting bool) {
	high := p.highestCommit()
	if p.paused != nil || high <= p.next {
		return false // nothing known published past next yet: wait
	}
	if p.next >= p.horizon {
		return false // entries forgotten may describe next: read them again first
	}
	resume := p.horizon
	for _, e := range p.pending {
		if e.FirstOffset <= p.next && p.next <= e.LastOffset {
			return false
		}
		if e.FirstOffset > p.next {
			resume = min(resume, e.FirstOffset)
		}
	}
	if proven <= p.changed {
		return true
	}
	if resume == math.MaxInt64 {
		resume = high
	}
	p.paused = &Pause{Partition: p.tp, Offset: p.next, ResumeHint: resume, Cause: p.cause}
	return false
}
