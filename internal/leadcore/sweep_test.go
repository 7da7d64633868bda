package leadcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// Sweepable offers what no leadership means to publish any more, however
// old, and never an object stored and waiting for its entries to be
// published, nor one stored since an upload still in flight began.
func TestCoreSweepableSparesWhatIsStillToBePublished(t *testing.T) {
	h := newHarness(t, nil)
	ref := func(key string) metadata.ObjectRef { return metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: key} }
	sweepable := func(listed ...Listed) []metadata.ObjectRef {
		refs, foreign := h.c.Sweepable(listed, h.now, "b1", "")
		require.Zero(t, foreign)
		return refs
	}
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0))
	h.ready()
	require.NoError(t, h.append(tpA, 1, 0, 9, 100))
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"encode 2", "wake at +59m59.9s"}, h.ready())
	h.encode(2)
	require.Equal(t, []string{"upload 3", "wake at +5s"}, h.ready())
	h.stored(3) // k1, its entries' publish under way
	require.Equal(t, []string{"publish 4: entry t-0 0-9 e1/p1", "wake at +5s"}, h.ready())
	stored := h.now
	h.advance(time.Hour)
	require.Equal(t, []metadata.ObjectRef{ref("orphan")}, sweepable(
		Listed{Ref: ref("k1"), LastModified: stored}, Listed{Ref: ref("orphan"), LastModified: stored}),
		"k1 is still to be published")

	// An upload in flight may yet report an object stored since it began.
	require.NoError(t, h.append(tpA, 1, 10, 19, 100))
	h.advance(100 * time.Millisecond)
	require.Equal(t, "encode 5", h.ready()[0])
	h.encode(5)
	require.Equal(t, "upload 6", h.ready()[0])
	began := h.now
	h.advance(time.Hour)
	landed := Listed{Ref: ref("landed"), LastModified: began}
	require.Equal(t, []metadata.ObjectRef{ref("orphan")}, sweepable(
		Listed{Ref: ref("k1"), LastModified: stored}, landed, Listed{Ref: ref("orphan"), LastModified: began.Add(-time.Second)}))

	// Once the leadership ends, k1 is withheld for good; the upload, still
	// in flight, spares what landed since it began until it reports.
	h.c.Resign(h.now, tpA)
	h.ready()
	require.Equal(t, []metadata.ObjectRef{ref("k1")}, sweepable(Listed{Ref: ref("k1"), LastModified: stored}, landed))
	h.stored(6) // k2, withheld: its leadership ended
	h.ready()
	require.Equal(t, []metadata.ObjectRef{ref("k1"), ref("k2"), ref("landed")}, sweepable(
		Listed{Ref: ref("k1"), LastModified: stored}, Listed{Ref: ref("k2"), LastModified: began}, landed))
}
