package digest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

var tpT = metadata.TopicPartition{Topic: "t", Partition: 0}

// leaderLog is a leader's log of one-offset batches and its chain, begun
// at offset 0 with Origin, from which entries are cut.
type leaderLog struct {
	batches []storage.Batch
	values  []uint64 // values[i]: the chain after batches[i]
}

func newLeaderLog(n int, tag string) *leaderLog {
	l := &leaderLog{}
	v := digest.Origin
	for i := range n {
		b := storage.Batch{FirstOffset: int64(i), LastOffset: int64(i), Epoch: 1, Data: fmt.Appendf(nil, "%s-%d", tag, i)}
		v = digest.Next(v, b)
		l.batches = append(l.batches, b)
		l.values = append(l.values, v)
	}
	return l
}

// entry is the entry for offsets [from, to) as the leader publishes it.
func (l *leaderLog) entry(from, to int64) metadata.Entry {
	return metadata.Entry{Partition: tpT, RecordEpoch: 1, PublisherEpoch: 1, WriterBrokerID: 1, FirstOffset: from, LastOffset: to - 1,
		Digest: l.values[to-1], DigestFrom: 0}
}

// entryFrom is the entry for [from, to) of a publisher whose log is base's
// below from and l's from there on, on the chain begun at 0: an old
// leader's entry that a new leader's records at the same offsets replace.
func (l *leaderLog) entryFrom(base *leaderLog, from, to int64) metadata.Entry {
	v := digest.Over(digest.Over(digest.Origin, base.span(0, from)), l.span(from, to))
	return metadata.Entry{Partition: tpT, RecordEpoch: 1, PublisherEpoch: 1, WriterBrokerID: 1, FirstOffset: from, LastOffset: to - 1,
		Digest: v, DigestFrom: 0}
}

// republisher is e as the leader of epoch published it.
func republisher(e metadata.Entry, epoch int32) metadata.Entry {
	e.PublisherEpoch, e.WriterBrokerID = epoch, 2
	return e
}

func (l *leaderLog) span(from, to int64) []storage.Batch { return l.batches[from:to] }

// step is one event for a Tracker and what it must return.
type step struct {
	name string
	do   func(t *digest.Tracker) digest.Result
	want digest.Result
	// mismatch, if set, is the range [from, to) the mismatch must name.
	mismatch [2]int64
}

func TestTracker(t *testing.T) {
	l := newLeaderLog(40, "leader")
	other := newLeaderLog(40, "zombie") // the same offsets, other bytes
	applied := func(e metadata.Entry, bs []storage.Batch) func(t *digest.Tracker) digest.Result {
		return func(tr *digest.Tracker) digest.Result { return tr.Applied(e, bs, bs[len(bs)-1].LastOffset+1) }
	}
	held := func(e metadata.Entry, logEnd int64) func(t *digest.Tracker) digest.Result {
		return func(tr *digest.Tracker) digest.Result { return tr.Held(e, logEnd, e.RecordEpoch) }
	}
	truncated := func(end int64) func(t *digest.Tracker) digest.Result {
		return func(tr *digest.Tracker) digest.Result { tr.Truncated(end); return digest.Result{} }
	}
	checked, taken := digest.Result{Checked: true}, digest.Result{Taken: true}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a chain followed from its start checks every entry", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"next", applied(l.entry(5, 9), l.span(5, 9)), checked, [2]int64{}},
		}},
		{"a replica that knows no value takes the first entry's and checks the next", []step{
			{"inside", applied(l.entry(5, 9), l.span(5, 9)), taken, [2]int64{}},
			{"next", applied(l.entry(9, 12), l.span(9, 12)), checked, [2]int64{}},
		}},
		{"other bytes at the same offsets are a mismatch over the range since the last agreement", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"zombie's bytes", applied(l.entry(5, 9), other.span(5, 9)), digest.Result{Checked: true}, [2]int64{5, 9}},
			{"the leader's next entry checks again", applied(l.entry(9, 12), l.span(9, 12)), checked, [2]int64{}},
		}},
		{"a log that differs before it applies is caught at the next entry", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"stale entry of no digest", applied(metadata.Entry{Partition: tpT, FirstOffset: 5, LastOffset: 6}, other.span(5, 7)), digest.Result{}, [2]int64{}},
			{"the leader's next", applied(l.entry(7, 10), l.span(7, 10)), digest.Result{Checked: true}, [2]int64{5, 10}},
		}},
		{"an entry applied in parts is checked at its end", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"first part", applied(l.entry(5, 10), l.span(5, 7)), digest.Result{}, [2]int64{}},
			{"rest", applied(l.entry(5, 10), l.span(7, 10)), checked, [2]int64{}},
		}},
		{"a chain that starts again is followed from its start", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"restarted", applied(restarted(5, 5, 8, other), other.span(5, 8)), checked, [2]int64{}},
			{"its next entry", applied(restarted(5, 8, 12, other), other.span(8, 12)), checked, [2]int64{}},
		}},
		{"a chain that starts inside what the replica holds is taken at its end", []step{
			{"start", applied(l.entry(0, 6), l.span(0, 6)), checked, [2]int64{}},
			{"restarted at 5, applied from 6", applied(restarted(5, 5, 8, l), l.span(6, 8)), taken, [2]int64{}},
			{"its next entry", applied(restarted(5, 8, 12, l), l.span(8, 12)), checked, [2]int64{}},
		}},
		{"records got from an entry of no digest continue the replica's chain, not a restarted one", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"a republished copy", applied(metadata.Entry{Partition: tpT, FirstOffset: 5, LastOffset: 7}, l.span(5, 8)), digest.Result{}, [2]int64{}},
			{"the restarted chain's entry, held", held(restarted(5, 5, 8, l), 8), taken, [2]int64{}},
			{"the restarted chain's next entry", applied(restarted(5, 8, 12, l), l.span(8, 12)), checked, [2]int64{}},
			{"the first chain's entry, held, is still checked", held(l.entry(3, 5), 12), checked, [2]int64{}},
		}},
		{"a zombie's entry applied between the leader's is caught at the leader's next", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"the zombie's, of its own chain", applied(restarted(3, 5, 9, other), other.span(5, 9)), taken, [2]int64{}},
			{"the leader's next", applied(l.entry(9, 12), l.span(9, 12)), digest.Result{Checked: true}, [2]int64{5, 12}},
			{"and the one after agrees again", applied(l.entry(12, 14), l.span(12, 14)), checked, [2]int64{}},
		}},
		{"a stale entry applied twice, after the truncation that removed it, is caught at the new leader's next", []step{
			{"the old leader's", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"its next, later fenced", applied(other.entryFrom(l, 5, 9), other.span(5, 9)), checked, [2]int64{}},
			{"truncated where the new leader's epoch starts", truncated(5), digest.Result{}, [2]int64{}},
			{"the stale entry again", applied(other.entryFrom(l, 5, 9), other.span(5, 9)), checked, [2]int64{}},
			{"the new leader's next, over its own records at 5-8", applied(republisher(l.entry(9, 12), 2), l.span(9, 12)), digest.Result{Checked: true}, [2]int64{0, 12}},
		}},
		{"an entry of another chain begun below it is never compared", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"no digest", applied(metadata.Entry{Partition: tpT, FirstOffset: 5, LastOffset: 7}, l.span(5, 8)), digest.Result{}, [2]int64{}},
			{"another chain, applied", applied(restarted(5, 8, 12, l), l.span(8, 12)), taken, [2]int64{}},
		}},
		{"a truncation to a remembered end continues the chain", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"diverged", applied(other.entry(5, 9), other.span(5, 9)), digest.Result{Checked: true}, [2]int64{5, 9}},
			{"truncate", truncated(5), digest.Result{}, [2]int64{}},
			{"the leader's", applied(l.entry(5, 9), l.span(5, 9)), checked, [2]int64{}},
		}},
		{"a truncation past what it remembers takes the next value", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"truncate", truncated(3), digest.Result{}, [2]int64{}},
			{"the leader's", applied(l.entry(3, 9), l.span(3, 9)), taken, [2]int64{}},
		}},
		{"an entry already held is checked where its end is remembered", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"next", applied(l.entry(5, 9), l.span(5, 9)), checked, [2]int64{}},
			{"held again", held(l.entry(5, 9), 9), checked, [2]int64{}},
			{"held, another chain's", held(other.entry(5, 9), 9), digest.Result{Checked: true}, [2]int64{5, 9}},
			{"held, end not remembered", held(l.entry(0, 3), 9), digest.Result{}, [2]int64{}},
		}},
		{"an entry of an epoch the replica's records at its end are not of is neither compared nor taken", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"a truncated epoch's entry, held", func(tr *digest.Tracker) digest.Result { return tr.Held(other.entry(0, 5), 5, 2) }, digest.Result{}, [2]int64{}},
			{"nor is one whose epoch there it does not know", func(tr *digest.Tracker) digest.Result { return tr.Held(other.entry(0, 5), 5, -1) }, digest.Result{}, [2]int64{}},
		}},
		{"a replica started from its log takes the value of the entry ending at its log end", []step{
			{"held below the end", held(l.entry(0, 5), 9), digest.Result{}, [2]int64{}},
			{"held at the end", held(l.entry(5, 9), 9), taken, [2]int64{}},
			{"first applied is checked", applied(l.entry(9, 12), l.span(9, 12)), checked, [2]int64{}},
		}},
		{"entries of no digest are folded and checked at the next that has one", []step{
			{"start", applied(l.entry(0, 5), l.span(0, 5)), checked, [2]int64{}},
			{"no digest", applied(metadata.Entry{Partition: tpT, FirstOffset: 5, LastOffset: 8}, l.span(5, 9)), digest.Result{}, [2]int64{}},
			{"next", applied(l.entry(9, 12), l.span(9, 12)), checked, [2]int64{}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr digest.Tracker
			for _, s := range tc.steps {
				got := s.do(&tr)
				if s.mismatch != [2]int64{} {
					require.NotNil(t, got.Mismatch, s.name)
					assert.Equal(t, s.mismatch, [2]int64{got.Mismatch.From, got.Mismatch.To}, s.name)
					assert.ErrorIs(t, got.Mismatch, digest.ErrMismatch)
					assert.Equal(t, tpT, got.Mismatch.Partition)
					got.Mismatch = nil
				} else {
					assert.Nil(t, got.Mismatch, s.name)
				}
				got.Reread = nil // TestTrackerReread checks them
				assert.Equal(t, s.want, got, s.name)
			}
		})
	}
}

// restarted is the entry for [from, to) of a leader that began a chain at
// start, over l's batches.
func restarted(start, from, to int64, l *leaderLog) metadata.Entry {
	return metadata.Entry{Partition: tpT, RecordEpoch: 2, PublisherEpoch: 2, WriterBrokerID: 2, FirstOffset: from, LastOffset: to - 1,
		Digest: digest.Over(digest.Origin, l.span(start, to)), DigestFrom: start}
}

func TestTrackerValueAndBound(t *testing.T) {
	l := newLeaderLog(40, "leader")
	var tr digest.Tracker
	_, ok := tr.Value(0)
	assert.False(t, ok, "the zero Tracker knows no value")
	for i := int64(0); i < 20; i++ {
		tr.Applied(l.entry(i, i+1), l.span(i, i+1), i+1)
	}
	v, ok := tr.Value(20)
	require.True(t, ok)
	assert.Equal(t, digest.Chain{From: 0, Value: l.values[19]}, v)
	_, ok = tr.Value(19)
	assert.False(t, ok, "a value is known only at the log end")
	// It remembers a bounded number of ends: a truncation far back
	// finds none.
	tr.Truncated(5)
	_, ok = tr.Value(5)
	assert.False(t, ok)
	tr.Reset()
	_, ok = tr.Value(5)
	assert.False(t, ok)
}

// TestTrackerReread checks the records a replica held when it started:
// it takes the leader's value at its log end without reading, and is
// told how to check what it holds by reading it back.
func TestTrackerReread(t *testing.T) {
	l := newLeaderLog(20, "leader")
	started := func(t *testing.T) (*digest.Tracker, digest.Reread) {
		var tr digest.Tracker
		// A replica that starts holding [0, 9) reads the retained
		// metadata: the entries below its end, then the one ending there.
		require.Equal(t, digest.Result{}, tr.Held(l.entry(0, 5), 9, 1))
		r := tr.Held(l.entry(5, 9), 9, 1)
		require.True(t, r.Taken)
		require.NotNil(t, r.Reread)
		assert.Equal(t, int64(5), r.Reread.From)
		assert.Equal(t, int64(9), r.Reread.To)
		return &tr, *r.Reread
	}
	t.Run("the records as appended", func(t *testing.T) {
		tr, rr := started(t)
		assert.Equal(t, digest.Result{Checked: true}, tr.Reread(rr, l.span(5, 9)))
	})
	for _, tc := range []struct {
		name    string
		batches func() []storage.Batch
	}{
		{"a byte changed on disk", func() []storage.Batch {
			bs := append([]storage.Batch(nil), l.span(5, 9)...)
			bs[2].Data = append([]byte(nil), bs[2].Data...)
			bs[2].Data[0] ^= 0x20
			return bs
		}},
		{"a batch missing", func() []storage.Batch { return append(append([]storage.Batch(nil), l.span(5, 6)...), l.span(7, 9)...) }},
		{"the range cut short", func() []storage.Batch { return l.span(5, 8) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, rr := started(t)
			got := tr.Reread(rr, tc.batches())
			require.NotNil(t, got.Mismatch)
			assert.Equal(t, "reread", got.Mismatch.What)
			assert.Equal(t, [2]int64{5, 9}, [2]int64{got.Mismatch.From, got.Mismatch.To})
		})
	}
	t.Run("the first entry's records are checked from Origin", func(t *testing.T) {
		var tr digest.Tracker
		r := tr.Held(l.entry(0, 5), 5, 1)
		require.NotNil(t, r.Reread)
		assert.Equal(t, digest.Origin, r.Reread.Before)
		assert.Equal(t, digest.Result{Checked: true}, tr.Reread(*r.Reread, l.span(0, 5)))
	})
	t.Run("no value before the entry, nothing to reread", func(t *testing.T) {
		var tr digest.Tracker
		r := tr.Held(l.entry(5, 9), 9, 1)
		assert.True(t, r.Taken)
		assert.Nil(t, r.Reread)
	})
}
