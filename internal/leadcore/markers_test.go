package leadcore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// A message's worth of markers goes without waiting out the Interval, and
// no message holds more.
func TestCoreMarkersFullMessage(t *testing.T) {
	h := newHarness(t, nil)
	n := maxBatchMarkers + 2
	for i := range n {
		require.NoError(t, h.c.BecomeLeader(h.now, tpN(i), 1, []int32{2}, -1, 0, digest.Chain{}))
	}
	h.ready()
	for i := range n {
		h.lineage(uint64(i+1), 1)
	}
	counts := func() (publishes []int) {
		rd := h.c.Ready()
		h.c.Advance()
		for _, p := range rd.Publishes {
			m, err := metadata.DecodeMessage(p.Data)
			require.NoError(t, err)
			publishes = append(publishes, len(m.Markers))
			h.published(p.ID, 0)
		}
		return publishes
	}
	require.Equal(t, []int{1}, counts(), "the first alone")
	require.Equal(t, []int{maxBatchMarkers}, counts(), "then a full message at once")
	require.Empty(t, counts(), "the last waits out the Interval")
	h.advance(100 * time.Millisecond)
	require.Equal(t, []int{1}, counts(), fmt.Sprintf("of %d", n))
}

// A marker refresh of a leadership that ends is stopped with it: markers
// it read and queued are not published by the next leadership of the
// same partition, whose lineage differs (the broker followed another
// leader in between), nor is the answer of a lineage read still in flight
// acted on. A message mixing the two lineages would be rejected by every
// follower as divergent.
func TestCoreRefreshEndsWithItsLeadership(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0, digest.Chain{}))
	require.NoError(t, h.c.BecomeLeader(h.now, tpB, 1, []int32{2}, -1, 0, digest.Chain{}))
	h.ready()
	h.lineage(1, 1)
	h.lineage(2, 1)
	h.ready()
	h.published(3, 0)
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"publish 4: marker t-1 e1@0", "wake at +5s"}, h.ready())
	h.published(4, 1)
	h.ready()

	h.advance(time.Hour)
	require.Equal(t, []string{"read 5 lineage t-0 from 0", "read 6 lineage t-1 from 0", "wake at +1h0m0s"}, h.ready(), "the refresh reads both lineages")
	h.lineage(6, 1)
	require.Equal(t, []string{"publish 7: marker t-1 e1@0", "wake at +5s"}, h.ready())
	h.lineage(5, 1)
	require.Equal(t, []string{"wake at +5s"}, h.ready(), "t-0's refreshed marker waits for the message in flight")

	// t-0's leadership ends; the broker follows epoch 2 (another
	// leader's, from offset 0) and leads again at epoch 3 from offset 5.
	h.c.Resign(h.now, tpA)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 3, []int32{2}, -1, 5, digest.Chain{}))
	require.Equal(t, []string{"read 8 lineage t-0 from 0", "durable changed", "commit changed", "wake at +5s"}, h.ready())
	h.c.Read(h.now, 8, ReadLineage, LocalResult{Epochs: []storage.EpochEntry{{Epoch: 2, StartOffset: 0}}, End: 5})
	h.ready()
	h.published(7, 2)
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"publish 9: marker t-0 e2@0, marker t-0 e3@5", "wake at +5s"}, h.ready(),
		"only the new leadership's lineage")
	h.published(9, 3)
	require.Equal(t, []string{"wake at +59m59.9s"}, h.ready(), "the refresh round is over")

	// A refresh whose lineage read is in flight when the leadership ends
	// is cancelled.
	h.advance(time.Hour)
	require.Equal(t, []string{"read 10 lineage t-0 from 0", "read 11 lineage t-1 from 0", "wake at +1h0m0s"}, h.ready())
	h.c.Resign(h.now, tpA)
	require.Equal(t, []string{"cancel 10", "durable changed", "commit changed", "wake at +1h0m0s"}, h.ready())
	h.lineage(10, 1)
	h.lineage(11, 1)
	require.Equal(t, []string{"publish 12: marker t-1 e1@0", "wake at +5s"}, h.ready())
}
