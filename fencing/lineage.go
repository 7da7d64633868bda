package fencing

import (
	"errors"
	"fmt"
	"strings"

	"github.com/activetier/activetier/storage"
)

// UndefinedEpoch and UndefinedOffset are what EndOffsetFor answers when it
// knows nothing about the requested epoch. They are Kafka's UNDEFINED_EPOCH and
// UNDEFINED_EPOCH_OFFSET, so a broker can put them on the wire unchanged.
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
)

// ErrInvalidEpochEntry is returned, wrapped with the offending values, when an
// epoch or a start offset is negative, or when the markers of one publication
// contradict each other. Test for it with errors.Is.
var ErrInvalidEpochEntry = errors.New("fencing: invalid epoch entry")

// Lineage is the epoch history of one partition's log: which leader epoch
// wrote which range of offsets. Entries are kept in increasing epoch and
// strictly increasing start offset; an epoch covers the offsets from its start
// up to the start of the next entry, and the latest epoch covers everything
// from its start on. This is Kafka's LeaderEpochFileCache, with the same
// semantics for Assign, EndOffsetFor, EpochFor and the two truncations.
//
// A follower keeps one Lineage for its own log (it calls Assign on every
// append and TruncateFromEnd on every truncation, and persists Entries the
// way Kafka persists its leader-epoch-checkpoint). The follower's view of the
// leader's lineage is a LeaderLineage, which is built differently.
//
// The zero value is an empty lineage ready to use. A Lineage is not safe for
// concurrent use: it belongs to the goroutine that owns the partition, as the
// log it describes does.
type Lineage struct {
	entries []storage.EpochEntry
}

// NewLineage returns a lineage holding entries, assigned in the given order
// (so entries that a later one conflicts with are removed, as Assign does).
func NewLineage(entries ...storage.EpochEntry) (*Lineage, error) {
	l := &Lineage{}
	for _, e := range entries {
		if err := l.Assign(e.Epoch, e.StartOffset); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Assign records that epoch starts at offset start, as Kafka's assign does
// when a batch is appended to the log.
//
// Assigning the latest epoch again at the same or a later start changes
// nothing: appends within one epoch call Assign for every batch and only the
// first one counts. Any other assignment first removes, from the end, every
// entry whose epoch is at least epoch or whose start is at least start, and
// then appends (epoch, start). That rule is Kafka's and it is deliberate: the
// lineage describes the log as it is now, and an append at a lower start or
// with a lower epoch than the latest can only happen after the log was
// truncated and rewritten, so the removed entries describe records that are
// gone. Rejecting such an assignment instead would leave a lineage that
// disagrees with its log, which is worse than either answer. A follower driven
// by Decide never needs that path: it truncates first and only appends epochs
// at least as new as its latest.
//
// A negative epoch or start is rejected with an error wrapping
// ErrInvalidEpochEntry.
func (l *Lineage) Assign(epoch int32, start int64) error {
	if err := checkEntry(epoch, start); err != nil {
		return err
	}
	if n := len(l.entries); n > 0 {
		latest := l.entries[n-1]
		if latest.Epoch == epoch && start >= latest.StartOffset {
			return nil
		}
	}
	for n := len(l.entries); n > 0; n-- {
		last := l.entries[n-1]
		if last.Epoch < epoch && last.StartOffset < start {
			break
		}
		l.entries = l.entries[:n-1]
	}
	l.entries = append(l.entries, storage.EpochEntry{Epoch: epoch, StartOffset: start})
	return nil
}

func checkEntry(epoch int32, start int64) error {
	if epoch < 0 {
		return fmt.Errorf("%w: epoch %d at offset %d: epoch is negative", ErrInvalidEpochEntry, epoch, start)
	}
	if start < 0 {
		return fmt.Errorf("%w: epoch %d at offset %d: start offset is negative", ErrInvalidEpochEntry, epoch, start)
	}
	return nil
}

// Len returns the number of entries.
func (l *Lineage) Len() int {
	if l == nil {
		return 0
	}
	return len(l.entries)
}

// Latest returns the entry with the highest epoch, and false if the lineage
// is empty.
func (l *Lineage) Latest() (storage.EpochEntry, bool) {
	if l.Len() == 0 {
		return storage.EpochEntry{}, false
	}
	return l.entries[len(l.entries)-1], true
}

// Earliest returns the entry with the lowest epoch, and false if the lineage
// is empty. Its start is the lowest offset the lineage knows anything about.
func (l *Lineage) Earliest() (storage.EpochEntry, bool) {
	if l.Len() == 0 {
		return storage.EpochEntry{}, false
	}
	return l.entries[0], true
}

// Entries returns a copy of the entries in increasing epoch order.
func (l *Lineage) Entries() []storage.EpochEntry {
	if l.Len() == 0 {
		return nil
	}
	return append([]storage.EpochEntry(nil), l.entries...)
}

// Clone returns an independent copy.
func (l *Lineage) Clone() *Lineage {
	return &Lineage{entries: l.Entries()}
}

// String formats the lineage as its entries, "[(5, 100) (6, 151)]".
func (l *Lineage) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range l.Entries() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.String())
	}
	b.WriteByte(']')
	return b.String()
}

// EpochFor returns the epoch that wrote offset: the entry with the greatest
// start at or below it. It reports false for an offset below the earliest
// start, where the lineage knows nothing. Offsets at or past the latest start
// belong to the latest epoch: the lineage does not know where the log ends.
func (l *Lineage) EpochFor(offset int64) (int32, bool) {
	i := l.indexFor(offset)
	if i < 0 {
		return UndefinedEpoch, false
	}
	return l.entries[i].Epoch, true
}

// indexFor returns the index of the entry covering offset, or -1.
func (l *Lineage) indexFor(offset int64) int {
	if l.Len() == 0 {
		return -1
	}
	// Lineages hold a handful of entries; a backward scan finds the usual
	// case (an offset in the latest epoch) first.
	for i := len(l.entries) - 1; i >= 0; i-- {
		if l.entries[i].StartOffset <= offset {
			return i
		}
	}
	return -1
}

// endAfter returns the start of the entry after index i, or ok=false when i is
// the latest entry (whose end is unknown).
func (l *Lineage) endAfter(i int) (int64, bool) {
	if i+1 < len(l.entries) {
		return l.entries[i+1].StartOffset, true
	}
	return 0, false
}

// EndOffsetFor answers Kafka's OffsetsForLeaderEpoch question for
// requestedEpoch: the largest epoch at or below it and the offset where that
// epoch ended, which is the start of the next higher epoch, or logEnd if
// requestedEpoch is the latest epoch.
//
// It answers (UndefinedEpoch, UndefinedOffset) for UndefinedEpoch, for an
// empty lineage and for an epoch above the latest. For an epoch below the
// earliest entry it answers (requestedEpoch, earliest start), as Kafka has
// since KIP-279: the records of such an epoch, if any, all lie below the
// earliest start, so a follower truncates to it at most. Answering undefined
// there would push a Kafka follower back to high-watermark truncation, the
// behaviour KIP-101 removed.
func (l *Lineage) EndOffsetFor(requestedEpoch int32, logEnd int64) (int32, int64) {
	latest, ok := l.Latest()
	switch {
	case requestedEpoch == UndefinedEpoch || !ok || requestedEpoch > latest.Epoch:
		return UndefinedEpoch, UndefinedOffset
	case requestedEpoch == latest.Epoch:
		return requestedEpoch, logEnd
	}
	// requestedEpoch < latest: find the first entry with a higher epoch.
	for i, e := range l.entries {
		if e.Epoch > requestedEpoch {
			if i == 0 {
				return requestedEpoch, e.StartOffset
			}
			return l.entries[i-1].Epoch, e.StartOffset
		}
	}
	return UndefinedEpoch, UndefinedOffset // unreachable: latest.Epoch > requestedEpoch
}

// TruncateFromEnd removes every entry that starts at or after endOffset, as
// Kafka does when the log is truncated to endOffset. A negative endOffset
// changes nothing.
func (l *Lineage) TruncateFromEnd(endOffset int64) {
	if endOffset < 0 {
		return
	}
	for n := len(l.entries); n > 0 && l.entries[n-1].StartOffset >= endOffset; n-- {
		l.entries = l.entries[:n-1]
	}
}

// TruncateFromStart forgets the offsets below startOffset, as Kafka does when
// the log start moves (retention, deleteRecords). Entries that start at or
// below startOffset are removed, and the last of them is kept with its start
// moved to startOffset, since its epoch still covers startOffset. So
// TruncateFromStart(6) on [(1, 0) (2, 4) (3, 10)] leaves [(2, 6) (3, 10)].
func (l *Lineage) TruncateFromStart(startOffset int64) {
	i := 0
	for i < len(l.entries) && l.entries[i].StartOffset <= startOffset {
		i++
	}
	if i == 0 {
		return
	}
	straddling := l.entries[i-1]
	straddling.StartOffset = startOffset
	l.entries = append(l.entries[:0], l.entries[i-1:]...)
	l.entries[0] = straddling
}
