package faults

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Option configures a wrapper.
type Option func(*wrapper)

// WithWait sets how a wrapper serves an Effect's delay: wait returns once
// d has passed, or with an error (ctx's) that fails the operation. It is
// called for every operation, with d zero for one not delayed. The
// default waits on the wall clock until d passes or ctx is done; a
// simulation that keeps its own clock records d instead.
func WithWait(wait func(ctx context.Context, d time.Duration) error) Option {
	return func(w *wrapper) { w.wait = wait }
}

// wrapper is what the wrappers of every dependency share: the injector,
// and how an operation's fate is served around it.
type wrapper struct {
	inj  Injector
	wait func(context.Context, time.Duration) error
}

func newWrapper(inj Injector, opts []Option) wrapper {
	w := wrapper{inj: inj, wait: sleep}
	for _, o := range opts {
		o(&w)
	}
	return w
}

// sleep waits d on the wall clock, cut short by ctx.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// begin decides req's fate, waits out its delay and returns its effect,
// or the error that fails it before it runs.
func (w wrapper) begin(ctx context.Context, req Request) (Effect, error) {
	e := w.inj.Inject(ctx, req)
	if err := w.wait(ctx, e.Delay); err != nil {
		return e, fmt.Errorf("faults: %s: waiting out an injected delay of %v: %w", req, e.Delay, err)
	}
	return e, e.Before(req)
}

// WrapStore returns s behind inj: every operation of s is first put to
// inj, which may delay it, fail it before or after it runs, or change a
// byte of what a GET returns. The result is a storage.RangeReader when s
// is one. It keeps s's contract: it retains no caller's buffer, and a
// corrupted GetRange changes a copy of what s returned, never s's own
// bytes.
func WrapStore(s storage.ObjectStore, inj Injector, opts ...Option) storage.ObjectStore {
	st := &store{s: s, w: newWrapper(inj, opts)}
	if rr, ok := s.(storage.RangeReader); ok {
		return &rangeStore{st, rr}
	}
	return st
}

type store struct {
	s storage.ObjectStore
	w wrapper
}

// rangeStore is a store over a storage.RangeReader.
type rangeStore struct {
	*store
	rr storage.RangeReader
}

var (
	_ storage.ObjectStore = (*store)(nil)
	_ storage.RangeReader = (*rangeStore)(nil)
)

func (s *store) Local() metadata.ObjectRef { return s.s.Local() }

func (s *store) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	local := s.s.Local()
	req := Request{Op: OpPut, StoreAZ: local.AZ, AZ: local.AZ, Bucket: local.Bucket, Key: key, Length: int64(len(body)), Body: body}
	e, err := s.w.begin(ctx, req)
	if err != nil {
		return metadata.ObjectRef{}, err
	}
	ref, err := s.s.Put(ctx, key, body)
	if err != nil {
		return metadata.ObjectRef{}, err
	}
	if err := e.After(req); err != nil {
		return metadata.ObjectRef{}, err
	}
	return ref, nil
}

func (s *store) get(op Op, ref metadata.ObjectRef, offset, length int64) Request {
	return Request{Op: op, StoreAZ: s.s.Local().AZ, AZ: ref.AZ, Bucket: ref.Bucket, Key: ref.Key, Offset: offset, Length: length}
}

func (s *store) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	req := s.get(OpGetRange, ref, offset, length)
	e, err := s.w.begin(ctx, req)
	if err != nil {
		return nil, err
	}
	b, err := s.s.GetRange(ctx, ref, offset, length)
	if err != nil {
		return nil, err
	}
	if err := e.After(req); err != nil {
		return nil, err
	}
	if e.Corrupt != 0 {
		b = slices.Clone(b)
		e.CorruptBytes(b)
	}
	return b, nil
}

// ReadRange corrupts dst itself: it is the caller's, and written only
// before ReadRange returns.
func (s *rangeStore) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	req := s.get(OpReadRange, ref, offset, int64(len(dst)))
	e, err := s.w.begin(ctx, req)
	if err != nil {
		return 0, err
	}
	n, err := s.rr.ReadRange(ctx, ref, offset, dst)
	if err != nil {
		return n, err
	}
	if err := e.After(req); err != nil {
		return 0, err
	}
	e.CorruptBytes(dst[:n])
	return n, nil
}

func (s *store) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	req := Request{Op: OpDelete, StoreAZ: s.s.Local().AZ, Refs: refs}
	if len(refs) > 0 {
		req.AZ, req.Bucket = refs[0].AZ, refs[0].Bucket
	}
	e, err := s.w.begin(ctx, req)
	if err != nil {
		return err
	}
	if err := s.s.Delete(ctx, refs); err != nil {
		return err
	}
	return e.After(req)
}

func (s *store) List(ctx context.Context, bucket, prefix string) ([]storage.ObjectInfo, error) {
	req := Request{Op: OpList, StoreAZ: s.s.Local().AZ, Bucket: bucket, Key: prefix}
	e, err := s.w.begin(ctx, req)
	if err != nil {
		return nil, err
	}
	infos, err := s.s.List(ctx, bucket, prefix)
	if err != nil {
		return nil, err
	}
	if err := e.After(req); err != nil {
		return nil, err
	}
	return infos, nil
}

// WrapLog returns l behind inj, as WrapStore does for an object store.
// Partitions and Close are l's. A corrupted Read changes a byte of a copy
// of one record's value.
func WrapLog(l metadata.Log, inj Injector, opts ...Option) metadata.Log {
	return &log{l: l, w: newWrapper(inj, opts)}
}

type log struct {
	l metadata.Log
	w wrapper
}

var _ metadata.Log = (*log)(nil)

func (l *log) Partitions() int32 { return l.l.Partitions() }
func (l *log) Close() error      { return l.l.Close() }

func (l *log) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	req := Request{Op: OpLogAppend, Partition: partition, Length: int64(len(value))}
	e, err := l.w.begin(ctx, req)
	if err != nil {
		return 0, err
	}
	off, err := l.l.Append(ctx, partition, value)
	if err != nil {
		return 0, err
	}
	if err := e.After(req); err != nil {
		return 0, err
	}
	return off, nil
}

func (l *log) Read(ctx context.Context, partition int32, from int64, max int) ([]metadata.Record, error) {
	req := Request{Op: OpLogRead, Partition: partition, Offset: from, Length: int64(max)}
	e, err := l.w.begin(ctx, req)
	if err != nil {
		return nil, err
	}
	recs, err := l.l.Read(ctx, partition, from, max)
	if err != nil {
		return nil, err
	}
	if err := e.After(req); err != nil {
		return nil, err
	}
	if e.Corrupt != 0 && len(recs) > 0 {
		recs = slices.Clone(recs)
		r := &recs[e.Corrupt%uint64(len(recs))]
		r.Value = slices.Clone(r.Value)
		e.CorruptBytes(r.Value)
	}
	return recs, nil
}

func (l *log) Watermarks(ctx context.Context, partition int32) (low, high int64, err error) {
	req := Request{Op: OpLogWatermarks, Partition: partition}
	e, err := l.w.begin(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	if low, high, err = l.l.Watermarks(ctx, partition); err != nil {
		return 0, 0, err
	}
	if err := e.After(req); err != nil {
		return 0, 0, err
	}
	return low, high, nil
}

func (l *log) Trim(ctx context.Context, partition int32, before int64) error {
	req := Request{Op: OpLogTrim, Partition: partition, Offset: before}
	e, err := l.w.begin(ctx, req)
	if err != nil {
		return err
	}
	if err := l.l.Trim(ctx, partition, before); err != nil {
		return err
	}
	return e.After(req)
}

// WrapLocal returns l behind inj, as WrapStore does for an object store.
// EndOffset and Epochs take no context: their delays cannot be cut
// short. A corrupted Read changes a byte of a copy of one batch's data.
func WrapLocal(l storage.LocalLog, inj Injector, opts ...Option) storage.LocalLog {
	return &local{l: l, w: newWrapper(inj, opts)}
}

type local struct {
	l storage.LocalLog
	w wrapper
}

var _ storage.LocalLog = (*local)(nil)

func (l *local) EndOffset(tp metadata.TopicPartition) (int64, error) {
	req := Request{Op: OpLocalEndOffset, TopicPartition: tp}
	e, err := l.w.begin(context.Background(), req)
	if err != nil {
		return 0, err
	}
	off, err := l.l.EndOffset(tp)
	if err != nil {
		return 0, err
	}
	if err := e.After(req); err != nil {
		return 0, err
	}
	return off, nil
}

func (l *local) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	req := Request{Op: OpLocalEpochs, TopicPartition: tp}
	e, err := l.w.begin(context.Background(), req)
	if err != nil {
		return nil, err
	}
	entries, err := l.l.Epochs(tp)
	if err != nil {
		return nil, err
	}
	if err := e.After(req); err != nil {
		return nil, err
	}
	return entries, nil
}

func (l *local) Append(ctx context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	req := Request{Op: OpLocalAppend, TopicPartition: tp}
	e, err := l.w.begin(ctx, req)
	if err != nil {
		return err
	}
	if err := l.l.Append(ctx, tp, batches); err != nil {
		return err
	}
	return e.After(req)
}

func (l *local) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	req := Request{Op: OpLocalTruncate, TopicPartition: tp, Offset: offset}
	e, err := l.w.begin(ctx, req)
	if err != nil {
		return err
	}
	if err := l.l.Truncate(ctx, tp, offset); err != nil {
		return err
	}
	return e.After(req)
}

func (l *local) Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	req := Request{Op: OpLocalRead, TopicPartition: tp, Offset: from, Length: int64(maxBytes)}
	e, err := l.w.begin(ctx, req)
	if err != nil {
		return nil, err
	}
	batches, err := l.l.Read(ctx, tp, from, maxBytes)
	if err != nil {
		return nil, err
	}
	if err := e.After(req); err != nil {
		return nil, err
	}
	if e.Corrupt != 0 && len(batches) > 0 {
		batches = slices.Clone(batches)
		b := &batches[e.Corrupt%uint64(len(batches))]
		b.Data = slices.Clone(b.Data)
		e.CorruptBytes(b.Data)
	}
	return batches, nil
}
