package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/metadata"
)

// disorder says how a metaView perturbs delivery: the chance that a record
// is held back, for how long at most, and the chance that it is delivered a
// second time later.
type disorder struct {
	delayP   float64
	maxDelay time.Duration
	dupP     float64
}

// metaView is the metadata log as one follower engine instance reads it:
// the real log's records, delivered late, out of order and duplicated, as
// the seed says. It keeps the metadata.Log contract (dense offsets, a low
// watermark, ErrOffsetOutOfRange below it) over its own sequence: each
// record pulled from the real log is released into the view after a random
// delay, and sometimes released again. The follower cannot tell it from a
// log whose publishers raced, retried and duplicated.
//
// It also remembers, in order, every message it handed out, which is what
// the fence check needs to know what the engine has seen.
type metaView struct {
	under   metadata.Log
	w       *world
	inst    *followerInst
	pollGap time.Duration

	mu    sync.Mutex
	seed  uint64
	seen  map[uint64]uint64 // message identity -> how many pulled
	parts map[int32]*viewPart
}

type viewPart struct {
	ucursor int64 // next real offset to pull; -1 before the first pull
	pending []heldRecord
	seq     uint64
	low     int64 // view offset of out[0]
	out     []viewRecord
}

type heldRecord struct {
	at    time.Time
	seq   uint64
	uoff  int64
	value []byte
}

type viewRecord struct {
	uoff  int64
	value []byte
}

func newMetaView(w *world, inst *followerInst, seed uint64) *metaView {
	return &metaView{
		under: w.meta, w: w, inst: inst, pollGap: 20 * time.Millisecond,
		seed:  seed,
		seen:  make(map[uint64]uint64),
		parts: make(map[int32]*viewPart),
	}
}

func (v *metaView) Partitions() int32 { return v.under.Partitions() }

// Append and Trim go to the real log: a Node publishes through the same
// Log it reads, and only its reads are disordered.
func (v *metaView) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	return v.under.Append(ctx, partition, value)
}

func (v *metaView) Trim(ctx context.Context, partition int32, before int64) error {
	return v.under.Trim(ctx, partition, before)
}

// Close does nothing: the real log belongs to the world.
func (v *metaView) Close() error { return nil }

// pull moves every record the real log has past the cursor into pending,
// drawing each one's delay and duplication, and releases what is due.
func (v *metaView) pull(ctx context.Context, partition int32, p *viewPart) error {
	ulow, uhigh, err := v.under.Watermarks(ctx, partition)
	if err != nil {
		return err
	}
	if p.ucursor < ulow {
		// Records trimmed before this view pulled them: the follower
		// never sees them, as a slow reader of a trimmed log would not.
		p.ucursor = ulow
	}
	for p.ucursor < uhigh {
		recs, err := v.under.Read(ctx, partition, p.ucursor, 256)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			v.hold(p, r.Offset, r.Value)
		}
		p.ucursor = recs[len(recs)-1].Offset + 1
	}
	v.release(p, ulow)
	return nil
}

func (v *metaView) hold(p *viewPart, uoff int64, value []byte) {
	d := v.w.disorderNow()
	now := time.Now()
	// The draws depend on what the record says, not on where it landed in
	// the log: publishers racing at one instant land in either order.
	id := messageID(value)
	n := v.seen[id]
	v.seen[id] = n + 1
	dr := draws{state: identity(v.seed, id, n)}
	r1, r2, r3 := dr.float(), dr.float(), dr.float()
	at := now
	if r1 < d.delayP {
		at = now.Add(time.Duration(r2 * float64(d.maxDelay)))
	}
	p.seq++
	p.pending = append(p.pending, heldRecord{at: at, seq: p.seq, uoff: uoff, value: value})
	if r3 < d.dupP {
		p.seq++
		p.pending = append(p.pending, heldRecord{at: at.Add(time.Duration(r2 * float64(d.maxDelay+time.Second))), seq: p.seq, uoff: uoff, value: value})
	}
}

// messageID names a metadata message by what it says, leaving out object
// keys, which carry a random part the engines draw in racy order.
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

// release moves due records to the view in release order, and drops the
// view's prefix of records the real log has trimmed.
func (v *metaView) release(p *viewPart, ulow int64) {
	now := time.Now()
	slices.SortFunc(p.pending, func(a, b heldRecord) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmpInt(a.seq, b.seq)
	})
	n := 0
	for n < len(p.pending) && !p.pending[n].at.After(now) {
		h := p.pending[n]
		p.out = append(p.out, viewRecord{uoff: h.uoff, value: h.value})
		n++
	}
	p.pending = slices.Delete(p.pending, 0, n)
	k := 0
	for k < len(p.out) && p.out[k].uoff < ulow {
		k++
	}
	if k > 0 {
		p.out = slices.Delete(p.out, 0, k)
		p.low += int64(k)
	}
}

func (v *metaView) part(partition int32) *viewPart {
	p := v.parts[partition]
	if p == nil {
		p = &viewPart{ucursor: -1}
		v.parts[partition] = p
	}
	return p
}

func (v *metaView) Watermarks(ctx context.Context, partition int32) (low, high int64, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p := v.part(partition)
	if err := v.pull(ctx, partition, p); err != nil {
		return 0, 0, err
	}
	return p.low, p.low + int64(len(p.out)), nil
}

// Read returns released records from the view offset from. With none
// released it waits a little (for the next release, or a long poll of the
// real log) and returns what is there then, possibly nothing.
func (v *metaView) Read(ctx context.Context, partition int32, from int64, limit int) ([]metadata.Record, error) {
	for attempt := 0; ; attempt++ {
		v.mu.Lock()
		p := v.part(partition)
		if err := v.pull(ctx, partition, p); err != nil {
			v.mu.Unlock()
			return nil, err
		}
		high := p.low + int64(len(p.out))
		if from < p.low || from > high {
			v.mu.Unlock()
			return nil, fmt.Errorf("sim: view of metadata partition %d: offset %d outside [%d, %d]: %w", partition, from, p.low, high, metadata.ErrOffsetOutOfRange)
		}
		if from < high {
			n := min(int64(limit), high-from)
			recs := make([]metadata.Record, n)
			for i := range recs {
				r := p.out[from-p.low+int64(i)]
				recs[i] = metadata.Record{Partition: partition, Offset: from + int64(i), Value: slices.Clone(r.value)}
			}
			v.mu.Unlock()
			v.inst.delivered(recs)
			return recs, nil
		}
		if attempt > 0 {
			v.mu.Unlock()
			return nil, nil
		}
		wait := v.pollGap
		if len(p.pending) > 0 {
			wait = min(wait, time.Until(p.pending[0].at))
		}
		v.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("sim: view of metadata partition %d: %w", partition, ctx.Err())
		case <-time.After(max(wait, time.Millisecond)):
		}
	}
}
