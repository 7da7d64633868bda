package readcore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// metaDriver drives a Core as directread's Reader does, over a metadata
// log of one partition held in memory: a round reads up to batch records
// from the cursor, after moving it back as the Core asks, and every
// section it fetches is there unless gone says otherwise.
type metaDriver struct {
	t      *testing.T
	c      *Core
	log    []*metadata.Message
	cursor int64
	batch  int
	gone   map[string]bool // object keys whose fetch fails as gone
	// yielded is what was yielded, in order; pauses what paused.
	yielded []storage.Batch
	pauses  []Pause
	maxHeld int // the most entries held after any call
}

func (d *metaDriver) publish(m *metadata.Message) { d.log = append(d.log, m) }

// round is one round of metadata reading.
func (d *metaDriver) round() {
	d.c.Round()
	for _, rw := range d.take().Rewinds {
		require.Equal(d.t, int32(0), rw.Partition)
		d.cursor = min(d.cursor, rw.From)
	}
	from := d.cursor
	high := int64(len(d.log))
	for range d.batch {
		if d.cursor >= high {
			break
		}
		d.c.Learn(0, d.cursor, d.log[d.cursor])
		d.cursor++
		d.maxHeld = max(d.maxHeld, d.c.Counters().Held)
	}
	require.NoError(d.t, d.c.MetadataRead(MetadataRead{Partition: 0, From: from, Next: d.cursor, High: high, HasHigh: true, AtEnd: d.cursor == from}))
}

// serve plans and fetches until nothing is planned; it reports whether
// anything was yielded or paused.
func (d *metaDriver) serve() bool {
	progressed := false
	for {
		d.c.Plan()
		rd := d.take()
		d.pauses = append(d.pauses, rd.Pauses...)
		progressed = progressed || len(rd.Pauses) > 0
		if len(rd.Fetches) == 0 {
			return progressed
		}
		for _, w := range rd.Fetches {
			e := w.Entry
			r := followcore.Result{Entry: e, Batches: []storage.Batch{{Epoch: e.RecordEpoch, FirstOffset: e.FirstOffset, LastOffset: e.LastOffset,
				Data: []byte(fmt.Sprintf("%d-%d", e.FirstOffset, e.LastOffset))}}}
			if d.gone[e.Object.Key] {
				r = followcore.Result{Entry: e, Outcome: followcore.Gone, Err: storage.ErrNotFound}
			}
			d.c.Fetched(time.Time{}, w, r)
			for _, y := range d.take().Yields {
				d.yielded = append(d.yielded, y.Batch)
				progressed = true
			}
		}
	}
}

// take takes the Core's Ready, as a driver does.
func (d *metaDriver) take() Ready {
	rd := d.c.Ready()
	d.c.Advance()
	return rd
}

// until drives rounds until tp's next offset is at least next or a
// partition paused, within a bound of rounds.
func (d *metaDriver) until(next int64) {
	d.t.Helper()
	for range 10_000 {
		d.serve()
		if n, _, _ := d.c.Position(tp); n >= next || len(d.pauses) > 0 {
			return
		}
		d.round()
	}
	n, _, _ := d.c.Position(tp)
	d.t.Fatalf("stuck at %d, short of %d", n, next)
}

// requireYielded requires the batches yielded since mark to be tp's,
// contiguous from from to to.
func (d *metaDriver) requireYielded(mark int, from, to int64) {
	d.t.Helper()
	next := from
	for _, b := range d.yielded[mark:] {
		require.Equal(d.t, next, b.FirstOffset, "yielded %d-%d", b.FirstOffset, b.LastOffset)
		next = b.LastOffset + 1
	}
	require.Equal(d.t, to, next)
}

// stalled returns a driver whose log holds, at record i, the entry of
// offsets [10i, 10i+9] in object o<i> (record 0 also the marker), with
// the commit stalled at 10, its core holding at most maxHeld entries.
func stalled(t *testing.T, maxHeld int, records int) *metaDriver {
	c, err := New(Config{Partitions: map[metadata.TopicPartition]int64{tp: 0}, MaxBytes: 1 << 20, MetadataPartitions: []int32{0}, MaxHeld: maxHeld})
	require.NoError(t, err)
	d := &metaDriver{t: t, c: c, batch: 7, gone: map[string]bool{}}
	for i := range int64(records) {
		m := &metadata.Message{Entries: []metadata.Entry{entry(1, 1, 10*i, 10*i+9, fmt.Sprintf("o%d", i))}}
		if i == 0 {
			m.Markers = []metadata.EpochStart{marker(1, 0)}
			m.Commits = []metadata.Commit{{Partition: tp, Epoch: 1, Offset: 10}}
		}
		d.publish(m)
	}
	return d
}

func commit(offset int64) *metadata.Message {
	return &metadata.Message{Commits: []metadata.Commit{{Partition: tp, Epoch: 1, Offset: offset}}}
}

// A Core whose partition's commit stalls holds at most MaxHeld of the
// entries it learns, those nearest its next offset; when the commit
// comes, it yields everything in order, reading the metadata again from
// the first record it forgot, never skipping and never judging forgotten
// records gone.
func TestCoreHeldBoundUnderAStalledCommit(t *testing.T) {
	for _, maxHeld := range []int{1, 2, 16, 50} {
		t.Run(fmt.Sprint(maxHeld), func(t *testing.T) {
			d := stalled(t, maxHeld, 100)
			d.until(10)
			for range 30 {
				d.round() // the whole log, the commit stalled
				d.serve()
			}
			cc := d.c.Counters()
			require.LessOrEqual(t, d.maxHeld, maxHeld)
			require.Positive(t, cc.Evicted)
			next, _, _ := d.c.Position(tp)
			require.Equal(t, int64(10), next)

			d.publish(commit(1000))
			d.until(1000)
			require.Empty(t, d.pauses)
			d.requireYielded(0, 0, 1000)
			require.LessOrEqual(t, d.maxHeld, maxHeld)
			require.Positive(t, d.c.Counters().Rewinds)
			t.Logf("MaxHeld %d: %d forgotten, %d rewinds", maxHeld, d.c.Counters().Evicted, d.c.Counters().Rewinds)
		})
	}
}

// Seeks at the bound: back to records whose entries were yielded and
// forgotten, which are read again from the metadata; forward past what
// is held, during the stall; and back to records truly gone, judged gone
// only after the metadata was read again, with where to resume.
func TestCoreSeekAtTheBound(t *testing.T) {
	d := stalled(t, 4, 100)
	d.publish(commit(1000))
	d.until(1000)
	d.requireYielded(0, 0, 1000)

	for _, to := range []int64{300, 995, 0, 555} {
		mark := len(d.yielded)
		rewinds := d.c.Counters().Rewinds
		require.NoError(t, d.c.Seek(tp, to))
		d.until(1000)
		require.Empty(t, d.pauses)
		d.requireYielded(mark, to/10*10, 1000)
		require.Greater(t, d.c.Counters().Rewinds, rewinds, "seek to %d", to)
	}

	// Forward, during a stall, past what is held.
	for i := int64(100); i < 200; i++ {
		d.publish(&metadata.Message{Entries: []metadata.Entry{entry(1, 1, 10*i, 10*i+9, fmt.Sprintf("o%d", i))}})
	}
	for range 30 {
		d.round()
		d.serve()
	}
	require.NoError(t, d.c.Seek(tp, 1500))
	for range 30 {
		d.round()
		d.serve()
	}
	mark := len(d.yielded)
	d.publish(commit(2000))
	d.until(2000)
	require.Empty(t, d.pauses)
	d.requireYielded(mark, 1500, 2000)

	// Back to records whose objects are gone: 200-299 are; 300 on are
	// not.
	for i := 20; i < 30; i++ {
		d.gone[fmt.Sprintf("o%d", i)] = true
	}
	// A consumer reads from the broker up to each ResumeHint and seeks
	// there, until the reader serves again: each gone is where the last
	// hint said, no hint passes 300, and what follows is contiguous.
	at := int64(205)
	require.NoError(t, d.c.Seek(tp, at))
	for {
		mark := len(d.yielded)
		d.until(2000)
		if len(d.pauses) == 0 {
			d.requireYielded(mark, at, 2000)
			break
		}
		require.Empty(t, d.yielded[mark:], "nothing is skipped to")
		p := d.pauses[0]
		d.pauses = nil
		require.Equal(t, at, p.Offset)
		require.ErrorIs(t, p.Cause, storage.ErrNotFound)
		require.Greater(t, p.ResumeHint, at)
		require.LessOrEqual(t, p.ResumeHint, int64(300))
		at = p.ResumeHint
		require.NoError(t, d.c.Seek(tp, at))
	}
	require.Equal(t, int64(300), at)
	require.LessOrEqual(t, d.maxHeld, 4)
}

// At the bound, entries a seek forward left below the partition's next
// offset go first, and move no horizon: the entry that holds next is
// held, and served without reading the metadata again.
func TestCoreEvictsWhatASeekLeftBehindFirst(t *testing.T) {
	d := stalled(t, 4, 4) // entries 0-39, committed to 10
	d.round()
	require.Equal(t, 4, d.c.Counters().Held)
	require.NoError(t, d.c.Seek(tp, 100))
	d.publish(&metadata.Message{Entries: []metadata.Entry{entry(1, 1, 100, 109, "o10")}})
	d.publish(commit(110))
	d.round() // learned before a plan skips what is below 100
	require.Equal(t, 4, d.c.Counters().Held)
	d.until(110)
	require.Empty(t, d.pauses)
	d.requireYielded(0, 100, 110)
	require.Zero(t, d.c.Counters().Rewinds, "nothing forgotten that was needed")
	require.Equal(t, uint64(1), d.c.Counters().Evicted, "one entry below 100 made room")
}
