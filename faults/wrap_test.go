package faults_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metadata/metadatatest"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

var tp = metadata.TopicPartition{Topic: "t", Partition: 3}

// env is one of each dependency, bare and behind an injector, holding an
// object, three metadata records and two local batches.
type env struct {
	store, peer   storage.ObjectStore // bare
	log           metadata.Log
	local         storage.LocalLog
	fstore, fpeer storage.ObjectStore // wrapped
	flog          metadata.Log
	flocal        storage.LocalLog
	obj           metadata.ObjectRef
	body          []byte
}

func newEnv(t *testing.T, inj faults.Injector, opts ...faults.Option) *env {
	t.Helper()
	ctx := t.Context()
	local, peer := memtest.Stores(t)
	l, err := memstore.NewLog(2, memstore.WithMaxPollWait(time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	e := &env{
		store: local, peer: peer, log: l, local: memstore.NewLocalLog(),
		body: bytes.Repeat([]byte("0123456789"), 10),
	}
	e.fstore = faults.WrapStore(e.store, inj, opts...)
	e.fpeer = faults.WrapStore(e.peer, inj, opts...)
	e.flog = faults.WrapLog(e.log, inj, opts...)
	e.flocal = faults.WrapLocal(e.local, inj, opts...)
	e.obj, err = e.store.Put(ctx, "obj", e.body)
	require.NoError(t, err)
	for _, v := range []string{"rec-a", "rec-b", "rec-c"} {
		_, err := e.log.Append(ctx, 0, []byte(v))
		require.NoError(t, err)
	}
	require.NoError(t, e.local.Append(ctx, tp, []storage.Batch{batch(1, 0, 9), batch(1, 10, 19)}))
	return e
}

func batch(epoch int32, first, last int64) storage.Batch {
	return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: bytes.Repeat([]byte{byte(first)}, 32)}
}

// opCase is one operation: call makes it on e's wrapped dependencies
// and returns what it read (for the reads, concatenated); applied, for
// an operation that changes something, reports whether it took effect.
type opCase struct {
	call    func(ctx context.Context, e *env) ([]byte, error)
	applied func(t *testing.T, e *env) bool
}

func concat[T any](xs []T, f func(T) []byte) []byte {
	var b []byte
	for _, x := range xs {
		b = append(b, f(x)...)
	}
	return b
}

var opCases = map[faults.Op]opCase{
	faults.OpPut: {
		call: func(ctx context.Context, e *env) ([]byte, error) {
			_, err := e.fstore.Put(ctx, "new", []byte("new object"))
			return nil, err
		},
		applied: func(t *testing.T, e *env) bool {
			_, err := e.store.GetRange(t.Context(), metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: "new"}, 0, 1)
			return err == nil
		},
	},
	faults.OpGetRange: {call: func(ctx context.Context, e *env) ([]byte, error) {
		return e.fpeer.GetRange(ctx, e.obj, 10, 50)
	}},
	faults.OpReadRange: {call: func(ctx context.Context, e *env) ([]byte, error) {
		dst := make([]byte, 50)
		n, err := e.fpeer.(storage.RangeReader).ReadRange(ctx, e.obj, 10, dst)
		return dst[:n], err
	}},
	faults.OpDelete: {
		call: func(ctx context.Context, e *env) ([]byte, error) {
			return nil, e.fpeer.Delete(ctx, []metadata.ObjectRef{e.obj})
		},
		applied: func(t *testing.T, e *env) bool {
			_, err := e.store.GetRange(t.Context(), e.obj, 0, 1)
			return errors.Is(err, storage.ErrNotFound)
		},
	},
	faults.OpList: {call: func(ctx context.Context, e *env) ([]byte, error) {
		_, err := e.fpeer.List(ctx, "b1", "")
		return nil, err
	}},
	faults.OpLogAppend: {
		call: func(ctx context.Context, e *env) ([]byte, error) {
			_, err := e.flog.Append(ctx, 0, []byte("rec-d"))
			return nil, err
		},
		applied: func(t *testing.T, e *env) bool {
			_, high, err := e.log.Watermarks(t.Context(), 0)
			require.NoError(t, err)
			return high == 4
		},
	},
	faults.OpLogRead: {call: func(ctx context.Context, e *env) ([]byte, error) {
		recs, err := e.flog.Read(ctx, 0, 0, 10)
		return concat(recs, func(r metadata.Record) []byte { return r.Value }), err
	}},
	faults.OpLogWatermarks: {call: func(ctx context.Context, e *env) ([]byte, error) {
		_, _, err := e.flog.Watermarks(ctx, 0)
		return nil, err
	}},
	faults.OpLogTrim: {
		call: func(ctx context.Context, e *env) ([]byte, error) { return nil, e.flog.Trim(ctx, 0, 2) },
		applied: func(t *testing.T, e *env) bool {
			low, _, err := e.log.Watermarks(t.Context(), 0)
			require.NoError(t, err)
			return low == 2
		},
	},
	faults.OpLocalEndOffset: {call: func(_ context.Context, e *env) ([]byte, error) {
		_, err := e.flocal.EndOffset(tp)
		return nil, err
	}},
	faults.OpLocalEpochs: {call: func(_ context.Context, e *env) ([]byte, error) {
		_, err := e.flocal.Epochs(tp)
		return nil, err
	}},
	faults.OpLocalAppend: {
		call: func(ctx context.Context, e *env) ([]byte, error) {
			return nil, e.flocal.Append(ctx, tp, []storage.Batch{batch(1, 20, 29)})
		},
		applied: func(t *testing.T, e *env) bool { return localEnd(t, e) == 30 },
	},
	faults.OpLocalTruncate: {
		call:    func(ctx context.Context, e *env) ([]byte, error) { return nil, e.flocal.Truncate(ctx, tp, 10) },
		applied: func(t *testing.T, e *env) bool { return localEnd(t, e) == 10 },
	},
	faults.OpLocalRead: {call: func(ctx context.Context, e *env) ([]byte, error) {
		batches, err := e.flocal.Read(ctx, tp, 0, 1<<20)
		return concat(batches, func(b storage.Batch) []byte { return b.Data }), err
	}},
}

func localEnd(t *testing.T, e *env) int64 {
	end, err := e.local.EndOffset(tp)
	require.NoError(t, err)
	return end
}

// TestEveryOp puts every operation of every wrapper through each kind of
// effect, injected for that operation only.
func TestEveryOp(t *testing.T) {
	require.Len(t, opCases, len(faults.Ops()), "a case for every Op")
	errInjected := errors.New("injected")
	for _, op := range faults.Ops() {
		c := opCases[op]
		only := func(inj faults.Injector) faults.Injector { return faults.On(faults.IsOp(op), inj) }
		t.Run(op.String(), func(t *testing.T) {
			// Faults of the other operations leave this one alone.
			others := faults.On(func(r faults.Request) bool { return r.Op != op }, faults.Fail(errInjected))
			e := newEnv(t, others)
			clean, err := c.call(t.Context(), e)
			require.NoError(t, err, "a fault of another operation")
			if c.applied != nil {
				require.True(t, c.applied(t, e), "the operation took effect")
			}

			e = newEnv(t, only(faults.Fail(errInjected)))
			_, err = c.call(t.Context(), e)
			require.ErrorIs(t, err, errInjected)
			var fe *faults.Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, op, fe.Request.Op)
			assert.False(t, fe.AfterApply)
			assert.ErrorContains(t, err, op.String(), "the message names the operation")
			if c.applied != nil {
				assert.False(t, c.applied(t, e), "failed before it ran")
			}

			e = newEnv(t, only(faults.FailAfter(errInjected)))
			_, err = c.call(t.Context(), e)
			require.ErrorIs(t, err, errInjected)
			require.ErrorAs(t, err, &fe)
			assert.True(t, fe.AfterApply)
			assert.ErrorContains(t, err, "after it took effect")
			if c.applied != nil {
				assert.True(t, c.applied(t, e), "failed after it ran")
			}

			var waited []time.Duration
			e = newEnv(t, only(faults.Delay(3*time.Second)), faults.WithWait(func(_ context.Context, d time.Duration) error {
				waited = append(waited, d)
				return nil
			}))
			_, err = c.call(t.Context(), e)
			require.NoError(t, err)
			assert.Equal(t, []time.Duration{3 * time.Second}, waited, "the delay, served by WithWait")

			e = newEnv(t, only(faults.Corrupt(7)))
			got, err := c.call(t.Context(), e)
			require.NoError(t, err)
			if !op.Reads() {
				return
			}
			require.Equal(t, len(clean), len(got))
			assert.Equal(t, 1, diff(clean, got), "one byte changed")
			again, err := newEnvReads(t, e, c)
			require.NoError(t, err)
			assert.Equal(t, clean, again, "the dependency's own bytes are unchanged")
		})
	}
}

// newEnvReads repeats c's read on e's dependencies, bare.
func newEnvReads(t *testing.T, e *env, c opCase) ([]byte, error) {
	bare := *e
	bare.fstore, bare.fpeer, bare.flog, bare.flocal = e.store, e.peer, e.log, e.local
	return c.call(t.Context(), &bare)
}

func diff(a, b []byte) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// A delay is cut short by the operation's context.
func TestDelayCancelled(t *testing.T) {
	e := newEnv(t, faults.Delay(time.Hour))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := e.fpeer.GetRange(ctx, e.obj, 0, 1)
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "GetRange")
}

// A corrupted GetRange changes its own copy: the store's slice, which a
// store may share with nothing but the caller, is left as it was.
func TestCorruptGetRangeCopies(t *testing.T) {
	returned := bytes.Repeat([]byte{'x'}, 64)
	s := faults.WrapStore(fixedStore{returned}, faults.Corrupt(1))
	got, err := s.GetRange(t.Context(), metadata.ObjectRef{Bucket: "b", Key: "k"}, 0, 64)
	require.NoError(t, err)
	assert.Equal(t, 1, diff(returned, got))
	assert.Equal(t, bytes.Repeat([]byte{'x'}, 64), returned)
	_, ok := s.(storage.RangeReader)
	assert.False(t, ok, "a store that is no RangeReader is not made one")
}

// fixedStore returns b for every GetRange.
type fixedStore struct{ b []byte }

func (fixedStore) Local() metadata.ObjectRef { return metadata.ObjectRef{AZ: "az", Bucket: "b"} }
func (fixedStore) Put(context.Context, string, []byte) (metadata.ObjectRef, error) {
	return metadata.ObjectRef{}, nil
}
func (s fixedStore) GetRange(context.Context, metadata.ObjectRef, int64, int64) ([]byte, error) {
	return s.b, nil
}
func (fixedStore) Delete(context.Context, []metadata.ObjectRef) error { return nil }
func (fixedStore) List(context.Context, string, string) ([]storage.ObjectInfo, error) {
	return nil, nil
}

// With no fault, the wrappers keep their dependencies' contracts, and
// WrapStore the optional interfaces of the store it wraps.
func TestStoreConformance(t *testing.T) {
	storagetest.RunWrapper(t, memtest.Harness(), func(s storage.ObjectStore) storage.ObjectStore {
		return faults.WrapStore(s, &faults.Set{})
	}, storagetest.ManyKeys(50))
}

func TestLogConformance(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T, partitions int32) metadata.Log {
		l, err := memstore.NewLog(partitions, memstore.WithMaxPollWait(20*time.Millisecond))
		require.NoError(t, err)
		return faults.WrapLog(l, &faults.Set{})
	})
}

func TestLocalConformance(t *testing.T) {
	storagetest.RunLocalLog(t, storagetest.LocalLogHarness{
		New: func(context.Context, *testing.T) storage.LocalLog {
			return faults.WrapLocal(memstore.NewLocalLog(), &faults.Set{})
		},
		InMemoryOnly: true,
	})
}
