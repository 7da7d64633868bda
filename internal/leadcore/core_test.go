package leadcore

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/metadata"
)

// New refuses a negative RetainFor.
func TestNewRejectsNegativeRetainFor(t *testing.T) {
	_, err := New(Config{BrokerID: 1, MetadataPartitions: 1, Interval: 1, ObjectBytes: 1, MaxPartitions: 1,
		BufferBytes: 1, MaxInflight: 1, DegradedAfter: 1, MarkerRefresh: 1, GCInterval: 1,
		BackoffInitial: 1, BackoffMax: 1, RetainFor: -1})
	require.ErrorContains(t, err, "RetainFor")
}

// New refuses a WaitCutDelay that is negative or exceeds Interval, and
// takes one from zero up to Interval.
func TestNewValidatesWaitCutDelay(t *testing.T) {
	for _, tc := range []struct {
		delay time.Duration
		err   string
	}{
		{-time.Millisecond, "WaitCutDelay -1ms is negative"},
		{0, ""},
		{2 * time.Millisecond, ""},
		{100 * time.Millisecond, ""},
		{101 * time.Millisecond, "WaitCutDelay 101ms exceeds Interval 100ms"},
	} {
		t.Run(tc.delay.String(), func(t *testing.T) {
			c, err := New(Config{BrokerID: 1, MetadataPartitions: 1, Interval: 100 * time.Millisecond, ObjectBytes: 1, MaxPartitions: 1,
				BufferBytes: 1, MaxInflight: 1, DegradedAfter: 1, MarkerRefresh: 1, GCInterval: 1,
				BackoffInitial: 1, BackoffMax: 1, WaitCutDelay: tc.delay})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			c.Close()
		})
	}
}

// The same events give the same outputs, byte for byte: a driver that
// answers every request the same way twice sees the same Readys, as
// DescribeReady renders them.
func TestCoreIsDeterministic(t *testing.T) {
	run := func() string {
		h := newHarness(t, nil)
		var trace strings.Builder
		ready := func() Ready {
			rd := h.c.Ready()
			h.c.Advance()
			trace.WriteString(h.describe(rd))
			return rd
		}
		require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, 0, 0, digest.Chain{}))
		require.NoError(t, h.c.BecomeLeader(h.now, tpB, 1, []int32{3}, -1, 0, digest.Chain{}))
		for i := range int64(20) {
			_ = h.append(tpA, 1, i*10, i*10+9, 400)
			_ = h.append(tpB, 1, i*10, i*10+9, 300)
			h.advance(30 * time.Millisecond)
			rd := ready()
			for _, e := range rd.Encodes {
				h.encode(e.ID)
			}
			// Every upload fails once, unavailable, and its retry stores.
			for _, u := range rd.Uploads {
				h.c.Uploaded(h.now, u.ID, metadata.ObjectRef{}, errDown, Unavailable)
			}
			for _, r := range rd.Retries {
				h.stored(r.ID)
			}
			for _, p := range rd.Publishes {
				h.published(p.ID, i)
			}
			ready()
		}
		return trace.String()
	}
	a, b := run(), run()
	require.NotEmpty(t, a)
	require.Equal(t, a, b)
}

// DescribeReady says a publish it cannot decode is undecodable, and why,
// rather than failing a driver's debug log.
func TestDescribeReadyUndecodable(t *testing.T) {
	out := DescribeReady(Ready{Publishes: []Publish{{ID: 1, Data: []byte{0xff}}}, Reads: []LocalRead{{ID: 2, What: 9, Partition: tpA}}}, t0)
	require.Regexp(t, `^publish 1: undecodable: .+\nread 2 ReadWhat\(9\) t-0 from 0\n$`, out)
}
