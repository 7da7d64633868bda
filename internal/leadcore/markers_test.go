package leadcore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

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
