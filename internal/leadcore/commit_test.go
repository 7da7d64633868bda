package leadcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/fencing"
)

// leadWithObject makes the harness tpA's leader at epoch 1 with followers
// 2 and 3, its markers published, and offsets 0-9 published in one
// object; the next request id is 6.
func leadWithObject(t *testing.T, h *harness) {
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2, 3}, -1, 0))
	require.Equal(t, []string{"read 1 lineage t-0 from 0", "durable changed", "wake at +1h0m0s"}, h.ready())
	h.c.Read(h.now, 1, ReadLineage, LocalResult{Epochs: []fencing.EpochEntry{{Epoch: 1, StartOffset: 0}}})
	require.Equal(t, []string{"publish 2: marker t-0 e1@0", "wake at +5s"}, h.ready())
	h.published(2, 0)
	h.ready()
	require.NoError(t, h.append(tpA, 1, 0, 9, 100))
	h.advance(100 * time.Millisecond)
	h.ready()
	h.encode(3)
	h.ready()
	h.stored(4)
	require.Equal(t, []string{"publish 5: entry t-0 0-9 e1/p1", "wake at +5s"}, h.ready())
	h.published(5, 1)
	h.ready()
}

func (h *harness) hw() int64 {
	hw, _, _ := h.c.HighWatermark(tpA)
	return hw
}

// The high watermark is the minimum over the in-sync followers, waits for
// every one of them, and is published alone after Interval when no object
// is coming.
func TestCoreHighWatermarkPublishedAlone(t *testing.T) {
	h := newHarness(t, nil)
	leadWithObject(t, h)
	require.Equal(t, int64(-1), h.hw())

	h.c.Progress(h.now, tpA, 2, 10, 1, nil, nil)
	require.Equal(t, []string{"wake at +59m59.9s"}, h.ready(), "follower 3 has not reported")
	require.Equal(t, int64(-1), h.hw())
	h.c.Progress(h.now, tpA, 3, 6, 1, nil, nil)
	require.Equal(t, []string{"commit changed", "wake at +100ms"}, h.ready())
	require.Equal(t, int64(6), h.hw(), "the minimum")
	h.c.Progress(h.now, tpA, 3, 4, 1, nil, nil)
	require.Equal(t, int64(6), h.hw(), "never goes back")

	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"publish 6: commit t-0 e1@6", "wake at +5s"}, h.ready())
	h.c.Progress(h.now, tpA, 3, 10, 1, nil, nil)
	require.Equal(t, []string{"commit changed", "wake at +5s"}, h.ready(), "one commits message at a time")
	h.published(6, 2)
	require.Equal(t, []string{"wake at +100ms"}, h.ready(), "the next is due")
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"publish 7: commit t-0 e1@10", "wake at +5s"}, h.ready())
	h.published(7, 3)
	require.Equal(t, []string{"wake at +59m59.7s"}, h.ready(), "nothing left to publish")
}

// A commit rides in the next object's entry message; a failed commits
// message is given up and its commit goes with the next message.
func TestCoreCommitRidesWithEntries(t *testing.T) {
	h := newHarness(t, nil)
	leadWithObject(t, h)
	h.c.Progress(h.now, tpA, 2, 10, 1, nil, nil)
	h.c.Progress(h.now, tpA, 3, 10, 1, nil, nil)
	require.Equal(t, []string{"commit changed", "wake at +100ms"}, h.ready())
	require.NoError(t, h.append(tpA, 1, 10, 19, 100))
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"encode 6", "wake at +400ms"}, h.ready(), "the object is coming: the commit waits for it, a while")
	h.encode(6)
	h.ready()
	h.stored(7)
	require.Equal(t, []string{"publish 8: entry t-0 10-19 e1/p1, commit t-0 e1@10", "wake at +5s"}, h.ready())
	h.published(8, 2)
	require.Equal(t, []string{"durable changed", "space freed", "wake at +59m59.8s"}, h.ready())

	// A commits message into a closed log fails; the commit is pending again.
	h.c.Progress(h.now, tpA, 2, 20, 1, nil, nil)
	h.c.Progress(h.now, tpA, 3, 20, 1, nil, nil)
	h.ready()
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"publish 9: commit t-0 e1@20", "wake at +5s"}, h.ready())
	h.c.Published(h.now, 9, 0, errDown, Closed)
	require.Equal(t, []string{"cancel 9", "wake at +100ms"}, h.ready())
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"publish 10: commit t-0 e1@20", "wake at +5s"}, h.ready())
}

// SetInSync: a follower dropped from the in-sync set no longer holds the
// high watermark back; only followers of the partition may be in it; a
// new epoch publishes the commit again at that epoch.
func TestCoreSetInSync(t *testing.T) {
	h := newHarness(t, nil)
	leadWithObject(t, h)
	h.c.Progress(h.now, tpA, 2, 8, 1, nil, nil)
	h.ready()
	require.Equal(t, int64(-1), h.hw())
	require.Error(t, h.c.SetInSync(h.now, tpA, []int32{2, 4}), "4 is no follower")
	require.Equal(t, CodeOf(h.c.SetInSync(h.now, tpB, nil)), NotLeader)
	require.NoError(t, h.c.SetInSync(h.now, tpA, []int32{2}))
	require.Equal(t, int64(8), h.hw())
	require.NoError(t, h.c.SetInSync(h.now, tpA, nil))
	require.Equal(t, int64(10), h.hw(), "the leader alone: its log end")
	require.NoError(t, h.append(tpA, 1, 10, 14, 10))
	require.Equal(t, int64(15), h.hw())
	h.ready()
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"encode 6", "wake at +400ms"}, h.ready())
	h.encode(6)
	h.ready()
	h.stored(7)
	// The leader alone is ahead of its entries: the commit covers only
	// what is published, so a reader never learns a commit past every
	// entry describing its records (and judges them gone). It rides to
	// 10 with the entries that make 15 durable, and 15 follows alone.
	require.Equal(t, []string{"publish 8: entry t-0 10-14 e1/p1, commit t-0 e1@10", "wake at +5s"}, h.ready())
	h.published(8, 2)
	require.Equal(t, []string{"durable changed", "space freed", "wake at +100ms"}, h.ready())
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"publish 9: commit t-0 e1@15", "wake at +5s"}, h.ready())
	h.published(9, 2)
	h.ready()

	// Re-elected at epoch 2 without a break: the in-sync set is all the
	// followers again, the high watermark stays, and is published at 2.
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 2, []int32{2, 3}, -1, 15))
	require.Equal(t, int64(15), h.hw())
	require.Equal(t, []string{"read 10 lineage t-0 from 0", "durable changed", "wake at +100ms"}, h.ready())
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"publish 11: commit t-0 e2@15", "wake at +5s"}, h.ready())
}

// A partition without followers has a high watermark (its leader's log
// end) but publishes no commit: no metadata partition carries it.
func TestCoreNoFollowersNoCommit(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, nil, -1, 0))
	h.ready()
	require.NoError(t, h.append(tpA, 1, 0, 9, 10))
	require.Equal(t, int64(10), h.hw())
	require.Equal(t, []string{"commit changed", "wake at +100ms"}, h.ready())
	h.advance(100 * time.Millisecond)
	require.NotContains(t, h.ready(), "publish")
}

// With no follower in sync the high watermark is the leader's log end,
// ahead of what is stored: a commit published then would tell direct
// readers that records no entry describes are committed, and they would
// judge them gone. The commit waits for the entries, however long their
// upload takes.
func TestCoreCommitNeverPassesTheEntries(t *testing.T) {
	h := newHarness(t, nil)
	leadWithObject(t, h)
	require.NoError(t, h.c.SetInSync(h.now, tpA, nil))
	require.Equal(t, int64(10), h.hw())
	require.NoError(t, h.append(tpA, 1, 10, 14, 10))
	require.Equal(t, int64(15), h.hw())
	for range 20 {
		h.advance(100 * time.Millisecond)
		for _, r := range h.ready() {
			require.NotContains(t, r, "e1@15", "a commit past the entries published")
		}
	}
}
