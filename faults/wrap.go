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

// do makes the operation req names: it decides its fate, waits out its
// delay, and runs op unless the fate fails it first or after. The effect
// is returned for a read to corrupt what op returned.
func do[T any](ctx context.Context, w wrapper, req Request, op func() (T, error)) (T, Effect, error) {
	var zero T
	e, err := w.begin(ctx, req)
	if err != nil {
		return zero, e, err
	}
	v, err := op()
	if err != nil {
		return zero, e, err
	}
	if err := e.After(req); err != nil {
		return zero, e, err
	}
	return v, e, nil
}

// none adapts an operation that returns only an error to do.
func none(op func() error) func() (struct{}, error) {
	return func() (struct{}, error) { return struct{}{}, op() }
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
	ref, _, err := do(ctx, s.w, req, func() (metadata.ObjectRef, error) { return s.s.Put(ctx, key, body) })
	return ref, err
}

func (s *store) get(op Op, ref metadata.ObjectRef, offset, length int64) Request {
	return Request{Op: op, StoreAZ: s.s.Local().AZ, AZ: ref.AZ, Bucket: ref.Bucket, Key: ref.Key, Offset: offset, Length: length}
}

func (s *store) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	b, e, err := do(ctx, s.w, s.get(OpGetRange, ref, offset, length), func() ([]byte, error) {
		return s.s.GetRange(ctx, ref, offset, length)
	})
	if err == nil && e.Corrupt != 0 {
		b = slices.Clone(b)
		e.CorruptBytes(b)
	}
	return b, err
}

// ReadRange corrupts dst itself: it is the caller's, and written only
// before ReadRange returns.
func (s *rangeStore) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	n, e, err := do(ctx, s.w, s.get(OpReadRange, ref, offset, int64(len(dst))), func() (int, error) {
		return s.rr.ReadRange(ctx, ref, offset, dst)
	})
	if err == nil {
		e.CorruptBytes(dst[:n])
	}
	return n, err
}

func (s *store) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	req := Request{Op: OpDelete, StoreAZ: s.s.Local().AZ, Refs: refs}
	if len(refs) > 0 {
		req.AZ, req.Bucket = refs[0].AZ, refs[0].Bucket
	}
	_, _, err := do(ctx, s.w, req, none(func() error { return s.s.Delete(ctx, refs) }))
	return err
}

func (s *store) List(ctx context.Context, bucket, prefix string) ([]storage.ObjectInfo, error) {
	req := Request{Op: OpList, StoreAZ: s.s.Local().AZ, Bucket: bucket, Key: prefix}
	infos, _, err := do(ctx, s.w, req, func() ([]storage.ObjectInfo, error) { return s.s.List(ctx, bucket, prefix) })
	return infos, err
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
	off, _, err := do(ctx, l.w, req, func() (int64, error) { return l.l.Append(ctx, partition, value) })
	return off, err
}

func (l *log) Read(ctx context.Context, partition int32, from int64, max int) ([]metadata.Record, error) {
	req := Request{Op: OpLogRead, Partition: partition, Offset: from, Length: int64(max)}
	recs, e, err := do(ctx, l.w, req, func() ([]metadata.Record, error) { return l.l.Read(ctx, partition, from, max) })
	if err == nil && e.Corrupt != 0 && len(recs) > 0 {
		recs = slices.Clone(recs)
		r := &recs[e.Corrupt%uint64(len(recs))]
		r.Value = slices.Clone(r.Value)
		e.CorruptBytes(r.Value)
	}
	return recs, err
}

func (l *log) Watermarks(ctx context.Context, partition int32) (low, high int64, err error) {
	req := Request{Op: OpLogWatermarks, Partition: partition}
	marks, _, err := do(ctx, l.w, req, func() ([2]int64, error) {
		low, high, err := l.l.Watermarks(ctx, partition)
		return [2]int64{low, high}, err
	})
	return marks[0], marks[1], err
}

func (l *log) Trim(ctx context.Context, partition int32, before int64) error {
	req := Request{Op: OpLogTrim, Partition: partition, Offset: before}
	_, _, err := do(ctx, l.w, req, none(func() error { return l.l.Trim(ctx, partition, before) }))
	return err
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
	off, _, err := do(context.Background(), l.w, req, func() (int64, error) { return l.l.EndOffset(tp) })
	return off, err
}

func (l *local) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	req := Request{Op: OpLocalEpochs, TopicPartition: tp}
	entries, _, err := do(context.Background(), l.w, req, func() ([]storage.EpochEntry, error) { return l.l.Epochs(tp) })
	return entries, err
}

func (l *local) Append(ctx context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	req := Request{Op: OpLocalAppend, TopicPartition: tp}
	_, _, err := do(ctx, l.w, req, none(func() error { return l.l.Append(ctx, tp, batches) }))
	return err
}

func (l *local) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	req := Request{Op: OpLocalTruncate, TopicPartition: tp, Offset: offset}
	_, _, err := do(ctx, l.w, req, none(func() error { return l.l.Truncate(ctx, tp, offset) }))
	return err
}

func (l *local) Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	req := Request{Op: OpLocalRead, TopicPartition: tp, Offset: from, Length: int64(maxBytes)}
	batches, e, err := do(ctx, l.w, req, func() ([]storage.Batch, error) { return l.l.Read(ctx, tp, from, maxBytes) })
	if err == nil && e.Corrupt != 0 && len(batches) > 0 {
		batches = slices.Clone(batches)
		b := &batches[e.Corrupt%uint64(len(batches))]
		b.Data = slices.Clone(b.Data)
		e.CorruptBytes(b.Data)
	}
	return batches, err
}
