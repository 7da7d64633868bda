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

// Tracker is one replica's chain for one partition: its value at the
// replica's log end when known, and its values at the ends of the entries
// applied last. A follower or a direct reader feeds it what it applies and
// the entries it skips as already held, and it compares each with the
// value the entry's publisher published there. It does no I/O and is not
// safe for concurrent use; the zero value knows no value.
type Tracker struct {
	known bool
	value uint64 // at the log end
	// since is the offset from which the log is known to agree with its
	// leaders' chains: where a value was last taken or checked.
	since int64
	ends  []boundary // ascending by offset, at most trackedEnds
}

type boundary struct {
	offset int64
	value  uint64
}

// Result is what a Tracker learned from one entry.
type Result struct {
	// Checked: a value of the replica's was compared with the entry's.
	Checked bool
	// Taken: the replica knew no value, and took the entry's, to check
	// what it appends from there on.
	Taken bool
	// Mismatch, if not nil, is the comparison that failed. Its Partition
	// is the entry's.
	Mismatch *Mismatch
}

// Reset forgets the chain: the log was loaded anew, or moved to an offset
// the Tracker knows nothing of.
func (t *Tracker) Reset() { t.known, t.ends = false, t.ends[:0] }

// Value returns the chain's value at offset, the log end, if known.
func (t *Tracker) Value(offset int64) (uint64, bool) {
	if !t.known || len(t.ends) == 0 || t.ends[len(t.ends)-1].offset != offset {
		return 0, false
	}
	return t.value, true
}

// Truncated moves the log end back to end: the chain continues from the
// value remembered there, if any.
func (t *Tracker) Truncated(end int64) {
	i := len(t.ends)
	for i > 0 && t.ends[i-1].offset > end {
		i--
	}
	t.ends = t.ends[:i]
	t.known = i > 0 && t.ends[i-1].offset == end
	if t.known {
		t.value = t.ends[i-1].value
		t.since = min(t.since, end)
	}
}

// Applied carries the chain over batches, the part of e's section just
// appended, after which the log ends at end, and checks the value
// against e's digest when they reach the entry's end.
func (t *Tracker) Applied(e metadata.Entry, batches []storage.Batch, end int64) Result {
	if len(batches) == 0 {
		return Result{}
	}
	if e.DigestStarts {
		// The publisher's chain begins at the entry's first offset: what
		// came before is another chain's. Applied from there, this one
		// follows it; applied from inside, its start is records this log
		// got elsewhere, and the value is unknown until taken.
		t.known, t.value, t.since = batches[0].FirstOffset == e.FirstOffset, Origin, e.FirstOffset
	}
	atEnd := e.Digest != 0 && end == e.LastOffset+1
	if !t.known {
		if !atEnd {
			return Result{}
		}
		t.set(end, e.Digest)
		t.since = end
		return Result{Taken: true}
	}
	v := Over(t.value, batches)
	if !atEnd {
		t.set(end, v)
		return Result{}
	}
	r := t.check(e, t.since, end, v, "applied")
	// Later checks compare what comes next, not the same difference
	// again.
	t.set(end, e.Digest)
	t.since = end
	return r
}

// Held checks an entry whose records the replica already holds (its log
// ends at logEnd, at or after the entry's end) where it remembers its
// own value at the entry's end. Where the entry ends at logEnd and the
// Tracker knows no value (the replica started from its local log), it
// takes the entry's, so that the first entries applied next are checked
// without reading the log again.
func (t *Tracker) Held(e metadata.Entry, logEnd int64) Result {
	end := e.LastOffset + 1
	if e.Digest == 0 || end > logEnd {
		return Result{}
	}
	for i, b := range t.ends {
		if b.offset == end {
			from := end
			if i > 0 {
				from = t.ends[i-1].offset
			}
			return t.check(e, from, end, b.value, "held")
		}
	}
	if !t.known && end == logEnd {
		t.set(end, e.Digest)
		t.since = end
		return Result{Taken: true}
	}
	return Result{}
}

// set makes v the value at the log end, at.
func (t *Tracker) set(at int64, v uint64) {
	t.known, t.value = true, v
	if n := len(t.ends); n > 0 && t.ends[n-1].offset >= at {
		t.ends = t.ends[:0] // a log end at or below one remembered
	}
	if len(t.ends) == trackedEnds {
		t.ends = append(t.ends[:0], t.ends[1:]...)
	}
	t.ends = append(t.ends, boundary{at, v})
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
