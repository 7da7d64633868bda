package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// producerBatches is how many of a producer's last batches a leader
// remembers per partition, as Kafka does: an idempotent producer has at
// most five requests in flight per connection, so a retry is of one of
// its last five batches.
const producerBatches = 5

// batchMeta is one batch an idempotent producer appended.
type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerEntry is one producer's state in one partition: its epoch and
// its last batches of that epoch, oldest first.
type producerEntry struct {
	epoch    int16
	batches  []batchMeta
	lastSeen time.Time // of the leader's clock: when the entry last changed
}

// producers is a partition leader's state of its idempotent producers,
// Kafka's producer state: what tells a retry from a new batch. The leader
// keeps it as it appends, and a broker that becomes the leader rebuilds
// it from the batch headers of its log, so that the retry of a batch the
// previous leader appended is recognized too. It is guarded by the
// partition's appendMu.
type producers struct {
	byID map[int64]*producerEntry
	// expiry is how long an entry that appended nothing is kept (Kafka's
	// producer.id.expiration.ms); a producer back after it is taken as a
	// new one.
	expiry    time.Duration
	now       func() time.Time
	lastSweep time.Time
}

func newProducers(expiry time.Duration, now func() time.Time) *producers {
	return &producers{byID: make(map[int64]*producerEntry), expiry: expiry, now: now, lastSweep: now()}
}

// check decides an idempotent producer's batch as Kafka's ProducerAppendInfo
// does. A batch equal to one of the producer's last ones (same epoch, same
// sequence range) is a retry: check returns it, for the answer to carry its
// offsets. An epoch below the producer's is refused with
// INVALID_PRODUCER_EPOCH, which is the code Kafka's Produce answers give a
// stale epoch at every version (the code older clients call
// PRODUCER_FENCED). A new epoch must start at sequence 0, and a batch of
// the same epoch must follow the last one; otherwise
// OUT_OF_ORDER_SEQUENCE_NUMBER. A producer the partition does not know
// (new, expired, or whose batches a failover truncated) may start at any
// sequence, as in Kafka.
func (ps *producers) check(h batchHeader) (*batchMeta, error) {
	e := ps.byID[h.producerID]
	if e == nil {
		return nil, nil
	}
	switch {
	case h.producerEpoch < e.epoch:
		return nil, &errRefused{kerr.InvalidProducerEpoch, fmt.Sprintf("producer %d's epoch %d is below its last, %d", h.producerID, h.producerEpoch, e.epoch)}
	case h.producerEpoch > e.epoch:
		if h.baseSequence != 0 {
			return nil, &errRefused{kerr.OutOfOrderSequenceNumber, fmt.Sprintf("producer %d's new epoch %d starts at sequence %d, not 0", h.producerID, h.producerEpoch, h.baseSequence)}
		}
		return nil, nil
	}
	last := h.lastSequence()
	for i := range e.batches {
		if m := &e.batches[i]; m.firstSeq == h.baseSequence && m.lastSeq == last {
			dup := *m
			return &dup, nil
		}
	}
	if n := len(e.batches); n > 0 && !inSequence(e.batches[n-1].lastSeq, h.baseSequence) {
		return nil, &errRefused{kerr.OutOfOrderSequenceNumber, fmt.Sprintf("producer %d's batch at sequence %d does not follow its last, %d", h.producerID, h.baseSequence, e.batches[n-1].lastSeq)}
	}
	return nil, nil
}

// inSequence reports whether next follows last, sequences wrapping after
// MaxInt32 as Kafka's do.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || next == 0 && last == 1<<31-1
}

// record takes an appended batch of an idempotent producer, without
// checks (a rebuild takes the log as its leaders wrote it): a batch of
// another epoch starts the producer's batches over, as in Kafka.
func (ps *producers) record(h batchHeader, first, last int64) {
	now := ps.now()
	e := ps.byID[h.producerID]
	if e == nil {
		ps.sweep(now)
		e = &producerEntry{epoch: h.producerEpoch}
		ps.byID[h.producerID] = e
	}
	if e.epoch != h.producerEpoch {
		e.epoch, e.batches = h.producerEpoch, e.batches[:0]
	}
	if len(e.batches) == producerBatches {
		e.batches = append(e.batches[:0], e.batches[1:]...)
	}
	e.batches = append(e.batches, batchMeta{firstSeq: h.baseSequence, lastSeq: h.lastSequence(), firstOffset: first, lastOffset: last})
	e.lastSeen = now
}

// sweep forgets the producers that appended nothing for the expiry, at
// most once a minute: what bounds the state of a partition whose
// producers come and go.
func (ps *producers) sweep(now time.Time) {
	if now.Sub(ps.lastSweep) < time.Minute {
		return
	}
	ps.lastSweep = now
	for id, e := range ps.byID {
		if now.Sub(e.lastSeen) >= ps.expiry {
			delete(ps.byID, id)
		}
	}
}

// rebuildProducers reads the batch headers of tp's log, from its start,
// into a new producer state, as Kafka's new leader loads its producer
// state (Kafka starts from a snapshot; this example's log keeps none, so
// the whole log is read).
func (b *Broker) rebuildProducers(ctx context.Context, tp metadata.TopicPartition) (*producers, error) {
	ps := newProducers(b.cfg.ProducerExpiry, time.Now)
	start, err := b.log.StartOffset(tp)
	if err != nil {
		return nil, err
	}
	end, err := b.log.EndOffset(tp)
	if err != nil {
		return nil, err
	}
	err = b.scanBatches(ctx, tp, start, end, func(bt storage.Batch) (bool, error) {
		if len(bt.Data) >= batchHeaderLen {
			if h := readHeader(bt.Data); h.idempotent() {
				ps.record(h, bt.FirstOffset, bt.LastOffset)
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("broker: rebuilding %s's producer state: %w", tp, err)
	}
	return ps, nil
}
