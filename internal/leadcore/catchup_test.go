package leadcore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// logWorld performs a Core's requests as a driver over an instant store
// and metadata log would, with a local log of batches, and keeps the
// entries republished. With hold set, republish uploads and the
// publication of their entries wait until release.
type logWorld struct {
	h           *harness
	batches     []storage.Batch
	epochs      []storage.EpochEntry
	meta        int64
	keys        int
	hold        bool
	held        []func()
	republished []string // "first-last" of each republished entry, in order
	publishers  []int32  // and the epoch it was published at
	// deleteErr is what every delete answers, after deleting: as a
	// DELETE whose answer was lost.
	deleteErr error
}

// newLogWorldWith is a world of a core of the harness's configuration,
// changed by mod, with a lineage of epoch 1 from 0.
func newLogWorldWith(t testing.TB, mod func(*Config)) *logWorld {
	return &logWorld{h: newHarness(t, mod), epochs: []storage.EpochEntry{{Epoch: 1, StartOffset: 0}}}
}

func (w *logWorld) end() int64 {
	if n := len(w.batches); n > 0 {
		return w.batches[n-1].LastOffset + 1
	}
	return 0
}

// produce appends [first, last] at epoch to the local log and the core.
func (w *logWorld) produce(epoch int32, first, last int64) {
	b := storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: make([]byte, 400)}
	w.batches = append(w.batches, b)
	require.NoError(w.h.t, w.h.c.Append(w.h.now, tpA, b))
}

// drain performs requests until the core asks for none but held ones,
// letting an Interval pass a few times: markers wait for one to share a
// message.
func (w *logWorld) drain() {
	for range 3 {
		for w.step() {
		}
		w.h.advance(w.h.c.cfg.Interval)
	}
}

func (w *logWorld) release() {
	held := w.held
	w.held = nil
	for _, f := range held {
		f()
	}
	w.drain()
}

// step performs one Ready and reports whether it asked for anything.
func (w *logWorld) step() bool {
	h, c := w.h, w.h.c
	rd := c.Ready()
	c.Advance()
	for _, e := range rd.Encodes {
		objs, err := e.Builder.Cut(nil)
		c.Encoded(h.now, e.ID, objs, err)
	}
	for _, u := range rd.Uploads {
		w.keys++
		ref := metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: fmt.Sprintf("%s%d", u.What, w.keys)}
		done := func() { c.Uploaded(h.now, u.ID, ref, nil, Other) }
		if u.What == WhatCopy && w.hold {
			w.held = append(w.held, done)
			continue
		}
		done()
	}
	for _, p := range rd.Publishes {
		m, err := metadata.DecodeMessage(p.Data)
		require.NoError(h.t, err)
		done := func() {
			if strings.HasPrefix(m.Object.Key, WhatCopy) {
				for _, e := range m.Entries {
					w.republished = append(w.republished, fmt.Sprintf("%d-%d", e.FirstOffset, e.LastOffset))
					w.publishers = append(w.publishers, e.PublisherEpoch)
				}
			}
			w.meta++
			c.Published(h.now, p.ID, w.meta, nil, Other)
		}
		if strings.HasPrefix(m.Object.Key, WhatCopy) && w.hold {
			w.held = append(w.held, done)
			continue
		}
		done()
	}
	for _, r := range rd.Reads {
		var res LocalResult
		switch r.What {
		case ReadLineage:
			res.Epochs, res.End = w.epochs, w.end()
		case ReadEnd:
			res.End = w.end()
		case ReadBatches:
			size := 0
			for _, b := range w.batches {
				if b.LastOffset >= r.From && (len(res.Batches) == 0 || size+len(b.Data) <= r.MaxBytes) {
					res.Batches = append(res.Batches, b)
					size += len(b.Data)
				}
			}
		}
		c.Read(h.now, r.ID, r.What, res)
	}
	for _, d := range rd.Deletes {
		c.Deleted(h.now, d.ID, w.deleteErr)
	}
	return len(rd.Encodes)+len(rd.Uploads)+len(rd.Publishes)+len(rd.Reads)+len(rd.Deletes) > 0
}

// BenchmarkProgress measures the leader's work for one follower report,
// which every follower makes for every partition it follows at least every
// ProgressInterval: over 1000 led partitions, from a follower caught up,
// one whose last record is of an earlier epoch (judged against the
// lineage), and one that lags behind what its leadership began with (its
// catch-up under way or waiting for its turn).
func BenchmarkProgress(b *testing.B) {
	const partitions = 1000
	lineage := []storage.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 100}}
	for _, bc := range []struct {
		name      string
		end       int64
		lastEpoch int32
	}{{"caught up", 100, 2}, {"earlier epoch", 100, 1}, {"lagging", 50, 2}} {
		b.Run(bc.name, func(b *testing.B) {
			h := newHarness(b, nil)
			tps := make([]metadata.TopicPartition, partitions)
			for i := range tps {
				tps[i] = metadata.TopicPartition{Topic: "bench", Partition: int32(i)}
				// Its followers are said to hold the log up to 100.
				require.NoError(b, h.c.BecomeLeader(h.now, tps[i], 2, []int32{2, 3}, -1, 100, digest.Chain{}))
			}
			h.c.Ready()
			h.c.Advance()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				h.c.Progress(h.now, tps[i%partitions], 2, bc.end, bc.lastEpoch, lineage, nil)
				if i%partitions == partitions-1 {
					h.c.Ready()
					h.c.Advance()
				}
			}
		})
	}
}

// A catch-up's copy, stored and its entries still being published (the
// metadata log refuses them for longer than the sweep age), is never
// swept: its entries would name a deleted object, and the follower it is
// for would wait for ever at that range.
func TestSweepSparesACatchUpCopyBeingPublished(t *testing.T) {
	w := newLogWorldWith(t, nil)
	h, c := w.h, w.h.c
	require.NoError(t, c.BecomeLeader(h.now, tpA, 1, []int32{2, 3, 4}, -1, 0, digest.Chain{}))
	for off := int64(0); off < 150; off += 50 {
		w.produce(1, off, off+49)
		h.advance(100 * time.Millisecond)
		w.drain()
	}
	for _, f := range []int32{2, 3, 4} {
		c.Progress(h.now, tpA, f, 150, 1, w.epochs, nil)
	}
	c.forget(c.collect(h.now), true)

	w.hold = true
	c.Progress(h.now, tpA, 2, 100, 1, w.epochs, nil) // it lost 100-149: a catch-up copies them
	w.drain()
	require.Len(t, w.held, 1, "the copy's upload")
	w.held[0]()
	w.held = nil
	copyRef := metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: fmt.Sprintf("%s%d", WhatCopy, w.keys)}
	w.drain()
	require.Len(t, w.held, 1, "the publication of the copy's entries")

	h.advance(time.Hour)
	swept, foreign := c.sweepable([]Listed{{Ref: copyRef, LastModified: h.now.Add(-time.Hour)}}, h.now, "b1", "")
	require.Zero(t, foreign)
	require.Empty(t, swept, "the copy is still to be published")

	w.release()
	require.Equal(t, []string{"100-149"}, w.republished)
}

// A catch-up long enough to take several copies, whose first copy is
// applied and collected before it ends, does not count that copy as
// reaching its follower once it ends: a follower that comes back below it
// is republished for again.
func TestCatchUpDoesNotCountItsCollectedCopies(t *testing.T) {
	w := newLogWorldWith(t, func(c *Config) { c.ObjectBytes = 400 })
	h, c := w.h, w.h.c
	require.NoError(t, c.BecomeLeader(h.now, tpA, 1, []int32{2, 3}, -1, 0, digest.Chain{}))
	for off := int64(0); off < 150; off += 50 {
		w.produce(1, off, off+49)
		h.advance(100 * time.Millisecond)
		w.drain()
	}
	for _, f := range []int32{2, 3} {
		c.Progress(h.now, tpA, f, 150, 1, w.epochs, nil)
	}
	c.forget(c.collect(h.now), true)

	w.hold = true
	c.Progress(h.now, tpA, 2, 0, -1, w.epochs, nil) // it lost its log
	w.drain()
	require.Len(t, w.held, 1, "the first copy's upload: a copy at a time")
	w.release() // the first copy is stored; the publication of its entries waits
	w.release() // they are published; the next copy's upload waits
	require.Equal(t, []string{"0-49"}, w.republished)
	c.Progress(h.now, tpA, 2, 50, 1, w.epochs, nil)
	h.advance(time.Hour)
	first := c.collect(h.now)
	require.Len(t, first, 1, "the first copy, applied by every follower")
	c.forget(first, true)

	w.hold = false
	w.release()
	require.Equal(t, []string{"0-49", "50-99", "100-149"}, w.republished)
	c.Progress(h.now, tpA, 2, 150, 1, w.epochs, nil)

	// Broker 2 loses its log again: nothing retained continues it below 50.
	c.Progress(h.now, tpA, 2, 0, -1, w.epochs, nil)
	w.drain()
	require.GreaterOrEqual(t, len(w.republished), 4, "republished for broker 2 again: %v", w.republished)
	require.Equal(t, []string{"0-49", "50-99", "100-149", "0-49"}, w.republished[:4])
}
