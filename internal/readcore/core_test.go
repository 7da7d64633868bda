package readcore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/internal/storeerr"
	"github.com/activetier/activetier/metadata"
)

// What a failed fetch does to a partition: gone sections are forgotten at
// once, corrupted reads only once they have kept failing for CorruptFor
// (a network can corrupt a read; an object that never verifies is gone),
// unavailable ones only once they have been for UnavailableFor, if set,
// anything else is retried. A partition whose next offset nothing else
// describes is then judged gone, on metadata read to its end since.
func TestCoreFetched(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	corrupt := fmt.Errorf("section: %w", combiner.ErrCorrupt)
	notFound := fmt.Errorf("get: %w", storeerr.ErrNotFound)
	unavailable := fmt.Errorf("get: %w", storeerr.ErrUnavailable)
	type attempt struct {
		after time.Duration
		err   error
		retry bool
	}
	for _, tc := range []struct {
		name     string
		attempts []attempt
		gone     error // the cause of the Pause after a quiet round, or nil: not gone
		unavail  time.Duration
	}{
		{"not found is gone at once", []attempt{{0, notFound, false}}, storeerr.ErrNotFound, 0},
		{"unavailable is retried", []attempt{{0, unavailable, true}, {time.Minute, unavailable, true}}, nil, 0},
		{"a corrupted read is retried", []attempt{{0, corrupt, true}, {29 * time.Second, corrupt, true}}, nil, 0},
		{"a section that never verifies is gone after CorruptFor", []attempt{{0, corrupt, true}, {10 * time.Second, unavailable, true}, {30 * time.Second, corrupt, false}}, combiner.ErrCorrupt, 0},
		{"with UnavailableFor, an outage shorter is retried", []attempt{{0, unavailable, true}, {2 * time.Second, unavailable, true}}, nil, 3 * time.Second},
		{"with UnavailableFor, one as long is gone", []attempt{{0, unavailable, true}, {time.Second, corrupt, true}, {3 * time.Second, unavailable, false}}, storeerr.ErrUnavailable, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{Partitions: map[metadata.TopicPartition]int64{tp: 100}, MaxBytes: 1 << 20, UnavailableFor: tc.unavail, MetadataPartitions: []int32{0}})
			require.NoError(t, err)
			c.Round()
			c.Learn(0, 0, &metadata.Message{Markers: []metadata.EpochStart{marker(5, 100)}, Entries: []metadata.Entry{entry(5, 5, 100, 149, "a")},
				Commits: []metadata.Commit{{Partition: tp, Epoch: 5, Offset: 150}}})
			for i, a := range tc.attempts {
				wants, pauses := c.Plan()
				require.Empty(t, pauses)
				require.Len(t, wants, 1, "attempt %d", i)
				r := followcore.Result{Entry: wants[0].Entry, Outcome: followcore.OutcomeOf(a.err), Err: a.err}
				batches, retry := c.Fetched(t0.Add(a.after), wants[0], r)
				require.Empty(t, batches)
				require.Equal(t, a.retry, retry, "attempt %d", i)
			}
			c.Round()
			require.NoError(t, c.MetadataRead(MetadataRead{Partition: 0, From: 1, Next: 1, AtEnd: true}))
			wants, pauses := c.Plan()
			if tc.gone == nil {
				require.Empty(t, pauses)
				require.Len(t, wants, 1)
				return
			}
			require.Empty(t, wants)
			require.Len(t, pauses, 1)
			require.Equal(t, int64(100), pauses[0].Offset)
			require.ErrorIs(t, pauses[0].Cause, tc.gone)
		})
	}
}

// A fetched section yields its batches below the commit, in order, and
// the partition continues from the last one.
func TestCoreYieldsBelowTheCommit(t *testing.T) {
	c, err := New(Config{Partitions: map[metadata.TopicPartition]int64{tp: 100}, MaxBytes: 1 << 20, MetadataPartitions: []int32{0}})
	require.NoError(t, err)
	c.Round()
	c.Learn(0, 0, &metadata.Message{Markers: []metadata.EpochStart{marker(5, 100)}, Entries: []metadata.Entry{entry(5, 5, 100, 149, "a")},
		Commits: []metadata.Commit{{Partition: tp, Epoch: 5, Offset: 130}}})
	wants, _ := c.Plan()
	require.Len(t, wants, 1)
	var batches []combiner.Batch
	for first := int64(100); first < 150; first += 10 {
		batches = append(batches, combiner.Batch{Epoch: 5, FirstOffset: first, LastOffset: first + 9, Data: []byte{byte(first)}})
	}
	got, retry := c.Fetched(time.Time{}, wants[0], followcore.Result{Entry: wants[0].Entry, Batches: batches})
	require.False(t, retry)
	require.Equal(t, batches[:3], got)
	next, committed, ok := c.Position(tp)
	require.True(t, ok)
	require.Equal(t, [2]int64{130, 130}, [2]int64{next, committed})
}

// step is one thing that happens to a Core in TestCoreGoneRoundRule.
type step struct {
	// round begins a round; wantWM is then what WantWatermarks must be.
	round  bool
	wantWM []int32
	learn  *metadata.Message
	read   *MetadataRead
	// drop plans and fails the fetch of the one section planned, as gone.
	drop bool
	// plan plans and requires the outcome: "gone" (paused, resume at
	// 10), "wait" (nothing planned, waiting for a proof), "fetch" (a
	// section planned) or "idle" (nothing planned, not waiting).
	plan string
}

func rd(mp int32, from, next int64) *MetadataRead {
	return &MetadataRead{Partition: mp, From: from, Next: next}
}

func rdHigh(mp int32, from, next, high int64) *MetadataRead {
	return &MetadataRead{Partition: mp, From: from, Next: next, High: high, HasHigh: true}
}

func rdEnd(mp int32, at int64) *MetadataRead {
	return &MetadataRead{Partition: mp, From: at, Next: at, AtEnd: true}
}

// other is traffic of another partition: the busy cluster around the
// reader's partition.
var other = &metadata.Message{Entries: []metadata.Entry{{Partition: metadata.TopicPartition{Topic: "other"}, FirstOffset: 0, LastOffset: 9}}}

// The gone judgement's rounds: tp's records at 0-9 are committed, their
// only entry's object is gone, and the Core reads two metadata partitions.
// It judges them gone once both were proven read to their end, by a high
// watermark reached or an empty read, as of a round after the partition
// last changed, however busy they are; it takes high watermarks only
// while a partition waits, and only where a proof is still missing.
func TestCoreGoneRoundRule(t *testing.T) {
	start := &metadata.Message{Markers: []metadata.EpochStart{marker(1, 0)}, Entries: []metadata.Entry{entry(1, 1, 0, 9, "a")},
		Commits: []metadata.Commit{{Partition: tp, Epoch: 1, Offset: 10}}}
	// Round 1 learns the records and the commit, and loses the object.
	busyStart := []step{{round: true}, {learn: start}, {read: rd(0, 0, 5)}, {read: rd(1, 0, 3)}, {drop: true}, {plan: "wait"}}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"busy: judged on high watermarks reached", append(busyStart,
			step{round: true, wantWM: []int32{0, 1}}, step{learn: other}, step{read: rdHigh(0, 5, 9, 8)}, step{read: rdHigh(1, 3, 7, 6)}, step{plan: "gone"})},
		{"a high watermark not reached yet proves nothing, and is not taken again", append(busyStart,
			step{round: true, wantWM: []int32{0, 1}}, step{learn: other}, step{read: rdHigh(0, 5, 9, 8)}, step{read: rdHigh(1, 3, 5, 6)}, step{plan: "wait"},
			step{round: true, wantWM: nil}, step{learn: other}, step{read: rd(0, 9, 12)}, step{read: rd(1, 5, 8)}, step{plan: "gone"})},
		{"a proof of the round the partition changed in is not enough", []step{
			{round: true}, {learn: start}, {read: rdEnd(0, 0)}, {read: rdEnd(1, 0)}, {drop: true}, {plan: "wait"},
			{round: true, wantWM: nil}, {read: rdEnd(0, 0)}, {read: rdEnd(1, 0)}, {plan: "gone"}}},
		// Partition 1's high watermark could not be taken (Watermarks
		// failed): it is asked for again.
		{"one partition's proof is not enough", append(busyStart,
			step{round: true, wantWM: []int32{0, 1}}, step{read: rdHigh(0, 5, 9, 8)}, step{read: rd(1, 3, 4)}, step{plan: "wait"},
			step{round: true, wantWM: []int32{1}}, step{read: rd(0, 9, 12)}, step{read: rd(1, 4, 6)}, step{plan: "wait"},
			step{round: true, wantWM: []int32{1}}, step{read: rd(0, 12, 14)}, step{read: rdEnd(1, 6)}, step{plan: "gone"})},
		{"a busy partition: higher commits and entries beyond next change nothing", append(busyStart,
			step{round: true, wantWM: []int32{0, 1}},
			step{learn: &metadata.Message{Entries: []metadata.Entry{entry(1, 1, 10, 19, "b")}, Commits: []metadata.Commit{{Partition: tp, Epoch: 1, Offset: 20}}}},
			step{read: rdHigh(0, 5, 9, 8)}, step{read: rdHigh(1, 3, 7, 6)}, step{plan: "gone"})},
		{"an entry describing next learned meanwhile is fetched", append(busyStart,
			step{round: true, wantWM: []int32{0, 1}},
			step{learn: &metadata.Message{Entries: []metadata.Entry{entry(1, 1, 0, 9, "copy")}}},
			step{read: rdHigh(0, 5, 9, 8)}, step{read: rdHigh(1, 3, 7, 6)}, step{plan: "fetch"})},
		{"no commit past next: nothing waits, no high watermark is taken", []step{
			{round: true}, {learn: &metadata.Message{Markers: []metadata.EpochStart{marker(1, 0)}, Entries: []metadata.Entry{entry(1, 1, 0, 9, "a")}}},
			{read: rd(0, 0, 5)}, {read: rd(1, 0, 3)}, {plan: "idle"},
			{round: true, wantWM: nil}, {read: rd(0, 5, 9)}, {read: rd(1, 3, 7)}, {plan: "idle"}}},
		{"a partition at its end needs no high watermark", append(busyStart,
			step{round: true, wantWM: []int32{0, 1}}, step{read: rdEnd(0, 5)}, step{read: rd(1, 3, 4)}, step{plan: "wait"},
			step{round: true, wantWM: []int32{1}}, step{read: rdEnd(0, 5)}, step{read: rdHigh(1, 4, 9, 9)}, step{plan: "gone"})},
		{"a log begun again voids the high watermark outstanding", append(busyStart,
			step{round: true, wantWM: []int32{0, 1}}, step{read: rdHigh(0, 5, 9, 8)}, step{read: rdHigh(1, 3, 4, 6)}, step{plan: "wait"},
			step{round: true, wantWM: nil}, step{read: rd(0, 9, 9)}, step{read: rd(1, 0, 6)}, step{plan: "wait"},
			step{round: true, wantWM: []int32{1}}, step{read: rd(0, 9, 9)}, step{read: rdHigh(1, 6, 8, 8)}, step{plan: "gone"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{Partitions: map[metadata.TopicPartition]int64{tp: 0}, MaxBytes: 1 << 20, MetadataPartitions: []int32{1, 0}})
			require.NoError(t, err)
			for i, s := range tc.steps {
				switch {
				case s.round:
					c.Round()
					require.Equal(t, s.wantWM, c.WantWatermarks(), "step %d", i)
				case s.learn != nil:
					c.Learn(0, int64(i), s.learn)
				case s.read != nil:
					require.NoError(t, c.MetadataRead(*s.read), "step %d", i)
				case s.drop:
					wants, pauses := c.Plan()
					require.Empty(t, pauses, "step %d", i)
					require.Len(t, wants, 1, "step %d", i)
					_, retry := c.Fetched(time.Time{}, wants[0], followcore.Result{Entry: wants[0].Entry, Outcome: followcore.Gone, Err: storeerr.ErrNotFound})
					require.False(t, retry)
				default:
					wants, pauses := c.Plan()
					got := "idle"
					switch {
					case len(pauses) > 0:
						require.Equal(t, []Pause{{Partition: tp, Offset: 0, ResumeHint: 10, Cause: storeerr.ErrNotFound}}, pauses, "step %d", i)
						got = "gone"
					case len(wants) > 0:
						got = "fetch"
					case c.waiting:
						got = "wait"
					}
					require.Equal(t, s.plan, got, "step %d", i)
				}
			}
		})
	}
}

// Answers of the metadata log that break its contract prove nothing: a
// typed error names the call, and the records stay waiting, never gone.
func TestCoreMetadataReadViolations(t *testing.T) {
	type violation struct{ call, detail string }
	for _, tc := range []struct {
		name  string
		reads []MetadataRead // in round 2, after round 1 read both to 5
		call  string         // the call the error names
	}{
		{"negative high watermark", []MetadataRead{*rdHigh(0, 5, 9, -1)}, "metadata.Log.Watermarks"},
		{"high watermark below the cursor", []MetadataRead{*rdHigh(0, 5, 5, 3)}, "metadata.Log.Watermarks"},
		{"at its end below a high watermark taken before", []MetadataRead{{Partition: 0, From: 5, Next: 5, High: 9, HasHigh: true, AtEnd: true}}, "metadata.Log.Read"},
		{"at its end below an earlier high watermark", []MetadataRead{*rdHigh(0, 5, 6, 9), *rdEnd(0, 6)}, "metadata.Log.Read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{Partitions: map[metadata.TopicPartition]int64{tp: 0}, MaxBytes: 1 << 20, MetadataPartitions: []int32{0, 1},
				Violation: func(call, detail string) error { return &violationError{call, detail} }})
			require.NoError(t, err)
			c.Round()
			c.Learn(0, 0, &metadata.Message{Markers: []metadata.EpochStart{marker(1, 0)}, Commits: []metadata.Commit{{Partition: tp, Epoch: 1, Offset: 10}}})
			require.NoError(t, c.MetadataRead(*rd(0, 0, 5)))
			require.NoError(t, c.MetadataRead(*rd(1, 0, 5)))
			_, pauses := c.Plan()
			require.Empty(t, pauses)
			for range 3 {
				c.Round()
				require.NoError(t, c.MetadataRead(*rdEnd(1, 5)))
				var errs []error
				for _, r := range tc.reads {
					if err := c.MetadataRead(r); err != nil {
						errs = append(errs, err)
					}
				}
				require.Len(t, errs, 1)
				var v *violationError
				require.ErrorAs(t, errs[0], &v)
				require.Equal(t, tc.call, v.call)
				t.Log(v.detail)
				_, pauses := c.Plan()
				require.Empty(t, pauses, "never gone on a broken answer")
			}
		})
	}
	c, err := New(Config{Partitions: map[metadata.TopicPartition]int64{tp: 0}, MaxBytes: 1 << 20, MetadataPartitions: []int32{0}})
	require.NoError(t, err)
	require.Error(t, c.MetadataRead(*rd(3, 0, 0)), "not a partition the reader reads")
	require.Error(t, c.MetadataRead(*rd(0, 5, 4)), "a cursor behind the read's start")
	_, err = New(Config{Partitions: map[metadata.TopicPartition]int64{tp: 0}, MaxBytes: 1 << 20})
	require.Error(t, err, "no metadata partitions")
	_, err = New(Config{Partitions: map[metadata.TopicPartition]int64{tp: 0}, MaxBytes: 1 << 20, MetadataPartitions: []int32{-1}})
	require.Error(t, err)
}

type violationError struct{ call, detail string }

func (e *violationError) Error() string { return e.call + ": " + e.detail }
