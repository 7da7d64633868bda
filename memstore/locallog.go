package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// LocalLog is an in-memory broker log: the batches and leader-epoch cache
// of each partition, implementing storage.LocalLog for tests, examples and
// the demo. It keeps what it is given (batches are copied), checks that
// appends continue the log exactly, and is safe for concurrent use.
//
// Append copies batches' Data into blocks the log owns, one after another
// across partitions, rather than into an allocation each: at the demo's
// rates a fresh allocation per batch was most of the harness's CPU. A
// block is never written twice, so a stored batch's bytes never change
// (EachBatch relies on it); its memory is freed once no batch the log or
// a caller holds lies in it, so what Truncate removes is freed with the
// rest of its block.
type LocalLog struct {
	mu    sync.Mutex
	parts map[metadata.TopicPartition]*localPartition
	// free is what is left of the current block, to be carved into the
	// next batches' Data; block is that block's size.
	free  []byte
	block int
}

const (
	// firstBlockBytes and lastBlockBytes bound the size of the blocks
	// Append copies into, which doubles from the first to the last: a log
	// of little data holds little (the simulation keeps a log a
	// partition), one of much rarely allocates.
	firstBlockBytes = 64 << 10
	lastBlockBytes  = 1 << 20
	// ownBlockBytes is the size from which a batch that does not fit in
	// the rest of the current block gets an allocation of its own rather
	// than a new block, so that no block is left mostly unused.
	ownBlockBytes = lastBlockBytes / 4
)

// keep returns a copy of data in memory of the log's: the rest of the
// current block, or a new block if it does not fit.
func (l *LocalLog) keep(data []byte) []byte {
	n := len(data)
	if n > len(l.free) && n < ownBlockBytes {
		l.block = min(lastBlockBytes, max(firstBlockBytes, 2*l.block))
		if n <= l.block {
			l.free = make([]byte, l.block)
		}
	}
	if n == 0 || n > len(l.free) {
		// Clipped as the block's batches are: Clone may round the
		// capacity up, and two holders' appends would share the rest.
		return slices.Clip(slices.Clone(data))
	}
	out := l.free[:n:n] // capped: an append to it cannot reach the next batch's bytes
	l.free = l.free[n:]
	copy(out, data)
	return out
}

type localPartition struct {
	start   int64 // offset of the first record the log holds or will hold
	batches []storage.Batch
	epochs  fencing.Lineage
}

// NewLocalLog returns an empty log.
func NewLocalLog() *LocalLog {
	return &LocalLog{parts: make(map[metadata.TopicPartition]*localPartition)}
}

func (l *LocalLog) part(tp metadata.TopicPartition) *localPartition {
	p := l.parts[tp]
	if p == nil {
		p = &localPartition{}
		l.parts[tp] = p
	}
	return p
}

func (p *localPartition) end() int64 {
	if n := len(p.batches); n > 0 {
		return p.batches[n-1].LastOffset + 1
	}
	return p.start
}

// index returns the index of the batch holding offset, or of the first
// batch after it.
func (p *localPartition) index(offset int64) int {
	i, _ := slices.BinarySearchFunc(p.batches, offset, func(b storage.Batch, off int64) int {
		switch {
		case b.LastOffset < off:
			return -1
		case b.FirstOffset > off:
			return 1
		}
		return 0
	})
	return i
}

// EndOffset returns the offset the next record of tp will get.
func (l *LocalLog) EndOffset(tp metadata.TopicPartition) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.part(tp).end(), nil
}

// Epochs returns tp's leader-epoch cache.
func (l *LocalLog) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.part(tp).epochs.Entries(), nil
}

// AssignEpoch records that epoch starts at offset in tp's epoch cache, as a
// broker does when it becomes leader.
func (l *LocalLog) AssignEpoch(tp metadata.TopicPartition, epoch int32, offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.part(tp).epochs.Assign(epoch, offset)
}

// Append adds batches that continue tp's log exactly at its end, all or
// none, as storage.LocalLog says.
func (l *LocalLog) Append(_ context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(tp, batches)
}

// AppendOne appends b as Append does and returns it as the log keeps it:
// its Data is the log's copy, which the log never modifies. A broker can
// hand that to walstore.Node.Append, which needs the bytes unchanged until
// they are uploaded, and reuse its own buffer at once: one copy of a
// produced batch instead of two. The caller must not modify the Data it
// gets.
func (l *LocalLog) AppendOne(_ context.Context, tp metadata.TopicPartition, b storage.Batch) (storage.Batch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.appendLocked(tp, []storage.Batch{b}); err != nil {
		return storage.Batch{}, err
	}
	bs := l.parts[tp].batches
	return bs[len(bs)-1], nil
}

// appendLocked is Append with l.mu held.
func (l *LocalLog) appendLocked(tp metadata.TopicPartition, batches []storage.Batch) error {
	p := l.part(tp)
	next := p.end()
	epoch := int32(-1)
	if latest, ok := p.epochs.Latest(); ok {
		epoch = latest.Epoch
	}
	for i, b := range batches {
		switch {
		case b.LastOffset < b.FirstOffset || b.Epoch < 0:
			return fmt.Errorf("memstore: append to %s: batch %d (epoch %d, offsets %d-%d): %w", tp, i, b.Epoch, b.FirstOffset, b.LastOffset, storage.ErrInvalidBatch)
		case b.FirstOffset != next:
			return fmt.Errorf("memstore: append to %s: batch %d starts at %d, want %d: %w", tp, i, b.FirstOffset, next, storage.ErrNotContiguous)
		case b.Epoch < epoch:
			return fmt.Errorf("memstore: append to %s: batch %d at %d has epoch %d, below epoch %d before it: %w", tp, i, b.FirstOffset, b.Epoch, epoch, storage.ErrNotContiguous)
		}
		next, epoch = b.LastOffset+1, b.Epoch
	}
	for _, b := range batches {
		if latest, ok := p.epochs.Latest(); !ok || b.Epoch > latest.Epoch {
			if err := p.epochs.Assign(b.Epoch, b.FirstOffset); err != nil {
				return fmt.Errorf("memstore: append to %s: %w", tp, err)
			}
		}
		b.Data = l.keep(b.Data)
		p.batches = append(p.batches, b)
	}
	return nil
}

// Truncate removes tp's records at and after offset and the epochs that
// start there, as storage.LocalLog says: on a log holding no records, or
// at or below its first record, the log starts over at offset (Kafka's
// truncateFullyAndStartAt), which is how a new replica begins at the
// leader's earliest retained offset.
func (l *LocalLog) Truncate(_ context.Context, tp metadata.TopicPartition, offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset < 0 {
		return fmt.Errorf("memstore: truncate %s to %d: %w", tp, offset, storage.ErrInvalidOffset)
	}
	p := l.part(tp)
	if len(p.batches) == 0 || offset <= p.batches[0].FirstOffset {
		p.batches, p.start = nil, offset
		p.epochs.TruncateFromEnd(offset)
		return nil
	}
	i := p.index(offset)
	if i < len(p.batches) && p.batches[i].FirstOffset != offset {
		return fmt.Errorf("memstore: truncate %s to %d: batch %d-%d: %w", tp, offset, p.batches[i].FirstOffset, p.batches[i].LastOffset, storage.ErrNotBatchBoundary)
	}
	// Clipped, so that the next Append moves the batches to a new array
	// rather than overwrite the ones EachBatch may still be visiting.
	p.batches = slices.Clip(p.batches[:i])
	p.epochs.TruncateFromEnd(offset)
	return nil
}

// Read returns whole batches of tp from the one holding offset from, as
// storage.LocalLog says: as many as fit in maxBytes, and at least one.
func (l *LocalLog) Read(_ context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.part(tp)
	i := p.index(from)
	var out []storage.Batch
	size := 0
	for ; i < len(p.batches) && (len(out) == 0 || size+len(p.batches[i].Data) <= maxBytes); i++ {
		b := p.batches[i]
		b.Data = slices.Clone(b.Data)
		out = append(out, b)
		size += len(b.Data)
	}
	return out, nil
}

// EachBatch calls fn with each of tp's batches in offset order, from the
// one holding offset from (or the first the log holds, if from is below
// it), and stops at fn's first error, which it returns. It copies
// nothing: the batches are the log's own, as they were when EachBatch was
// called, and fn must not modify their Data. The log never modifies bytes
// it has stored, so fn may keep them; it is called without the log's lock
// held, and may call the log. This is how logs are compared at the end of
// a run without a copy of each (Batches copies).
func (l *LocalLog) EachBatch(tp metadata.TopicPartition, from int64, fn func(storage.Batch) error) error {
	l.mu.Lock()
	p := l.part(tp)
	i := p.index(from)
	// Appends add elements past len, and Truncate clips: the elements of
	// this slice are never written again.
	batches := p.batches[i:]
	l.mu.Unlock()
	for _, b := range batches {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// Batches returns a copy of all of tp's batches, for comparing logs.
func (l *LocalLog) Batches(tp metadata.TopicPartition) []storage.Batch {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.part(tp)
	out := make([]storage.Batch, len(p.batches))
	for i, b := range p.batches {
		b.Data = slices.Clone(b.Data)
		out[i] = b
	}
	return out
}
