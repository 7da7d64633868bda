package leadcore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
)

// logWorld performs a Core's requests as a driver over an instant store
// and metadata log would, with a local log of batches, and keeps the
// entries republished. With hold set, republish uploads and the
// publication of their entries wait until release.
type logWorld struct {
	h           *harness
	batches     []combiner.Batch
	epochs      []fencing.EpochEntry
	meta        int64
	keys        int
	hold        bool
	held        []func()
	republished []string // "first-last" of each republished entry, in order
	publishers  []int32  // and the epoch it was published at
}

func newLogWorld(t *testing.T) *logWorld {
	return &logWorld{h: newHarness(t, nil), epochs: []fencing.EpochEntry{{Epoch: 1, StartOffset: 0}}}
}

func (w *logWorld) end() int64 {
	if n := len(w.batches); n > 0 {
		return w.batches[n-1].LastOffset + 1
	}
	return 0
}

// produce appends [first, last] at epoch to the local log and the core.
func (w *logWorld) produce(epoch int32, first, last int64) {
	b := combiner.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: make([]byte, 400)}
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
		c.Deleted(h.now, d.ID, nil)
	}
	return len(rd.Encodes)+len(rd.Uploads)+len(rd.Publishes)+len(rd.Reads)+len(rd.Deletes) > 0
}

// report delivers follower's progress, with the local lineage.
func (w *logWorld) report(follower int32, end int64, lastEpoch int32) {
	w.h.c.Progress(w.h.now, tpA, follower, end, lastEpoch, w.epochs, nil)
}

// collect deletes what garbage collection may, and returns how many.
func (w *logWorld) collect() int {
	refs := w.h.c.Collect(w.h.now)
	w.h.c.Forget(refs, true)
	return len(refs)
}

// leadCollected makes w lead tpA at epoch 1 with followers 2, 3 and 4,
// and publish 0-149 in three objects, which every follower applied and
// which are collected: a follower that comes back lower finds nothing
// that continues its log.
func leadCollected(t *testing.T) *logWorld {
	w := newLogWorld(t)
	require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 1, []int32{2, 3, 4}, -1, 0))
	for off := int64(0); off < 150; off += 50 {
		w.produce(1, off, off+49)
		w.h.advance(100 * time.Millisecond)
		w.drain()
	}
	for _, f := range []int32{2, 3, 4} {
		w.report(f, 150, 1)
	}
	require.Equal(t, 3, w.collect())
	w.drain()
	require.Empty(t, w.republished)
	return w
}

// A follower that comes back below what is retained (it lost its log) is
// republished for, from its log end; the copies are kept until it has
// applied them.
func TestCatchUpRepublishesFromTheLogEnd(t *testing.T) {
	w := leadCollected(t)
	w.report(2, 100, 1)
	w.drain()
	require.Equal(t, []string{"100-149"}, w.republished)
	require.Zero(t, w.collect(), "follower 2 has not applied the copy")
	w.report(2, 150, 1)
	require.Equal(t, 1, w.collect())
	w.report(2, 150, 1)
	w.drain()
	require.Equal(t, []string{"100-149"}, w.republished, "caught up: nothing more")
}

// Laggards are served by one republish at a time, from the lowest: two
// that report before it publishes anything share one, started at the
// lower; one it covers causes nothing; one below it, once it publishes,
// is served when it ends, for what it did not cover only.
func TestCatchUpOneRepublishForAllLaggards(t *testing.T) {
	t.Run("reported before anything is published", func(t *testing.T) {
		w := leadCollected(t)
		w.hold = true
		w.report(2, 120, 1)
		w.drain() // the copy from 120 is uploading
		w.report(3, 100, 1)
		w.drain() // given up for one from 100
		w.report(4, 110, 1)
		w.drain()
		w.hold = false
		w.release()
		require.Equal(t, []string{"100-149"}, w.republished)
		require.Equal(t, uint64(1), w.h.c.Stats().Republished)
	})
	t.Run("reported while it publishes", func(t *testing.T) {
		w := leadCollected(t)
		w.hold = true
		w.report(2, 100, 1)
		w.drain()
		w.release() // the copy is stored; its entries are being published
		w.report(3, 50, 1)
		w.drain()
		w.hold = false
		w.release()
		require.Equal(t, []string{"100-149", "50-99"}, w.republished)
	})
}

// A leadership that goes on at a later epoch while a catch-up runs
// starts it again at that epoch: followers of the later epoch would take
// entries published at the earlier one for a deposed leader's.
func TestCatchUpStartsAgainAtANewEpoch(t *testing.T) {
	w := leadCollected(t)
	w.hold = true
	w.report(2, 100, 1)
	w.drain()
	w.epochs = append(w.epochs, fencing.EpochEntry{Epoch: 2, StartOffset: 150})
	require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 2, []int32{2, 3, 4}, -1, 150))
	w.drain()
	w.hold = false
	w.release()
	require.Equal(t, []string{"100-149"}, w.republished)
	require.Equal(t, []int32{2}, w.publishers)
}

// Catch-ups of many partitions run BufferBytes/ObjectBytes at a time
// (three here), the others in turn.
func TestCatchUpsTakeTurns(t *testing.T) {
	w := newLogWorld(t)
	for off := int64(0); off < 150; off += 50 {
		w.batches = append(w.batches, combiner.Batch{Epoch: 1, FirstOffset: off, LastOffset: off + 49, Data: make([]byte, 400)})
	}
	tps := []metadata.TopicPartition{tpA, tpB, {Topic: "t", Partition: 2}, {Topic: "t", Partition: 3}}
	for _, tp := range tps {
		// Its follower is said to hold the log up to 150, and reports 100.
		require.NoError(t, w.h.c.BecomeLeader(w.h.now, tp, 1, []int32{2}, -1, 150))
	}
	w.drain()
	w.hold = true
	for _, tp := range tps {
		w.h.c.Progress(w.h.now, tp, 2, 100, 1, nil, nil)
	}
	w.drain()
	require.Len(t, w.held, 3, "three copies uploading, one partition waiting")
	w.hold = false
	w.release()
	require.Equal(t, []string{"100-149", "100-149", "100-149", "100-149"}, w.republished)
}

// What a report says is judged as Kafka's leader judges a fetch: a last
// epoch the leader's log does not have means the follower truncates
// first, and nothing is done until it reports again; one of an epoch
// later than the leader's is a deposed leader's to ignore; a log end past
// the leader's is not believed; a log without records holds nothing and
// goes on at its end; a broker that is not a follower is not listened to.
func TestCatchUpJudgesTheReport(t *testing.T) {
	t.Run("last epoch not in the lineage", func(t *testing.T) {
		w := newLogWorld(t)
		w.batches = []combiner.Batch{{Epoch: 1, FirstOffset: 0, LastOffset: 99, Data: make([]byte, 400)}}
		w.epochs = []fencing.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 100}}
		require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 3, []int32{2}, -1, 100))
		w.produce(3, 100, 149)
		w.h.advance(100 * time.Millisecond)
		w.drain()
		w.report(2, 150, 3)
		require.Equal(t, 1, w.collect())

		w.report(2, 120, 2) // epoch 2 was never this log's
		w.drain()
		require.Empty(t, w.republished)
		rs, _ := w.h.c.Replicas(tpA)
		require.Equal(t, int64(-1), rs[0].EndOffset, "its credit is withdrawn until it truncates")
		w.report(2, 100, 1) // truncated to the end of epoch 1
		w.drain()
		require.Equal(t, []string{"100-149"}, w.republished)
	})
	t.Run("last epoch past the leader's", func(t *testing.T) {
		w := leadCollected(t)
		w.report(2, 0, 2) // it follows a later leader: this one is deposed
		w.drain()
		require.Empty(t, w.republished)
		rs, _ := w.h.c.Replicas(tpA)
		require.Equal(t, int64(150), rs[0].EndOffset, "the report is ignored")
	})
	t.Run("log end past the leader's", func(t *testing.T) {
		w := leadCollected(t)
		w.report(2, 1000, 1)
		w.drain()
		require.Empty(t, w.republished)
		rs, _ := w.h.c.Replicas(tpA)
		require.Equal(t, int64(150), rs[0].EndOffset)
	})
	t.Run("empty log", func(t *testing.T) {
		w := leadCollected(t)
		w.report(2, 0, -1)
		w.drain()
		require.Equal(t, []string{"0-99", "100-149"}, w.republished, "ObjectBytes at a time")
		rs, _ := w.h.c.Replicas(tpA)
		require.Equal(t, int64(0), rs[0].EndOffset, "it holds nothing")
		require.Zero(t, w.collect())
	})
	t.Run("not a follower", func(t *testing.T) {
		w := leadCollected(t)
		w.report(5, 0, 1)
		require.NotContains(t, w.h.c.gc.applied[tpA].applied, int32(5), "nothing is kept for a broker that is not a follower")
		require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 1, []int32{2, 3}, -1, 150))
		w.report(4, 0, 1)
		w.drain()
		require.Empty(t, w.republished)
	})
}

// The republish a new leadership owes its followers comes first; a
// laggard below it is served once it is done, up to where it began.
func TestCatchUpWaitsForTheLeadershipsRepublish(t *testing.T) {
	w := newLogWorld(t)
	for off := int64(0); off < 150; off += 50 {
		w.batches = append(w.batches, combiner.Batch{Epoch: 1, FirstOffset: off, LastOffset: off + 49, Data: make([]byte, 400)})
	}
	w.epochs = append(w.epochs, fencing.EpochEntry{Epoch: 2, StartOffset: 150})
	w.hold = true
	require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 2, []int32{2}, 100, 150))
	w.drain()
	w.report(2, 50, 1)
	w.drain()
	w.hold = false
	w.release()
	require.Equal(t, []string{"100-149", "50-99"}, w.republished)
}

// A placement that drops a follower and takes it back before anything
// was published in between reaches it as before: nothing is republished.
// Taken back later, it is reached only from what is published since.
func TestCatchUpAcrossAPlacementChange(t *testing.T) {
	w := newLogWorld(t)
	require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 1, []int32{2, 3}, -1, 0))
	w.produce(1, 0, 49)
	w.h.advance(100 * time.Millisecond)
	w.drain()
	require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 1, []int32{2}, -1, 0))
	require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 1, []int32{2, 3}, -1, 0))
	w.report(3, 0, -1)
	w.drain()
	require.Empty(t, w.republished, "the flap changed nothing")

	require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 1, []int32{2}, -1, 0))
	w.produce(1, 50, 99)
	w.h.advance(100 * time.Millisecond)
	w.drain()
	require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 1, []int32{2, 3}, -1, 0))
	w.report(3, 0, -1)
	w.drain()
	require.Equal(t, []string{"0-99"}, w.republished, "50-99 was published without it")
}

// Replicas: a follower is caught up once it holds the high watermark and
// the current epoch's start (Kafka's rule for joining the ISR).
func TestCoreReplicas(t *testing.T) {
	w := leadCollected(t)
	caughtUp := func() map[int32]bool {
		rs, ok := w.h.c.Replicas(tpA)
		require.True(t, ok)
		out := make(map[int32]bool)
		for _, r := range rs {
			out[r.Broker] = r.CaughtUp
			require.True(t, r.InSync)
		}
		return out
	}
	require.Equal(t, map[int32]bool{2: true, 3: true, 4: true}, caughtUp())
	w.report(2, 150, 1)
	at := w.h.now
	w.h.advance(time.Second)
	w.report(2, 120, 1)
	rs, _ := w.h.c.Replicas(tpA)
	require.Equal(t, ReplicaState{Broker: 2, EndOffset: 120, InSync: true, LastCaughtUp: at}, rs[0],
		"it last held everything published at its report before")
	require.Equal(t, map[int32]bool{2: false, 3: true, 4: true}, caughtUp())
	_, ok := w.h.c.Replicas(tpB)
	require.False(t, ok)

	// A new leadership from 150 at epoch 2: the high watermark is not
	// known until every follower reported; one at 120 lacks the epoch's
	// start.
	w.h.c.Resign(w.h.now, tpA)
	w.epochs = append(w.epochs, fencing.EpochEntry{Epoch: 2, StartOffset: 150})
	require.NoError(t, w.h.c.BecomeLeader(w.h.now, tpA, 2, []int32{2, 3}, -1, 150))
	w.report(2, 120, 1)
	rs, _ = w.h.c.Replicas(tpA)
	require.Equal(t, []ReplicaState{{Broker: 2, EndOffset: 120, InSync: true}, {Broker: 3, EndOffset: -1, InSync: true}}, rs)
	w.report(2, 150, 1)
	require.Equal(t, map[int32]bool{2: true, 3: false}, caughtUp())
}

// BenchmarkProgress measures the leader's work for one follower report,
// which every follower makes for every partition it follows at least every
// ProgressInterval: over 1000 led partitions, from a follower caught up,
// one whose last record is of an earlier epoch (judged against the
// lineage), and one that lags behind what its leadership began with (its
// catch-up under way or waiting for its turn).
func BenchmarkProgress(b *testing.B) {
	const partitions = 1000
	lineage := []fencing.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 100}}
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
				require.NoError(b, h.c.BecomeLeader(h.now, tps[i], 2, []int32{2, 3}, -1, 100))
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
