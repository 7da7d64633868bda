package leadcore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/internal/hedge"
	"github.com/activetier/activetier/metadata"
)

// hedging hedges uploads at their p90 within 10–200 ms, one in a row and
// a tenth of one per upload.
func hedging(c *Config) {
	c.Hedge = hedge.Policy{Quantile: 0.9, Min: 10 * time.Millisecond, Max: 200 * time.Millisecond, Budget: 0.1, Burst: 1}
	c.MaxInflight = 4
}

// leading returns a harness leading tpA with its markers published.
func leading(t *testing.T) *harness {
	h := newHarness(t, hedging)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0))
	h.ready()
	h.c.Read(h.now, 1, ReadLineage, LocalResult{Epochs: []fencing.EpochEntry{{Epoch: 1, StartOffset: 0}}})
	h.ready()
	h.published(2, 0)
	h.ready()
	return h
}

// cut appends one batch at offset off and cuts it: the upload's id is
// returned.
func (h *harness) cut(off int64) uint64 {
	require.NoError(h.t, h.append(tpA, 1, off, off, 100))
	h.ready()
	h.advance(100 * time.Millisecond)
	h.encode(h.first("encode %d", h.ready()))
	return h.first("upload %d", h.ready())
}

// first returns the id of the first line of rd that format describes.
func (h *harness) first(format string, rd []string) uint64 {
	for _, l := range rd {
		var id uint64
		if _, err := fmt.Sscanf(l, format, &id); err == nil {
			return id
		}
	}
	h.t.Fatalf("no %q in %v", format, rd)
	return 0
}

func (h *harness) hedgeStored(id uint64, key string) {
	h.c.HedgeUploaded(h.now, id, metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: key}, nil)
}

// An upload unanswered at the threshold (the cap, before anything is
// learned) is hedged; the hedge stores first and is published; the first
// attempt is cancelled, and its late success changes nothing.
func TestCoreHedgedUploadWins(t *testing.T) {
	h := leading(t)
	up := h.cut(0)
	h.advance(199 * time.Millisecond)
	require.Equal(t, []string{"wake at +1ms"}, h.ready(), "due at the cap, 200ms after the attempt began")
	h.advance(time.Millisecond)
	require.Equal(t, []string{fmt.Sprintf("hedge upload %d", up), "wake at +4.8s"}, h.ready())
	h.advance(10 * time.Millisecond)
	h.hedgeStored(up, "hedged")
	rd := h.ready()
	require.Contains(t, rd, "publish 5: entry t-0 0-0 e1/p1")
	require.Contains(t, rd, fmt.Sprintf("cancel %d", up))
	h.stored(up) // the first attempt's late success
	require.Equal(t, []string{"wake at +5s"}, h.ready(), "nothing but the publish's health check")
	st := h.c.Stats()
	require.Equal(t, uint64(1), st.UploadHedges)
	require.Equal(t, uint64(1), st.UploadHedgeWins)
	require.Equal(t, uint64(1), st.Objects, "one object stored and published, not two")
}

// The first attempt answers first: the hedge's late answer changes
// nothing, and its object is left to Sweep.
func TestCoreFirstUploadAttemptWins(t *testing.T) {
	h := leading(t)
	up := h.cut(0)
	h.advance(200 * time.Millisecond)
	require.Equal(t, []string{fmt.Sprintf("hedge upload %d", up), "wake at +4.8s"}, h.ready())
	h.stored(up)
	require.Contains(t, h.ready(), "publish 5: entry t-0 0-0 e1/p1")
	h.hedgeStored(up, "late")
	require.Equal(t, []string{"wake at +5s"}, h.ready(), "nothing but the publish's health check")
	require.Zero(t, h.c.Stats().UploadHedgeWins)
}

// A failed hedge changes nothing; the attempt it hedged goes on, and the
// upload is not hedged again.
func TestCoreFailedUploadHedge(t *testing.T) {
	h := leading(t)
	up := h.cut(0)
	h.advance(200 * time.Millisecond)
	h.ready()
	h.c.HedgeUploaded(h.now, up, metadata.ObjectRef{}, errDown)
	require.Equal(t, []string{"wake at +4.8s"}, h.ready())
	h.c.Uploaded(h.now, up, metadata.ObjectRef{}, errDown, Unavailable)
	rd := h.ready()
	require.Len(t, rd, 2, "%v", rd)
	require.Contains(t, rd[0], fmt.Sprintf("retry %d", up))
	h.advance(time.Second)
	require.NotContains(t, fmt.Sprint(h.ready()), "hedge")
}

// The budget bounds hedges: with one token, the second slow upload goes
// unhedged, and the refusal is counted.
func TestCoreUploadHedgeBudget(t *testing.T) {
	h := leading(t)
	first := h.cut(0)
	second := h.cut(1)
	h.advance(200 * time.Millisecond)
	rd := h.ready()
	require.Contains(t, rd, fmt.Sprintf("hedge upload %d", first))
	require.NotContains(t, rd, fmt.Sprintf("hedge upload %d", second))
	st := h.c.Stats()
	require.Equal(t, uint64(1), st.UploadHedges)
	require.Equal(t, uint64(1), st.UploadHedgesDenied)
}

// The threshold is learned from the attempts' latencies: after 20 uploads
// answering in 30ms, an upload is hedged 30ms after it began.
func TestCoreUploadHedgeThresholdLearned(t *testing.T) {
	h := leading(t)
	off := int64(0)
	for range 20 {
		up := h.cut(off)
		h.advance(30 * time.Millisecond)
		h.stored(up)
		h.published(h.first("publish %d:", h.ready()), off)
		h.ready()
		off++
	}
	require.Zero(t, h.c.Stats().UploadHedges)
	up := h.cut(off)
	h.advance(29 * time.Millisecond)
	require.NotContains(t, fmt.Sprint(h.ready()), "hedge")
	h.advance(time.Millisecond)
	require.Contains(t, h.ready(), fmt.Sprintf("hedge upload %d", up))
}
