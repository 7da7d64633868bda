package leadcore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
)

func tpN(i int) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: "t", Partition: int32(i)}
}

// lineage answers ReadLineage id with one epoch from offset 0.
func (h *harness) lineage(id uint64, epoch int32) {
	h.c.Read(h.now, id, ReadLineage, LocalResult{Epochs: []fencing.EpochEntry{{Epoch: epoch, StartOffset: 0}}})
}

// A burst of leaderships shares marker messages: the first goes alone and
// at once; what queues while it is published waits for it, then for the
// Interval since it went, and goes in one message; a stopped leadership's
// markers are left out.
func TestCoreMarkersShareMessages(t *testing.T) {
	h := newHarness(t, nil)
	for i := range 4 {
		require.NoError(t, h.c.BecomeLeader(h.now, tpN(i), 1, []int32{2}, -1, 0))
	}
	require.Equal(t, []string{
		"read 1 lineage t-0 from 0", "read 2 lineage t-1 from 0", "read 3 lineage t-2 from 0", "read 4 lineage t-3 from 0",
		"durable changed", "wake at +1h0m0s",
	}, h.ready())
	h.lineage(1, 1)
	require.Equal(t, []string{"publish 5: marker t-0 e1@0", "wake at +5s"}, h.ready(), "none went lately: at once")
	h.lineage(2, 1)
	h.lineage(3, 1)
	h.lineage(4, 1)
	require.Equal(t, []string{"wake at +5s"}, h.ready(), "one marker message at a time")
	h.c.Resign(h.now, tpN(2))
	h.ready()
	h.published(5, 0)
	require.Equal(t, []string{"wake at +100ms"}, h.ready(), "the next waits out the Interval")
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"publish 6: marker t-1 e1@0, marker t-3 e1@0", "wake at +5s"}, h.ready())
	h.published(6, 1)
	require.Equal(t, []string{"wake at +59m59.9s"}, h.ready())
}

// A message's worth of markers goes without waiting out the Interval, and
// no message holds more.
func TestCoreMarkersFullMessage(t *testing.T) {
	h := newHarness(t, nil)
	n := maxBatchMarkers + 2
	for i := range n {
		require.NoError(t, h.c.BecomeLeader(h.now, tpN(i), 1, []int32{2}, -1, 0))
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

// A failed marker message fails each leadership's chore alone, which
// retries after its backoff.
func TestCoreMarkersFailTogetherRetryApart(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpN(0), 1, []int32{2}, -1, 0))
	require.NoError(t, h.c.BecomeLeader(h.now, tpN(1), 1, []int32{2}, -1, 0))
	h.ready()
	h.lineage(1, 1)
	h.lineage(2, 1)
	require.Equal(t, []string{"publish 3: marker t-0 e1@0", "wake at +5s"}, h.ready())
	h.c.Published(h.now, 3, 0, metadata.ErrClosed, Closed)
	require.Equal(t, []string{"cancel 3", "failing t-0 since +0s: publishing to metadata partition 0: metadata: log closed",
		"health degraded=false err=<nil>", "wake at +5.107577ms"}, h.ready(), "t-0's chore backs off, failing")
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"publish 5: marker t-1 e1@0", "read 4 lineage t-0 from 0", "wake at +5s"}, h.ready(),
		"t-1's markers go on; t-0 reads its lineage again")
}

// A marker refresh of a leadership that ends is stopped with it: markers
// it read and queued are not published by the next leadership of the
// same partition, whose lineage differs (the broker followed another
// leader in between), nor is the answer of a lineage read still in flight
// acted on. A message mixing the two lineages would be rejected by every
// follower as divergent.
func TestCoreRefreshEndsWithItsLeadership(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0))
	require.NoError(t, h.c.BecomeLeader(h.now, tpB, 1, []int32{2}, -1, 0))
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
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 3, []int32{2}, -1, 5))
	require.Equal(t, []string{"read 8 lineage t-0 from 0", "durable changed", "commit changed", "wake at +5s"}, h.ready())
	h.c.Read(h.now, 8, ReadLineage, LocalResult{Epochs: []fencing.EpochEntry{{Epoch: 2, StartOffset: 0}}, End: 5})
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
