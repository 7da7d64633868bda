package sim

import (
	"context"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/metadata"
)

// disorder says how a metaReader perturbs delivery: the chance that a
// record is held back, for how long at most, and the chance that it is
// delivered a second time later.
type disorder struct {
	delayP   float64
	maxDelay time.Duration
	dupP     float64
}

// readLatency is how long a record takes from the metadata log to a
// follower that polls it, when nothing holds it back.
const readLatency = time.Millisecond

// metaReader is one follower's reading of its broker's metadata
// partition: the real log's records, delivered late, out of order and
// duplicated, as the seed says. Each record appended to the partition
// while the reader lives is scheduled for delivery after a delay drawn
// from what the record says, and sometimes scheduled a second time; the
// records already retained when the reader starts are pulled the same
// way. A rewind (the follower asks to read from the low watermark again)
// delivers again, in order, every record delivered before that the log
// still retains: what a reader that re-reads a log whose publishers
// raced, retried and duplicated would see.
//
// It also tells the follower's checks, in order, every message it hands
// out: the fence check needs to know what the follower has seen.
type metaReader struct {
	w         *world
	partition int32
	seed      uint64
	batch     int // records per delivery on a rewind
	inst      *followerInst
	// deliver hands records to the follower; live reports whether the
	// follower still runs.
	deliver func(recs []metadata.Record)
	live    func() bool

	seen      map[uint64]uint64 // message identity -> how many held
	out       []metadata.Record // delivered, in order, with their real offsets
	rewinding bool              // a rewind is scheduled
	// pending counts the records appended that were not yet delivered
	// once: while it is zero, everything the log holds was delivered.
	pending int
}

func newMetaReader(w *world, inst *followerInst, seed uint64, batch int, deliver func([]metadata.Record), live func() bool) *metaReader {
	return startMetaReader(w, inst, inst.b.id%w.meta.Partitions(), seed, batch, deliver, live)
}

// startMetaReader starts a reader of metadata partition partition; inst,
// when not nil, is the follower whose checks learn what it delivers.
func startMetaReader(w *world, inst *followerInst, partition int32, seed uint64, batch int, deliver func([]metadata.Record), live func() bool) *metaReader {
	r := &metaReader{
		w: w, partition: partition, seed: seed, batch: max(batch, 1), inst: inst,
		deliver: deliver, live: live, seen: make(map[uint64]uint64),
	}
	ctx := context.Background()
	low, high, err := w.meta.Watermarks(ctx, r.partition)
	if err != nil {
		w.violate(KindHarness, "metadata watermarks: %v", err)
		return r
	}
	for low < high {
		recs, err := w.meta.Read(ctx, r.partition, low, 256)
		if err != nil || len(recs) == 0 {
			w.violate(KindHarness, "reading metadata partition %d at %d: %v", r.partition, low, err)
			return r
		}
		for _, rec := range recs {
			r.hold(rec)
		}
		low = recs[len(recs)-1].Offset + 1
	}
	return r
}

// appended is a record just appended to the reader's partition.
func (r *metaReader) appended(rec metadata.Record) { r.hold(rec) }

// hold schedules rec's delivery, and perhaps a second one.
func (r *metaReader) hold(rec metadata.Record) {
	d := r.w.disorderNow()
	// The draws depend on what the record says, not on where it landed in
	// the log.
	id := messageID(rec.Value)
	n := r.seen[id]
	r.seen[id] = n + 1
	dr := draws{state: identity(r.seed, id, n)}
	r1, r2, r3 := dr.float(), dr.float(), dr.float()
	delay := readLatency
	if r1 < d.delayP {
		delay += time.Duration(r2 * float64(d.maxDelay))
	}
	r.pending++
	r.w.after(delay, func() {
		r.pending--
		r.release(rec)
	})
	if r3 < d.dupP {
		r.w.after(delay+time.Duration(r2*float64(d.maxDelay+time.Second)), func() { r.release(rec) })
	}
}

// release delivers rec, unless the log trimmed it meanwhile: a slow
// reader of a trimmed log never sees what was trimmed.
func (r *metaReader) release(rec metadata.Record) {
	if !r.live() || rec.Offset < r.low() {
		return
	}
	r.out = append(r.out, rec)
	r.hand([]metadata.Record{rec})
}

func (r *metaReader) low() int64 {
	low, _, err := r.w.meta.Watermarks(context.Background(), r.partition)
	if err != nil {
		r.w.violate(KindHarness, "metadata watermarks: %v", err)
	}
	return low
}

// hand gives recs to the follower, telling the checks first.
func (r *metaReader) hand(recs []metadata.Record) {
	if r.inst != nil {
		r.inst.delivered(recs)
	}
	r.deliver(recs)
}

// high is the partition's high watermark.
func (r *metaReader) high() int64 {
	_, high, err := r.w.meta.Watermarks(context.Background(), r.partition)
	if err != nil {
		r.w.violate(KindHarness, "metadata watermarks: %v", err)
	}
	return high
}

// retained returns the records the partition still retains below upTo.
func (r *metaReader) retained(upTo int64) []metadata.Record {
	var out []metadata.Record
	for from := r.low(); from < upTo; {
		recs, err := r.w.meta.Read(context.Background(), r.partition, from, 256)
		if err != nil || len(recs) == 0 {
			r.w.violate(KindHarness, "reading metadata partition %d at %d: %v", r.partition, from, err)
			return out
		}
		for _, rec := range recs {
			if rec.Offset < upTo {
				out = append(out, rec)
			}
		}
		from = recs[len(recs)-1].Offset + 1
	}
	return out
}

// rewind schedules a re-reading of what was delivered and is retained.
func (r *metaReader) rewind() {
	if r.rewinding {
		return
	}
	r.rewinding = true
	r.w.after(readLatency, func() {
		r.rewinding = false
		if !r.live() {
			return
		}
		low := r.low()
		k := 0
		for k < len(r.out) && r.out[k].Offset < low {
			k++
		}
		r.out = r.out[k:]
		out := r.out
		for i := 0; i < len(out) && r.live(); i += r.batch {
			r.hand(out[i:min(i+r.batch, len(out))])
		}
	})
}

// redeliver schedules the delivery again of what was delivered from
// offset from on and is retained, as a reader that reads its partition
// again from there sees it; records not delivered yet come as scheduled.
func (r *metaReader) redeliver(from int64) {
	r.w.after(readLatency, func() {
		if !r.live() {
			return
		}
		from := max(from, r.low())
		var again []metadata.Record
		for _, rec := range r.out {
			if rec.Offset >= from {
				again = append(again, rec)
			}
		}
		for i := 0; i < len(again) && r.live(); i += r.batch {
			r.hand(again[i:min(i+r.batch, len(again))])
		}
	})
}

// messageID names a metadata message by what it says, leaving out object
// keys.
func messageID(value []byte) uint64 {
	m, err := metadata.DecodeMessage(value)
	if err != nil {
		return xxhash.Sum64(value)
	}
	parts := []uint64{uint64(m.WriterBrokerID), uint64(len(m.Entries)), uint64(len(m.Markers))}
	for _, e := range m.Entries {
		parts = append(parts, hashString(e.Partition.String()), uint64(e.RecordEpoch), uint64(e.PublisherEpoch),
			uint64(e.FirstOffset), uint64(e.LastOffset), e.Checksum)
	}
	for _, mk := range m.Markers {
		parts = append(parts, hashString(mk.Partition.String()), uint64(mk.Epoch), uint64(mk.StartOffset))
	}
	return identity(parts...)
}
