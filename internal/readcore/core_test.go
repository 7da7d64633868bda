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
			c, err := New(Config{Partitions: map[metadata.TopicPartition]int64{tp: 100}, MaxBytes: 1 << 20, UnavailableFor: tc.unavail})
			require.NoError(t, err)
			c.Round()
			c.Learn(&metadata.Message{Markers: []metadata.EpochStart{marker(5, 100)}, Entries: []metadata.Entry{entry(5, 5, 100, 149, "a")},
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
			c.Quiet()
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
	c, err := New(Config{Partitions: map[metadata.TopicPartition]int64{tp: 100}, MaxBytes: 1 << 20})
	require.NoError(t, err)
	c.Round()
	c.Learn(&metadata.Message{Markers: []metadata.EpochStart{marker(5, 100)}, Entries: []metadata.Entry{entry(5, 5, 100, 149, "a")},
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
