package memstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/metadata"
)

// DefaultMaxPollWait is how long a Read waits for a record before returning
// empty, unless WithMaxPollWait says otherwise. It is Kafka's default
// fetch.max.wait.ms.
const DefaultMaxPollWait = 500 * time.Millisecond

// LogOption configures a Log.
type LogOption func(*logConfig) error

type logConfig struct {
	maxWait time.Duration
	clock   Clock
}

// WithMaxPollWait sets how long a Read waits for a record to arrive before
// returning an empty result. 0 makes Read return at once, which is what a
// simulation stepping its own clock wants; the default is
// DefaultMaxPollWait.
func WithMaxPollWait(d time.Duration) LogOption {
	return func(c *logConfig) error {
		if d < 0 {
			return fmt.Errorf("memstore: WithMaxPollWait(%v): the wait must not be negative", d)
		}
		c.maxWait = d
		return nil
	}
}

// WithLogClock sets the clock that times Read's long poll; the default is
// the wall clock.
func WithLogClock(clock Clock) LogOption {
	return func(c *logConfig) error {
		if clock == nil {
			return errors.New("memstore: WithLogClock(nil): a clock is required")
		}
		c.clock = clock
		return nil
	}
}

// Log is an in-memory metadata.Log. It is safe for concurrent use. Values
// are copied on the way in and on the way out, so callers may reuse their
// buffers. A Read with nothing to return waits on a channel that the next
// Append to its partition closes: waiting readers cost no goroutine.
type Log struct {
	maxWait time.Duration
	clock   Clock
	parts   []*logPartition

	closed atomic.Bool
	done   chan struct{} // closed by Close
}

var _ metadata.Log = (*Log)(nil)

type logPartition struct {
	mu     sync.Mutex
	low    int64    // offset of values[0]
	values [][]byte // the records from low to the high watermark
	// appended is closed by the next Append, waking the readers waiting
	// for it, and then replaced.
	appended chan struct{}

	appends, appendedBytes        atomic.Int64
	reads, recordsRead, bytesRead atomic.Int64
}

// NewLog returns an empty log with the given number of partitions.
func NewLog(partitions int32, opts ...LogOption) (*Log, error) {
	if partitions <= 0 {
		return nil, fmt.Errorf("memstore: NewLog: partitions is %d, want at least 1", partitions)
	}
	cfg := logConfig{maxWait: DefaultMaxPollWait, clock: wallClock{}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	l := &Log{maxWait: cfg.maxWait, clock: cfg.clock, done: make(chan struct{})}
	l.parts = make([]*logPartition, partitions)
	for i := range l.parts {
		l.parts[i] = &logPartition{appended: make(chan struct{})}
	}
	return l, nil
}

// Partitions returns the number of partitions.
func (l *Log) Partitions() int32 { return int32(len(l.parts)) }

// partition checks the state every method shares: ctx live, log open,
// partition known.
func (l *Log) partition(ctx context.Context, op string, partition int32) (*logPartition, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: %s partition %d: %w", op, partition, err)
	}
	if l.closed.Load() {
		return nil, fmt.Errorf("memstore: %s partition %d: %w", op, partition, metadata.ErrClosed)
	}
	if partition < 0 || int(partition) >= len(l.parts) {
		return nil, fmt.Errorf("memstore: %s partition %d of a %d-partition log: %w",
			op, partition, len(l.parts), metadata.ErrUnknownPartition)
	}
	return l.parts[partition], nil
}

// Append adds a copy of value to the end of partition.
func (l *Log) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	p, err := l.partition(ctx, "append to", partition)
	if err != nil {
		return 0, err
	}
	v := make([]byte, len(value))
	copy(v, value)
	p.mu.Lock()
	offset := p.low + int64(len(p.values))
	p.values = append(p.values, v)
	close(p.appended)
	p.appended = make(chan struct{})
	p.mu.Unlock()
	p.appends.Add(1)
	p.appendedBytes.Add(int64(len(v)))
	return offset, nil
}

// Read returns up to max records of partition from offset from. With none
// to return it waits for an Append, for ctx, for Close, or for the maximum
// poll wait, whichever comes first; the wait ending returns no records and
// no error, ctx ending returns ctx's error, Close ErrClosed. Reading below
// the low watermark or above the high watermark is ErrOffsetOutOfRange.
func (l *Log) Read(ctx context.Context, partition int32, from int64, max int) ([]metadata.Record, error) {
	p, err := l.partition(ctx, "read", partition)
	if err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, fmt.Errorf("memstore: read partition %d from offset %d: max is %d, want at least 1", partition, from, max)
	}
	var timeout <-chan time.Time
	for {
		recs, appended, err := p.read(partition, from, max)
		if err != nil || len(recs) > 0 {
			return recs, err
		}
		if l.maxWait == 0 {
			return nil, nil
		}
		if timeout == nil {
			timeout = l.clock.After(l.maxWait)
		}
		select {
		case <-appended:
		case <-timeout:
			return nil, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("memstore: read partition %d from offset %d: %w", partition, from, ctx.Err())
		case <-l.done:
			return nil, fmt.Errorf("memstore: read partition %d from offset %d: %w", partition, from, metadata.ErrClosed)
		}
	}
}

// read returns copies of up to max records from offset from, or, if there
// are none yet, the channel the next Append closes.
func (p *logPartition) read(partition int32, from int64, max int) ([]metadata.Record, <-chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	high := p.low + int64(len(p.values))
	if from < p.low || from > high {
		return nil, nil, fmt.Errorf("memstore: read partition %d from offset %d outside [%d, %d]: %w",
			partition, from, p.low, high, metadata.ErrOffsetOutOfRange)
	}
	if from == high {
		return nil, p.appended, nil
	}
	n := min(int64(max), high-from)
	recs := make([]metadata.Record, n)
	var bytes int64
	for i := range recs {
		v := p.values[from-p.low+int64(i)]
		recs[i] = metadata.Record{Partition: partition, Offset: from + int64(i), Value: append([]byte(nil), v...)}
		bytes += int64(len(v))
	}
	p.reads.Add(1)
	p.recordsRead.Add(n)
	p.bytesRead.Add(bytes)
	return recs, nil, nil
}

// Watermarks returns the partition's first stored offset and the offset the
// next Append will get.
func (l *Log) Watermarks(ctx context.Context, partition int32) (low, high int64, err error) {
	p, err := l.partition(ctx, "watermarks of", partition)
	if err != nil {
		return 0, 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.low, p.low + int64(len(p.values)), nil
}

// Trim drops the records of partition below offset before.
func (l *Log) Trim(ctx context.Context, partition int32, before int64) error {
	p, err := l.partition(ctx, "trim", partition)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	high := p.low + int64(len(p.values))
	switch {
	case before > high:
		return fmt.Errorf("memstore: trim partition %d before offset %d, past the high watermark %d: %w",
			partition, before, high, metadata.ErrOffsetOutOfRange)
	case before <= p.low:
		return nil
	}
	n := before - p.low
	// Drop the references so the values can be collected; the slots
	// themselves go when append next grows the slice.
	clear(p.values[:n])
	p.values = p.values[n:]
	p.low = before
	return nil
}

// Close wakes every waiting Read with ErrClosed; every later call returns
// ErrClosed, Close included.
func (l *Log) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("memstore: close: %w", metadata.ErrClosed)
	}
	close(l.done)
	return nil
}

// LogCounters is the traffic of one log partition, or of a whole log.
type LogCounters struct {
	// Appends and AppendedBytes count the records appended and their
	// value bytes.
	Appends, AppendedBytes int64
	// Reads counts the Read calls that returned records; RecordsRead and
	// BytesRead what they returned.
	Reads, RecordsRead, BytesRead int64
}

// LogStats is a snapshot of a log's accounting.
type LogStats struct {
	// Partitions holds each partition's counters, indexed by partition.
	Partitions []LogCounters
	// Total is the sum over all partitions.
	Total LogCounters
}

// Stats returns the log's counters; they remain readable after Close.
func (l *Log) Stats() LogStats {
	s := LogStats{Partitions: make([]LogCounters, len(l.parts))}
	for i, p := range l.parts {
		c := LogCounters{
			Appends:       p.appends.Load(),
			AppendedBytes: p.appendedBytes.Load(),
			Reads:         p.reads.Load(),
			RecordsRead:   p.recordsRead.Load(),
			BytesRead:     p.bytesRead.Load(),
		}
		s.Partitions[i] = c
		s.Total.Appends += c.Appends
		s.Total.AppendedBytes += c.AppendedBytes
		s.Total.Reads += c.Reads
		s.Total.RecordsRead += c.RecordsRead
		s.Total.BytesRead += c.BytesRead
	}
	return s
}

// ResetStats sets every counter to zero.
func (l *Log) ResetStats() {
	for _, p := range l.parts {
		for _, v := range []*atomic.Int64{&p.appends, &p.appendedBytes, &p.reads, &p.recordsRead, &p.bytesRead} {
			v.Store(0)
		}
	}
}
