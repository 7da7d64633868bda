package sim

import (
	"context"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// batchMeta is what the checks need of a batch: its identity and a hash of
// its bytes. A batch is named by (partition, epoch, first offset), Kafka's
// invariant, and every batch any leader ever produced is registered under
// that name, so a hash mismatch means bytes no leader wrote.
type batchMeta struct {
	epoch       int32
	first, last int64
	sum         uint64
}

func metaOf(b storage.Batch) batchMeta {
	return batchMeta{epoch: b.Epoch, first: b.FirstOffset, last: b.LastOffset, sum: xxhash.Sum64(b.Data)}
}

func (m batchMeta) String() string { return fmt.Sprintf("e%d[%d-%d]", m.epoch, m.first, m.last) }

type batchKey struct {
	tp    metadata.TopicPartition
	epoch int32
	first int64
}

// brokerLog is a broker's local log: one memstore.LocalLog per partition, so
// a partition can be deleted when its replica moves away, and a mirror of
// each partition's batches for cheap comparisons. The engines' requests
// and the driver's produce path use it, one at a time.
type brokerLog struct {
	parts map[metadata.TopicPartition]*localPart
}

type localPart struct {
	log   *memstore.LocalLog
	start int64 // where the log starts (or will start, while empty)
	meta  []batchMeta
}

func newBrokerLog() *brokerLog {
	return &brokerLog{parts: make(map[metadata.TopicPartition]*localPart)}
}

func (l *brokerLog) partLocked(tp metadata.TopicPartition) *localPart {
	p := l.parts[tp]
	if p == nil {
		p = &localPart{log: memstore.NewLocalLog()}
		l.parts[tp] = p
	}
	return p
}

func (p *localPart) end() int64 {
	if n := len(p.meta); n > 0 {
		return p.meta[n-1].last + 1
	}
	return p.start
}

func (l *brokerLog) EndOffset(tp metadata.TopicPartition) (int64, error) {
	return l.partLocked(tp).log.EndOffset(tp)
}

func (l *brokerLog) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	return l.partLocked(tp).log.Epochs(tp)
}

func (l *brokerLog) Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	return l.partLocked(tp).log.Read(ctx, tp, from, maxBytes)
}

func (l *brokerLog) Append(ctx context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	p := l.partLocked(tp)
	if err := p.log.Append(ctx, tp, batches); err != nil {
		return err
	}
	for _, b := range batches {
		p.meta = append(p.meta, metaOf(b))
	}
	return nil
}

func (l *brokerLog) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	p := l.partLocked(tp)
	if err := p.log.Truncate(ctx, tp, offset); err != nil {
		return err
	}
	if len(p.meta) == 0 {
		p.start = max(p.start, offset)
		return nil
	}
	i, _ := slices.BinarySearchFunc(p.meta, offset, func(m batchMeta, off int64) int {
		return cmpInt(m.first, off)
	})
	p.meta = p.meta[:i]
	return nil
}

// assignEpoch records a new leader epoch in tp's epoch cache, as a broker's
// makeLeader does.
func (l *brokerLog) assignEpoch(tp metadata.TopicPartition, epoch int32, offset int64) error {
	return l.partLocked(tp).log.AssignEpoch(tp, epoch, offset)
}

// remove deletes tp's replica from the broker, as Kafka deletes a partition
// reassigned away. The next use starts an empty log at offset 0.
func (l *brokerLog) remove(tp metadata.TopicPartition) {
	delete(l.parts, tp)
}

// snapshot returns tp's log start and batches.
func (l *brokerLog) snapshot(tp metadata.TopicPartition) (int64, []batchMeta) {
	p := l.partLocked(tp)
	return p.start, slices.Clone(p.meta)
}

// end returns tp's log end offset.
func (l *brokerLog) end(tp metadata.TopicPartition) int64 {
	return l.partLocked(tp).end()
}

// holds reports whether tp's log holds batch m, byte for byte.
func (l *brokerLog) holds(tp metadata.TopicPartition, m batchMeta) bool {
	return holds(l.partLocked(tp).meta, m)
}

// needs reports whether tp's log lacks batch m of the true log at offsets
// it will still fetch: at or above its start.
func (l *brokerLog) needs(tp metadata.TopicPartition, m batchMeta) bool {
	p := l.partLocked(tp)
	if len(p.meta) > 0 && m.last < p.meta[0].first || len(p.meta) == 0 && m.last < p.start {
		return false
	}
	return !holds(p.meta, m)
}

// batches returns tp's batches with their bytes, for the final comparison.
func (l *brokerLog) batches(tp metadata.TopicPartition) []storage.Batch {
	p := l.partLocked(tp)
	if len(p.meta) == 0 {
		return nil
	}
	// Read hands out copies; at least one batch per call.
	var out []storage.Batch
	for from := p.meta[0].first; from < p.end(); {
		bs, err := p.log.Read(context.Background(), tp, from, 1<<30)
		if err != nil || len(bs) == 0 {
			break
		}
		out = append(out, bs...)
		from = bs[len(bs)-1].LastOffset + 1
	}
	return out
}

// holds reports whether metas, sorted by offset, contain m.
func holds(metas []batchMeta, m batchMeta) bool {
	i, ok := slices.BinarySearchFunc(metas, m.first, func(x batchMeta, off int64) int { return cmpInt(x.first, off) })
	return ok && metas[i] == m
}

// covering returns the index of the batch of metas holding offset, or -1.
func covering(metas []batchMeta, offset int64) int {
	i, _ := slices.BinarySearchFunc(metas, offset, func(x batchMeta, off int64) int {
		switch {
		case x.last < off:
			return -1
		case x.first > off:
			return 1
		}
		return 0
	})
	if i < len(metas) && metas[i].first <= offset && offset <= metas[i].last {
		return i
	}
	return -1
}

// isPrefix reports whether log (starting at start) is a prefix of truth:
// every batch of log is the batch truth has at the same offsets.
func isPrefix(start int64, log []batchMeta, truthStart int64, truth []batchMeta) bool {
	if len(log) == 0 {
		return start <= max(truthStart, end(truthStart, truth))
	}
	i := covering(truth, log[0].first)
	if i < 0 || len(truth)-i < len(log) {
		return false
	}
	return slices.Equal(log, truth[i:i+len(log)])
}

// commonEnd returns the offset up to which log agrees with other: the end
// of the longest run of identical batches from log's start.
func commonEnd(start int64, log []batchMeta, other []batchMeta) int64 {
	if len(log) == 0 {
		return start
	}
	i := covering(other, log[0].first)
	if i < 0 || other[i] != log[0] {
		return log[0].first
	}
	n := 0
	for n < len(log) && i+n < len(other) && log[n] == other[i+n] {
		n++
	}
	return log[n-1].last + 1
}

func end(start int64, metas []batchMeta) int64 {
	if n := len(metas); n > 0 {
		return metas[n-1].last + 1
	}
	return start
}

func cmpInt[T int64 | int32 | int | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
