package digest

import (
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// trackedEnds bounds the values a Tracker remembers at the ends of the
// entries applied: enough for a truncation to the start of the current
// epoch, rarely more than a few entries back, to continue the chain
// instead of waiting to take a leader's value again.
const trackedEnds = 8

// Chain is a chain's value at some offset, and the offset it began at
// (where Origin is its value). The zero Chain is none.
type Chain struct {
	From  int64
	Value uint64
}

// Tracker is one replica's chains for one partition: their values at the
// replica's log end, and at the ends of the entries applied last. A
// follower or a direct reader feeds it what it applies and the entries it
// skips as already held, and it compares each with the value the entry's
// publisher published there, where both chains began at the same offset:
// values of chains begun elsewhere say nothing of each other.
//
// It follows up to maxChains chains at once: the one its leader publishes,
// and any other whose value it took while applying another publisher's
// entry. A chain is left when an entry of another is checked, so that an
// entry that another publisher's chain brought in (a zombie's, say) is
// still compared with the leader's chain at the leader's next entry. It
// does no I/O and is not safe for concurrent use; the zero value knows no
// chain.
type Tracker struct {
	at   chainSet   // at the log end
	ends []boundary // ascending by offset, at most trackedEnds
	// seen are values published at the ends of entries the replica
	// held already and could not check, newest last, at most
	// trackedEnds: where a value taken at the log end can be checked
	// from, by reading the records back.
	seen []boundary
}

// maxChains bounds the chains a Tracker follows at once: each costs a
// hash of every byte applied.
const maxChains = 3

// chainSet is the chains known at one offset, most recently used first.
type chainSet struct {
	n int
	c [maxChains]tracked
}

// tracked is a chain's value, and since, the offset up to which the log
// is known to agree with the log of by, the publisher whose value was
// last taken or checked there.
type tracked struct {
	Chain
	since int64
	by    publisher
}

// publisher is who published an entry: its leader epoch and broker. Two
// leaders of one epoch (a controller that handed it out twice) are two
// publishers.
type publisher struct {
	epoch, broker int32
}

func publisherOf(e metadata.Entry) publisher { return publisher{e.PublisherEpoch, e.WriterBrokerID} }

func (s *chainSet) get(from int64) (tracked, bool) {
	for _, c := range s.c[:s.n] {
		if c.From == from {
			return c, true
		}
	}
	return tracked{}, false
}

// put makes c the first chain, replacing one begun at the same offset, or
// the least recently used if the set is full.
func (s *chainSet) put(c tracked) {
	i := 0
	for i < s.n && s.c[i].From != c.From {
		i++
	}
	if i == s.n {
		if s.n < maxChains {
			s.n++
		}
		i = s.n - 1
	}
	copy(s.c[1:i+1], s.c[:i])
	s.c[0] = c
}

// only leaves c alone in the set.
func (s *chainSet) only(c tracked) { *s = chainSet{n: 1, c: [maxChains]tracked{c}} }

type boundary struct {
	offset int64
	chains chainSet
}

// Result is what a Tracker learned from one entry.
type Result struct {
	// Checked: a value of the replica's was compared with the entry's.
	Checked bool
	// Taken: the replica knew no value of the entry's chain, and took the
	// entry's, to check what it appends from there on.
	Taken bool
	// Mismatch, if not nil, is the comparison that failed. Its Partition
	// is the entry's.
	Mismatch *Mismatch
	// Reread, if not nil, says how to check the records the replica
	// held when it took a value: read them back from its log and hand
	// them to Tracker.Reread.
	Reread *Reread
}

// Reread is a range of records a replica holds, [From, To), and the value
// of the chain before them: read back and carried over Before, they must
// give the entry's digest.
type Reread struct {
	Entry    metadata.Entry
	From, To int64
	Before   uint64
}

// Reset forgets the chains: the log was loaded anew, or moved to an
// offset the Tracker knows nothing of.
func (t *Tracker) Reset() { t.at, t.ends, t.seen = chainSet{}, t.ends[:0], t.seen[:0] }

// Value returns the chain at offset, the log end, that the Tracker used
// last, if it knows one there.
func (t *Tracker) Value(offset int64) (Chain, bool) {
	if t.at.n == 0 || len(t.ends) == 0 || t.ends[len(t.ends)-1].offset != offset {
		return Chain{}, false
	}
	return t.at.c[0].Chain, true
}

// Truncated moves the log end back to end: the chains continue from the
// values remembered there, if any.
func (t *Tracker) Truncated(end int64) {
	i := len(t.ends)
	for i > 0 && t.ends[i-1].offset > end {
		i--
	}
	t.ends = t.ends[:i]
	t.at = chainSet{}
	if i > 0 && t.ends[i-1].offset == end {
		t.at = t.ends[i-1].chains
	}
}

// Applied carries the chains over batches, the part of e's section just
// appended, after which the log ends at end, and checks the value of e's
// chain against e's digest when they reach the entry's end.
func (t *Tracker) Applied(e metadata.Entry, batches []storage.Batch, end int64) Result {
	if len(batches) == 0 {
		return Result{}
	}
	start := batches[0].FirstOffset
	if _, ok := t.at.get(e.DigestFrom); e.Digest != 0 && !ok && start == e.DigestFrom {
		// The publisher's chain begins where these records do.
		t.at.put(tracked{Chain{e.DigestFrom, Origin}, start, publisherOf(e)})
	}
	for i := range t.at.c[:t.at.n] {
		t.at.c[i].Value = Over(t.at.c[i].Value, batches)
	}
	var r Result
	if e.Digest != 0 && end == e.LastOffset+1 {
		if c, ok := t.at.get(e.DigestFrom); ok {
			r = t.check(e, t.agreed(c, e), end, c.Value, "applied")
			// Later checks compare what comes next, not the same
			// difference again; the other chains' entries are done.
			t.at.only(tracked{Chain{e.DigestFrom, e.Digest}, end, publisherOf(e)})
		} else {
			// Another chain, begun below what this replica applied
			// of it: only its value at the entry's end can be taken.
			t.at.put(tracked{Chain{e.DigestFrom, e.Digest}, end, publisherOf(e)})
			r.Taken = true
		}
	}
	t.remember(end)
	return r
}

// Held checks an entry whose records the replica already holds (its log
// ends at logEnd, at or after the entry's end) where it remembers its
// own value of the entry's chain at the entry's end. Where the entry
// ends at logEnd and the Tracker knows no value of its chain (the
// replica started from its local log, or follows another chain), it
// takes the entry's, so that the first entries applied next are checked
// without reading the log again.
//
// epoch is the epoch of the replica's record at the entry's last offset,
// or -1 if it does not know: an entry of another epoch there describes
// records a later leader truncated (an entry fencing passes over as
// below the log end), a log this replica does not hold, and is neither
// compared nor taken.
func (t *Tracker) Held(e metadata.Entry, logEnd int64, epoch int32) Result {
	end := e.LastOffset + 1
	if e.Digest == 0 || end > logEnd || epoch != e.RecordEpoch {
		return Result{}
	}
	for i, b := range t.ends {
		if b.offset != end {
			continue
		}
		if c, ok := b.chains.get(e.DigestFrom); ok {
			// Agreed where it was taken or checked, if with this
			// publisher; else only where the chain began.
			from := c.From
			if c.by == publisherOf(e) && i > 0 {
				from = t.ends[i-1].offset
			}
			return t.check(e, from, end, c.Value, "held")
		}
	}
	if _, ok := t.at.get(e.DigestFrom); end == logEnd && !ok {
		t.at.put(tracked{Chain{e.DigestFrom, e.Digest}, end, publisherOf(e)})
		t.remember(end)
		r := Result{Taken: true}
		if before, ok := t.before(e); ok {
			r.Reread = &Reread{Entry: e, From: e.FirstOffset, To: end, Before: before}
		}
		return r
	}
	if len(t.seen) == trackedEnds {
		t.seen = append(t.seen[:0], t.seen[1:]...)
	}
	var c chainSet
	c.put(tracked{Chain: Chain{e.DigestFrom, e.Digest}, by: publisherOf(e)})
	t.seen = append(t.seen, boundary{end, c})
	return Result{}
}

// agreed returns the offset up to which the log is known to agree with
// the log of e's publisher on chain c: where c was last taken or checked,
// if against the same publisher; for another (a new leader, or a second
// leader of one epoch, whose log may differ from the one c agreed with
// anywhere), where the chain began, the one offset at which every log on
// it agrees.
func (t *Tracker) agreed(c tracked, e metadata.Entry) int64 {
	if c.by == publisherOf(e) {
		return c.since
	}
	return min(c.since, c.From)
}

// before returns the value of e's chain before e: Origin where the chain
// begins with e, or the value a publisher gave at e's first offset.
func (t *Tracker) before(e metadata.Entry) (uint64, bool) {
	if e.DigestFrom == e.FirstOffset {
		return Origin, true
	}
	for i := len(t.seen) - 1; i >= 0; i-- {
		if t.seen[i].offset == e.FirstOffset {
			if c, ok := t.seen[i].chains.get(e.DigestFrom); ok {
				return c.Value, true
			}
		}
	}
	return 0, false
}

// Reread checks batches, the records of r read back from the replica's
// log, against r's entry: carried over r.Before they must give its digest
// and cover [r.From, r.To) exactly. A difference is a Mismatch over the
// range: the log does not hold what it held when it was appended.
func (t *Tracker) Reread(r Reread, batches []storage.Batch) Result {
	next, v := r.From, r.Before
	for _, b := range batches {
		if b.FirstOffset != next {
			break
		}
		v = Next(v, b)
		next = b.LastOffset + 1
	}
	if next != r.To {
		v = 0 // the log does not hold the range whole: nothing matches
	}
	return t.check(r.Entry, r.From, r.To, v, "reread")
}

// remember records the chains at the log end, at.
func (t *Tracker) remember(at int64) {
	if n := len(t.ends); n > 0 && t.ends[n-1].offset == at {
		t.ends[n-1].chains = t.at
		return
	} else if n > 0 && t.ends[n-1].offset > at {
		t.ends = t.ends[:0] // a log end below one remembered
	}
	if t.at.n == 0 {
		return
	}
	if len(t.ends) == trackedEnds {
		t.ends = append(t.ends[:0], t.ends[1:]...)
	}
	t.ends = append(t.ends, boundary{at, t.at})
}

// check compares got, the replica's value at offset, with the digest e
// published there; a difference is a Mismatch over [from, offset).
func (t *Tracker) check(e metadata.Entry, from, offset int64, got uint64, what string) Result {
	if got == e.Digest {
		return Result{Checked: true}
	}
	return Result{Checked: true, Mismatch: &Mismatch{Partition: e.Partition, Epoch: e.PublisherEpoch, Publisher: e.WriterBrokerID,
		From: from, To: offset, Want: e.Digest, Got: got, What: what}}
}
