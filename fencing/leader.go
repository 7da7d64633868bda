package fencing

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// LeaderLineage is a follower's view of the leader's epoch lineage, learned
// from the epoch-start markers leaders publish. Markers arrive late, out of
// order, duplicated, and from leaders that have since been deposed; the view
// is a function of the set of publications merged so far, never of their
// order, so every follower that has seen the same markers decides the same
// way.
//
// A publication is what one call to Merge receives: the markers one leader
// published together, which by the marker contract (see the package
// documentation) are that leader's lineage from some offset on. The publisher
// is the highest epoch among them. Each offset is described by the newest
// publication that covers it, the one with the highest publisher whose first
// marker starts at or below the offset, because a newer leader's log is the
// truth for everything it covers (Kafka's rule that the current leader
// decides). A single marker is a publication of one entry; merging markers
// one by one therefore gives the plain union of markers in which an epoch is
// superseded by any later epoch that starts at or before it.
//
// Why publications and not just a union of markers: after a fast failover
// (KIP-279) a leader's lineage can lack an epoch that another leader wrote in
// between, e.g. epoch 5 wrote offset 150, epoch 6 wrote its own record at
// 150 and died, and epoch 7 was elected on a replica that still held epoch
// 5's record at 150. The markers (5, 100), (6, 150), (7, 151) say offset 150
// belongs to epoch 6, which is false; epoch 7's publication [(5, 100) (7,
// 151)] says it belongs to epoch 5, and being newer it wins.
//
// The zero value is an empty view ready to use; it binds to the partition of
// the first markers merged. A LeaderLineage is not safe for concurrent use.
type LeaderLineage struct {
	partition metadata.TopicPartition
	bound     bool
	// pubs is a staircase: ascending publisher and ascending first start,
	// each publication cut below the next one's first start. A publication
	// whose offsets are all covered by a newer one is gone.
	pubs []publication
	// view is the lineage the staircase describes, rebuilt on every Merge.
	view Lineage
}

// publication is one leader's lineage from entries[0].StartOffset on.
type publication struct {
	publisher int32
	entries   []storage.EpochEntry // increasing epoch, strictly increasing start
}

func (p publication) from() int64 { return p.entries[0].StartOffset }

// Merge adds one publication: the markers for this partition that one
// leader published together (one metadata.Message's markers for the
// partition). Their order within the call does not matter. Merging the same
// publication again, or any publications in any order, gives the same view.
//
// Conflicts are settled without regard to arrival order: within the
// publications of one publisher an epoch keeps its lowest start (a republished
// lineage can only have moved a start up, when the log start passed it), and
// an epoch is dropped when a later epoch of the same publisher starts at or
// before it (Kafka's rule for an epoch that wrote nothing). Across publishers
// the newer publisher wins over the offsets it covers. If a newer
// publication's first epoch is older than an epoch the older publications
// put below its first offset, the newer one says that epoch is not in its
// log and cannot say what is, so the view starts at the newer publication's
// first offset rather than guess; under the marker contract that happens
// only while a publication in between is still missing.
//
// Merge rejects the whole call, learning nothing from it, with an error
// wrapping ErrInvalidEpochEntry if an epoch or start is negative, if the
// markers name different partitions or a partition other than the one this
// view is bound to, or if a later epoch starts before an earlier one.
func (l *LeaderLineage) Merge(markers ...metadata.EpochStart) error {
	if len(markers) == 0 {
		return nil
	}
	tp := markers[0].Partition
	if l.bound && tp != l.partition {
		return fmt.Errorf("%w: marker for partition %s merged into the lineage of %s", ErrInvalidEpochEntry, tp, l.partition)
	}
	entries := make([]storage.EpochEntry, 0, len(markers))
	for _, m := range markers {
		if m.Partition != tp {
			return fmt.Errorf("%w: one publication names partitions %s and %s", ErrInvalidEpochEntry, tp, m.Partition)
		}
		if err := checkEntry(m.Epoch, m.StartOffset); err != nil {
			return fmt.Errorf("partition %s: %w", tp, err)
		}
		entries = append(entries, storage.EpochEntry{Epoch: m.Epoch, StartOffset: m.StartOffset})
	}
	entries = minStartPerEpoch(entries)
	for i := 1; i < len(entries); i++ {
		if entries[i].StartOffset < entries[i-1].StartOffset {
			return fmt.Errorf("%w: partition %s: epoch %d starts at %d, before epoch %d at %d in the same publication",
				ErrInvalidEpochEntry, tp, entries[i].Epoch, entries[i].StartOffset, entries[i-1].Epoch, entries[i-1].StartOffset)
		}
	}
	l.partition, l.bound = tp, true

	pub := publication{publisher: entries[len(entries)-1].Epoch}
	if i := slices.IndexFunc(l.pubs, func(p publication) bool { return p.publisher == pub.publisher }); i >= 0 {
		entries = minStartPerEpoch(append(entries, l.pubs[i].entries...))
		l.pubs = slices.Delete(l.pubs, i, i+1)
	}
	pub.entries = dropSuperseded(entries)
	l.pubs = append(l.pubs, pub)
	l.restack()
	return nil
}

// minStartPerEpoch sorts entries by epoch and keeps the lowest start of each
// epoch.
func minStartPerEpoch(entries []storage.EpochEntry) []storage.EpochEntry {
	slices.SortFunc(entries, func(a, b storage.EpochEntry) int {
		return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.StartOffset, b.StartOffset))
	})
	return slices.CompactFunc(entries, func(a, b storage.EpochEntry) bool { return a.Epoch == b.Epoch })
}

// dropSuperseded removes, from entries sorted by epoch, every entry that a
// later entry starts at or before: that epoch wrote nothing that survived.
// The result has strictly increasing starts.
func dropSuperseded(entries []storage.EpochEntry) []storage.EpochEntry {
	out := entries[:0]
	for _, e := range entries {
		for len(out) > 0 && out[len(out)-1].StartOffset >= e.StartOffset {
			out = out[:len(out)-1]
		}
		out = append(out, e)
	}
	return out
}

// restack restores the staircase and rebuilds the view.
func (l *LeaderLineage) restack() {
	slices.SortFunc(l.pubs, func(a, b publication) int { return cmp.Compare(b.publisher, a.publisher) })
	covered := int64(math.MaxInt64) // lowest first start among newer publications
	kept := l.pubs[:0]
	for _, p := range l.pubs {
		n := 0
		for n < len(p.entries) && p.entries[n].StartOffset < covered {
			n++
		}
		if n == 0 {
			continue
		}
		p.entries = p.entries[:n]
		covered = p.from()
		kept = append(kept, p)
	}
	clear(l.pubs[len(kept):])
	l.pubs = kept
	slices.Reverse(l.pubs)

	l.view.entries = l.view.entries[:0]
	for _, p := range l.pubs {
		for _, e := range p.entries {
			if n := len(l.view.entries); n > 0 {
				last := l.view.entries[n-1]
				if last.Epoch == e.Epoch {
					continue // the same epoch, seen again from a newer publisher
				}
				if last.Epoch > e.Epoch {
					// The newer publisher says e.Epoch was still running at
					// its first start, so the older publications' later
					// epochs below it are not in its log, and what its log
					// holds below that start is unknown: forget it (see
					// Merge).
					l.view.entries = l.view.entries[:0]
				}
			}
			l.view.entries = append(l.view.entries, e)
		}
	}
}

// Lineage returns a copy of the merged view as a plain Lineage, for the
// questions Lineage answers (EndOffsetFor, EpochFor). It is a copy: merge
// into the LeaderLineage, not into it.
func (l *LeaderLineage) Lineage() *Lineage {
	if l == nil {
		return &Lineage{}
	}
	return l.view.Clone()
}

// Latest returns the highest epoch the view knows, with its start, and false
// if no marker has been merged.
func (l *LeaderLineage) Latest() (storage.EpochEntry, bool) {
	if l == nil {
		return storage.EpochEntry{}, false
	}
	return l.view.Latest()
}

// At returns the epoch the view assigns to offset and the publisher whose
// publication says so: the authority for that offset. It reports false for
// an offset below everything the view covers.
func (l *LeaderLineage) At(offset int64) (epoch, publisher int32, ok bool) {
	i, pub := l.at(offset)
	if i < 0 {
		return UndefinedEpoch, UndefinedEpoch, false
	}
	return l.view.entries[i].Epoch, pub, true
}

// at returns the index of the view entry covering offset (or -1) and the
// publisher of the publication covering it.
func (l *LeaderLineage) at(offset int64) (int, int32) {
	if l == nil {
		return -1, UndefinedEpoch
	}
	i := l.view.indexFor(offset)
	if i < 0 {
		return -1, UndefinedEpoch
	}
	for k := len(l.pubs) - 1; k >= 0; k-- {
		if l.pubs[k].from() <= offset {
			return i, l.pubs[k].publisher
		}
	}
	return -1, UndefinedEpoch // unreachable: the view starts at or above the first publication
}

// Clone returns an independent copy.
func (l *LeaderLineage) Clone() *LeaderLineage {
	if l == nil {
		return &LeaderLineage{}
	}
	c := &LeaderLineage{partition: l.partition, bound: l.bound, view: Lineage{entries: l.view.Entries()}}
	for _, p := range l.pubs {
		c.pubs = append(c.pubs, publication{publisher: p.publisher, entries: slices.Clone(p.entries)})
	}
	return c
}

// String formats the view and the publications behind it, as
// "[(5, 100) (6, 151)] by 5@100 6@121": epoch 6's publication covers offsets
// from 121 on, epoch 5's those from 100 to 120.
func (l *LeaderLineage) String() string {
	if l == nil {
		return "[]"
	}
	var b strings.Builder
	b.WriteString(l.view.String())
	if len(l.pubs) > 0 {
		b.WriteString(" by")
		for _, p := range l.pubs {
			fmt.Fprintf(&b, " %d@%d", p.publisher, p.from())
		}
	}
	return b.String()
}
