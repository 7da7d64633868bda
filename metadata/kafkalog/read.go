package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/metadata"
)

// reader reads one partition with direct fetch requests on a client of its
// own. The client matters: Kafka answers the requests of one connection in
// order, so a long poll on an idle partition would hold up every other
// partition's fetch if they shared a connection.
type reader struct {
	partition int32
	cl        *kgo.Client

	// turn is held (a value sent) by the Read fetching for this
	// partition; a channel rather than a mutex so waiting honors ctx.
	// It guards leader, topicID, high and gen.
	turn    chan struct{}
	leader  int32 // -1 until looked up, and after a leadership error
	topicID [16]byte
	// high is the high watermark the last fetch saw, at or above the
	// end of the read-ahead.
	high int64
	// gen is the log's topic generation the reader's state belongs to.
	gen uint64

	mu sync.Mutex // guards ahead and low
	// ahead holds the records of the last fetch beyond what Read
	// returned, in offset order, so that the next Read from where the
	// last one stopped only confirms them (confirmAhead) rather than
	// fetch them again. It references the fetch response's buffer until
	// it is drained or dropped.
	ahead []*kgo.Record
	// low is the highest offset this log trimmed the partition to;
	// ahead is never served below it.
	low int64
}

// existingReader returns the partition's reader if it was read before.
func (l *Log) existingReader(partition int32) *reader {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readers[partition]
}

// reader returns the partition's reader, creating it and its client on first
// use. franz-go connects lazily, so creating the client costs no round trip.
func (l *Log) reader(partition int32) (*reader, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil, metadata.ErrClosed
	}
	if r := l.readers[partition]; r != nil {
		return r, nil
	}
	cl, err := kgo.NewClient(l.cfg.clientOpts()...)
	if err != nil {
		return nil, err
	}
	r := &reader{partition: partition, cl: cl, turn: make(chan struct{}, 1), leader: -1, gen: l.gen.Load()}
	l.readers[partition] = r
	return r, nil
}

// Read returns up to limit records of partition from offset from. When there
// are none yet, it long-polls: the broker holds the fetch until a record
// arrives or Config.ReadWait (or ctx's deadline, if sooner) passes, and Read
// then returns an empty slice and a nil error.
//
// Read issues one Kafka FetchRequest per call, without a consumer group or
// fetch session, so every call is positioned exactly at from; the records a
// fetch returned beyond limit are kept for a following Read from the next
// offset. Reads of one partition take turns; reads of different partitions
// do not wait for each other.
//
// Reading below the partition's log start offset, or past its high
// watermark, returns an error wrapping metadata.ErrOffsetOutOfRange that
// gives the watermarks. A partition leader change, another broker answer
// Kafka marks retriable, and a network failure (a dropped connection, a
// broker not reached) are retried with fresh metadata, with backoff, a few
// times within the call's bound; a retried fetch long-polls only what is
// left of Config.ReadWait. A Read that gets no answer for longer than
// Config.ReadWait plus Config.RequestTimeout, or whose retries fail,
// returns an error wrapping ErrUnavailable.
//
// When the topic was deleted and re-created (a new topic ID) since the
// partition was last read, Read returns an error wrapping both
// ErrTopicReplaced and metadata.ErrOffsetOutOfRange, with the new topic's
// watermarks: the offsets restarted, so the caller's position means nothing
// in the new topic and it must go back to the low watermark. Read never
// returns records of the old topic once it is replaced, not even records
// read ahead before: those are served only once the partition's leader,
// asked within the call by topic ID, confirmed them (see the package doc). A Read that finds the
// new ID itself, in the metadata it asks for after a fetch was refused,
// also makes this log's other calls switch to the new topic. A topic
// replaced by one with fewer partitions than Config.Partitions gives a
// *PartitionCountError for a partition that is gone.
//
// Each record's Value belongs to the caller: the log keeps no
// other reference to it and never writes to it. Values point into the fetch
// response they came in, so a value kept alive keeps that response (at most
// Config.ReadMaxBytes) in memory; copy what you keep for long.
func (l *Log) Read(ctx context.Context, partition int32, from int64, limit int) ([]metadata.Record, error) {
	if err := l.check(ctx, partition, "read"); err != nil {
		return nil, err
	}
	// Built on failure only: Read is the follower's hot path.
	what := func() string {
		return fmt.Sprintf("read partition %d of topic %q from offset %d", partition, l.cfg.Topic, from)
	}
	if limit <= 0 {
		return nil, fmt.Errorf("kafkalog: %s: max is %d, must be positive", what(), limit)
	}
	if from < 0 {
		return nil, fmt.Errorf("kafkalog: %s: %w: offsets start at 0", what(), metadata.ErrOffsetOutOfRange)
	}
	r, err := l.reader(partition)
	if err != nil {
		return nil, l.opErr(ctx, ctx, err, what())
	}
	// The long poll is the broker's to keep, within ReadWait; the bound
	// is for everything around it.
	opCtx, cancel := bound(ctx, l.cfg.ReadWait+l.cfg.RequestTimeout, l.requestTimeout)
	defer cancel()
	select {
	case r.turn <- struct{}{}:
	case <-opCtx.Done():
		return nil, l.opErr(ctx, opCtx, nil, what()+": waiting for another Read of the partition")
	}
	defer func() { <-r.turn }()
	if l.closed.Load() {
		return nil, fmt.Errorf("kafkalog: %s: %w", what(), metadata.ErrClosed)
	}

	if r.gen != l.gen.Load() {
		r.reset(l.gen.Load())
		return nil, l.outOfRange(opCtx, partition, what(), true)
	}
	if r.holds(from) {
		// The read-ahead came in a fetch before this call, and the
		// topic may have been replaced since without any call of this
		// log seeing it (or the partition trimmed by another process).
		// Confirm within this call that the partition's leader still
		// has the records in the topic this log reads; anything else
		// drops the read-ahead, and the fetch below says what happened.
		if l.confirmAhead(ctx, opCtx, r, from) {
			if recs := r.takeAhead(from, limit); recs != nil {
				return recs, nil
			}
		}
		r.dropAhead()
	}
	var recs []metadata.Record
	// Besides the broker answers Kafka marks retriable, a network
	// failure (a dropped connection, a broker not reached) is retried:
	// the client's Broker.Request does not, and a fetch is safe to send
	// again.
	err = retryIf(opCtx, isTransient, func() error {
		var ferr error
		var got fetched
		if got, ferr = l.fetch(ctx, opCtx, r, from, false); ferr == nil {
			recs = r.keep(got.records, limit)
		}
		if isTransient(ferr) {
			r.leader = -1
		}
		return ferr
	})
	switch {
	case errors.Is(err, ErrTopicReplaced):
		r.reset(l.gen.Load())
		return nil, l.outOfRange(opCtx, partition, what(), true)
	case errors.Is(err, kerr.OffsetOutOfRange):
		return nil, l.outOfRange(opCtx, partition, what(), false)
	case err != nil:
		return nil, l.opErr(ctx, opCtx, err, what())
	}
	return recs, nil
}

// reset forgets everything the reader knew of an older incarnation of the
// topic: its leader, ID, read-ahead and trim point.
func (r *reader) reset(gen uint64) {
	r.leader, r.topicID, r.gen = -1, [16]byte{}, gen
	r.mu.Lock()
	r.ahead, r.low = nil, 0
	r.mu.Unlock()
}

// confirmAhead reports whether the partition's leader, asked within this
// call, still has the read-ahead from offset from in the topic the reader
// reads. The request is a fetch by topic ID at the high watermark the last
// fetch saw, which the read-ahead ends at or below: without a long poll and
// asking for one byte, so that it costs a round trip but no records unless
// some were appended since (then one batch, dropped). An error (the topic
// unknown, the offset past the end after a truncation) or a log start
// offset above from (a trim) fails it.
func (l *Log) confirmAhead(ctx, opCtx context.Context, r *reader, from int64) bool {
	got, err := l.fetch(ctx, opCtx, r, r.high, true)
	return err == nil && got.logStart <= from
}

// fetched is what one fetch returned.
type fetched struct {
	records []*kgo.Record
	// logStart is the partition's log start offset (-1 from brokers
	// before fetch v5, which do not say).
	logStart int64
}

// fetch sends one FetchRequest for the reader's partition from offset from
// to its leader and returns the records, noting the high watermark in
// r.high. It long-polls up to ReadWait and asks for ReadMaxBytes, or, to
// confirm, neither (Kafka still returns one batch); ctx is the caller's,
// whose deadline shortens the poll; opCtx bounds the requests. Every
// record returned, and the answer to a confirmation, is of the topic of
// the reader's ID when the leader answered.
func (l *Log) fetch(ctx, opCtx context.Context, r *reader, from int64, confirm bool) (fetched, error) {
	if r.leader < 0 {
		info, err := topicMetadata(opCtx, r.cl, l.cfg.Topic)
		if err != nil {
			return fetched{}, err
		}
		if err := l.noteTopicID(info.id, r.gen); err != nil {
			return fetched{}, err
		}
		if int(r.partition) >= len(info.leaders) {
			// Partitions are never removed: the topic was replaced
			// by one with fewer, against Config.Partitions.
			return fetched{}, &PartitionCountError{Topic: l.cfg.Topic, Configured: l.cfg.Partitions, Actual: int32(len(info.leaders))}
		}
		if info.leaders[r.partition] < 0 {
			return fetched{}, kerr.LeaderNotAvailable
		}
		r.leader, r.topicID = info.leaders[r.partition], info.id
	}

	wait, maxBytes := l.cfg.ReadWait, l.cfg.ReadMaxBytes
	if confirm {
		wait, maxBytes = 0, 1
	}
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(deadline))
	}
	if deadline, ok := opCtx.Deadline(); ok {
		// A retry polls only what is left of the call's ReadWait.
		wait = min(wait, time.Until(deadline)-l.cfg.RequestTimeout)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(max(wait, 0).Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	rt := kmsg.NewFetchRequestTopic()
	// Both name and ID: the request version negotiated with the broker
	// decides which one is sent (IDs from Kafka 3.1, fetch v13).
	rt.Topic = l.cfg.Topic
	rt.TopicID = r.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = r.partition
	rp.FetchOffset = from
	rp.PartitionMaxBytes = maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	kresp, err := r.cl.Broker(int(r.leader)).Request(opCtx, req)
	if err != nil {
		// The broker may be gone; look the leader up again next time.
		r.leader = -1
		return fetched{}, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fetched{}, err
	}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		if rt.Topic != "" && rt.Topic != l.cfg.Topic || rt.TopicID != [16]byte{} && rt.TopicID != r.topicID {
			// Not what was asked for: treated as a topic the broker
			// does not know, which looks the topic up again.
			return fetched{}, fmt.Errorf("%w: fetch response from broker %d for topic %q ID %x", kerr.UnknownTopicID, r.leader, rt.Topic, rt.TopicID)
		}
		for j := range rt.Partitions {
			p := &rt.Partitions[j]
			if p.Partition != r.partition {
				continue
			}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset:    from,
				Topic:     l.cfg.Topic,
				Partition: r.partition,
			}, p, l.decompressor, nil)
			if fp.Err != nil {
				return fetched{}, fp.Err
			}
			if rt.TopicID == [16]byte{} && r.topicID != [16]byte{} && (confirm || len(fp.Records) > 0) {
				// A broker with topic IDs that fetches by name (before
				// Kafka 3.1, fetch v13) would serve a replacement's
				// records at the old topic's offsets: ask for the ID.
				info, err := topicMetadata(opCtx, r.cl, l.cfg.Topic)
				if err != nil {
					return fetched{}, err
				}
				if err := l.noteTopicID(info.id, r.gen); err != nil {
					return fetched{}, err
				}
			}
			r.high = p.HighWatermark
			return fetched{records: fp.Records, logStart: p.LogStartOffset}, nil
		}
	}
	return fetched{}, fmt.Errorf("fetch response from broker %d omitted the partition", r.leader)
}

// keep returns the first limit of recs as metadata records and stores the
// rest as the read-ahead.
func (r *reader) keep(recs []*kgo.Record, limit int) []metadata.Record {
	n := min(limit, len(recs))
	r.mu.Lock()
	r.ahead = recs[n:]
	r.mu.Unlock()
	return r.convert(recs[:n])
}

// holds reports whether the read-ahead holds from, dropping it if not: a
// Read elsewhere means the reader follows its caller's position.
func (r *reader) holds(from int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.aheadIndex(from)
	if !ok {
		r.ahead = nil
	}
	return ok
}

// aheadIndex returns the index in r.ahead of the record at from, if it is
// there and may be served. r.mu is held.
func (r *reader) aheadIndex(from int64) (int, bool) {
	if len(r.ahead) == 0 {
		return 0, false
	}
	i := int(from - r.ahead[0].Offset)
	return i, from >= r.low && i >= 0 && i < len(r.ahead) && r.ahead[i].Offset == from
}

// takeAhead returns up to limit read-ahead records starting at from, or nil
// if the read-ahead no longer holds from.
func (r *reader) takeAhead(from int64, limit int) []metadata.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.aheadIndex(from)
	if !ok {
		return nil
	}
	n := min(limit, len(r.ahead)-i)
	out := r.convert(r.ahead[i : i+n])
	r.ahead = r.ahead[i+n:]
	return out
}

// dropAhead forgets the read-ahead.
func (r *reader) dropAhead() {
	r.mu.Lock()
	r.ahead = nil
	r.mu.Unlock()
}

// trimmed records that this log trimmed the partition to before, so that
// the read-ahead no longer serves records below it.
func (r *reader) trimmed(before int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.low = max(r.low, before)
}

// convert turns franz-go records into metadata records without copying
// values. A value points into the fetch response, which franz-go allocated
// for this fetch alone and which nothing writes to again. Its capacity is
// cut to its length, so appending to one value cannot overwrite the next;
// franz-go's decoder does so too, but the promise is this package's.
func (r *reader) convert(recs []*kgo.Record) []metadata.Record {
	out := make([]metadata.Record, len(recs))
	for i, rec := range recs {
		v := rec.Value
		out[i] = metadata.Record{Partition: r.partition, Offset: rec.Offset, Value: v[:len(v):len(v)]}
	}
	return out
}

// outOfRange builds the error for a fetch the broker refused as out of
// range, or for a partition of a replaced topic, naming the watermarks so
// the caller knows where to resume.
func (l *Log) outOfRange(ctx context.Context, partition int32, what string, replaced bool) error {
	err := fmt.Errorf("kafkalog: %s: %w", what, metadata.ErrOffsetOutOfRange)
	if replaced {
		err = fmt.Errorf("kafkalog: %s: %w, so offsets restarted: %w", what, ErrTopicReplaced, metadata.ErrOffsetOutOfRange)
	}
	low, high, werr := l.watermarks(ctx, partition)
	if werr != nil {
		return fmt.Errorf("%w (watermarks unavailable: %v)", err, werr)
	}
	return fmt.Errorf("%w: partition holds offsets [%d, %d)", err, low, high)
}
