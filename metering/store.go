package metering

import (
	"context"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Store returns an ObjectStore that forwards every call to s unchanged and
// meters it. Several stores may share one Meter. It is a
// storage.RangeReader exactly when s is one, so that the engines read
// into pooled buffers through it as they would from s (a ReadRange is
// metered as the GET it is).
func (m *Meter) Store(s storage.ObjectStore) storage.ObjectStore {
	st := &store{m: m, s: s}
	if rr, ok := s.(storage.RangeReader); ok {
		return &rangeStore{store: st, rr: rr}
	}
	return st
}

type store struct {
	m *Meter
	s storage.ObjectStore
}

// rangeStore is a store whose inner store is a storage.RangeReader.
type rangeStore struct {
	*store
	rr storage.RangeReader
}

func (s *rangeStore) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	sent, start := ctx.Err() == nil, time.Now()
	n, err := s.rr.ReadRange(ctx, ref, offset, dst)
	s.got(ref, offset, int64(len(dst)), int64(n), sent, err, time.Since(start))
	return n, err
}

func (s *store) Local() metadata.ObjectRef { return s.s.Local() }

func (s *store) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	sent, start := ctx.Err() == nil, time.Now()
	ref, err := s.s.Put(ctx, key, body)
	took := time.Since(start)
	if !counted(sent, err) {
		return ref, err
	}
	s.m.record(OpPut, err, took)
	s.m.bytesUp.Add(int64(len(body)))
	// The footer is read after the call, from the caller's body, which the
	// store has not retained and the caller has not reused yet.
	sections, ferr := combiner.ReadFooter(body, int64(len(body)))
	if ferr != nil {
		s.m.putBodiesUnreadable.Add(1)
		sections = nil
	}
	at := ref
	if err != nil {
		at = s.s.Local()
		at.Key = key
	}
	s.m.ledger.put(at, int64(len(body)), sections, err == nil)
	return ref, err
}

func (s *store) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	sent, start := ctx.Err() == nil, time.Now()
	b, err := s.s.GetRange(ctx, ref, offset, length)
	s.got(ref, offset, length, int64(len(b)), sent, err, time.Since(start))
	return b, err
}

// got meters one GET of [offset, offset+length) of ref that returned n
// bytes, or err.
func (s *store) got(ref metadata.ObjectRef, offset, length, n int64, sent bool, err error, took time.Duration) {
	// A range no object could satisfy is refused before any request.
	if !counted(sent, err) || offset < 0 || length <= 0 {
		return
	}
	s.m.record(OpGet, err, took)
	var got int64
	if err == nil {
		got = n
		s.m.bytesDown.Add(got)
	}
	s.m.ledger.get(ref, offset, length, got)
}

func (s *store) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	sent, start := ctx.Err() == nil, time.Now()
	err := s.s.Delete(ctx, refs)
	took := time.Since(start)
	if len(refs) > 0 && counted(sent, err) {
		s.m.record(OpDelete, err, took)
	}
	if err == nil {
		s.m.ledger.forget(refs)
	}
	return err
}

func (s *store) List(ctx context.Context, bucket, prefix string) ([]storage.ObjectInfo, error) {
	sent, start := ctx.Err() == nil, time.Now()
	infos, err := s.s.List(ctx, bucket, prefix)
	took := time.Since(start)
	if counted(sent, err) {
		s.m.record(OpList, err, took)
	}
	return infos, err
}

// Log returns a metadata.Log that forwards every call to l unchanged and
// meters it: the bytes of each message appended and read, attributed to
// the partitions its entries and markers name, and the section layout its
// entries describe, for attributing the GETs that follow.
func (m *Meter) Log(l metadata.Log) metadata.Log { return &mlog{m: m, l: l} }

type mlog struct {
	m *Meter
	l metadata.Log
}

func (l *mlog) Partitions() int32 { return l.l.Partitions() }

func (l *mlog) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	sent, start := ctx.Err() == nil, time.Now()
	off, err := l.l.Append(ctx, partition, value)
	took := time.Since(start)
	if !counted(sent, err) {
		return off, err
	}
	l.m.record(OpAppend, err, took)
	if err == nil {
		l.m.metaAppendedBytes.Add(int64(len(value)))
		l.m.message(value, l.m.cfg.MetadataAppendCrossings, false)
	}
	return off, err
}

func (l *mlog) Read(ctx context.Context, partition int32, from int64, max int) ([]metadata.Record, error) {
	sent, start := ctx.Err() == nil, time.Now()
	recs, err := l.l.Read(ctx, partition, from, max)
	took := time.Since(start)
	if !counted(sent, err) {
		return recs, err
	}
	l.m.record(OpRead, err, took)
	for _, r := range recs {
		l.m.metaRecordsRead.Add(1)
		l.m.metaReadBytes.Add(int64(len(r.Value)))
		l.m.message(r.Value, l.m.cfg.MetadataReadCrossings, true)
	}
	return recs, err
}

func (l *mlog) Watermarks(ctx context.Context, partition int32) (int64, int64, error) {
	sent, start := ctx.Err() == nil, time.Now()
	lo, hi, err := l.l.Watermarks(ctx, partition)
	if counted(sent, err) {
		l.m.record(OpWatermarks, err, time.Since(start))
	}
	return lo, hi, err
}

func (l *mlog) Trim(ctx context.Context, partition int32, before int64) error {
	sent, start := ctx.Err() == nil, time.Now()
	err := l.l.Trim(ctx, partition, before)
	if counted(sent, err) {
		l.m.record(OpTrim, err, time.Since(start))
	}
	return err
}

func (l *mlog) Close() error { return l.l.Close() }

// message attributes one metadata message's bytes, crossing AZs crossings
// times; a read one also stands for a follower's fetch per entry and
// teaches the layout of the objects it names.
func (m *Meter) message(value []byte, crossings int, read bool) {
	msg, err := metadata.DecodeMessage(value)
	if err != nil {
		m.metaUndecodable.Add(1)
		msg = nil
	}
	control := 0.0
	if read && msg != nil {
		m.metaEntriesRead.Add(int64(len(msg.Entries)))
		control = float64(m.cfg.ControlBytesPerEntry)
	}
	m.ledger.message(msg, float64(len(value))*float64(crossings), control)
	if msg != nil {
		m.ledger.learn(msg.Entries)
	}
}
