package walstore_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// Dependencies that fail or break their contract, for one partition
// (tpA) while on is set. Each hook gets the real answer and returns the
// one to give.

var errInjected = errors.New("injected failure")

type badLocal struct {
	*memstore.LocalLog
	on        *atomic.Bool
	endOffset func(int64, error) (int64, error)
	epochs    func([]storage.EpochEntry, error) ([]storage.EpochEntry, error)
	append    func() (skip bool, err error)
	truncate  func() (skip bool, err error)
	read      func([]storage.Batch, error) ([]storage.Batch, error)
}

func (l *badLocal) active(tp metadata.TopicPartition) bool { return tp == tpA && l.on.Load() }

func (l *badLocal) EndOffset(tp metadata.TopicPartition) (int64, error) {
	end, err := l.LocalLog.EndOffset(tp)
	if l.active(tp) && l.endOffset != nil {
		return l.endOffset(end, err)
	}
	return end, err
}

func (l *badLocal) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	es, err := l.LocalLog.Epochs(tp)
	if l.active(tp) && l.epochs != nil {
		return l.epochs(es, err)
	}
	return es, err
}

func (l *badLocal) Append(ctx context.Context, tp metadata.TopicPartition, bs []storage.Batch) error {
	if l.active(tp) && l.append != nil {
		if skip, err := l.append(); skip || err != nil {
			return err
		}
	}
	return l.LocalLog.Append(ctx, tp, bs)
}

func (l *badLocal) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	if l.active(tp) && l.truncate != nil {
		if skip, err := l.truncate(); skip || err != nil {
			return err
		}
	}
	return l.LocalLog.Truncate(ctx, tp, offset)
}

func (l *badLocal) Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	bs, err := l.LocalLog.Read(ctx, tp, from, maxBytes)
	if l.active(tp) && l.read != nil {
		return l.read(bs, err)
	}
	return bs, err
}

type badStore struct {
	storage.ObjectStore
	on       *atomic.Bool
	put      func(metadata.ObjectRef, error) (metadata.ObjectRef, error)
	getRange func([]byte, error) ([]byte, error)
	del      func(error) error
	list     func([]storage.ObjectInfo, error) ([]storage.ObjectInfo, error)
}

func (s *badStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	if s.on.Load() && s.put != nil {
		return s.put(metadata.ObjectRef{}, errInjected)
	}
	return s.ObjectStore.Put(ctx, key, body)
}

func (s *badStore) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	b, err := s.ObjectStore.GetRange(ctx, ref, offset, length)
	if s.on.Load() && s.getRange != nil {
		return s.getRange(b, err)
	}
	return b, err
}

func (s *badStore) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	if s.on.Load() && s.del != nil {
		return s.del(nil)
	}
	return s.ObjectStore.Delete(ctx, refs)
}

func (s *badStore) List(ctx context.Context, bucket, prefix string) ([]storage.ObjectInfo, error) {
	infos, err := s.ObjectStore.List(ctx, bucket, prefix)
	if s.on.Load() && s.list != nil {
		return s.list(infos, err)
	}
	return infos, err
}

type badLog struct {
	metadata.Log
	on         *atomic.Bool
	partitions func() int32
	append     func(int64, error) (int64, error)
	read       func([]metadata.Record, error) ([]metadata.Record, error)
	watermarks func(int64, int64, error) (int64, int64, error)
}

func (l *badLog) Partitions() int32 {
	if l.partitions != nil {
		return l.partitions()
	}
	return l.Log.Partitions()
}

func (l *badLog) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	off, err := l.Log.Append(ctx, partition, value)
	if l.on.Load() && l.append != nil {
		return l.append(off, err)
	}
	return off, err
}

func (l *badLog) Read(ctx context.Context, partition int32, from int64, max int) ([]metadata.Record, error) {
	recs, err := l.Log.Read(ctx, partition, from, max)
	if l.on.Load() && l.read != nil {
		return l.read(recs, err)
	}
	return recs, err
}

func (l *badLog) Watermarks(ctx context.Context, partition int32) (int64, int64, error) {
	lo, hi, err := l.Log.Watermarks(ctx, partition)
	if l.on.Load() && l.watermarks != nil {
		return l.watermarks(lo, hi, err)
	}
	return lo, hi, err
}

func fail[T any](T, error) (T, error) { var zero T; return zero, errInjected }

// A follower whose dependencies misbehave for one partition keeps
// replicating the others, never stops, never appends a wrong byte, and
// converges once the dependency behaves again. Partition A is set up so
// that following it needs a truncation (broker 2 has epoch 1's 10-19,
// which epoch 2 replaced) and a bootstrap from republished entries.
func TestFollowerSurvivesMisbehavingDependencies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local func(*badLocal)
		store func(*badStore)
		log   func(*badLog)
		// republish: what the follower was given while the fault lasted
		// is lost to it (an undecodable message, an entry given up), so
		// the leader republishes, as a broker does for a lagging replica.
		republish bool
	}{
		{name: "EndOffset fails", local: func(l *badLocal) { l.endOffset = fail[int64] }},
		{name: "EndOffset negative", local: func(l *badLocal) { l.endOffset = func(int64, error) (int64, error) { return -7, nil } }},
		{name: "EndOffset past the log", local: func(l *badLocal) { l.endOffset = func(e int64, err error) (int64, error) { return e + 1000, err } }},
		{name: "Epochs fails", local: func(l *badLocal) { l.epochs = fail[[]storage.EpochEntry] }},
		{name: "Epochs not ascending", local: func(l *badLocal) {
			l.epochs = func([]storage.EpochEntry, error) ([]storage.EpochEntry, error) {
				return []storage.EpochEntry{{Epoch: 2, StartOffset: 0}, {Epoch: 1, StartOffset: 5}}, nil
			}
		}},
		{name: "Epochs past the end", local: func(l *badLocal) {
			l.epochs = func(es []storage.EpochEntry, err error) ([]storage.EpochEntry, error) {
				return append(slices.Clone(es), storage.EpochEntry{Epoch: 9, StartOffset: 1 << 40}), err
			}
		}},
		{name: "Append fails", local: func(l *badLocal) { l.append = func() (bool, error) { return false, errInjected } }},
		{name: "Append does not append", local: func(l *badLocal) { l.append = func() (bool, error) { return true, nil } }},
		{name: "Truncate fails", local: func(l *badLocal) { l.truncate = func() (bool, error) { return false, errInjected } }},
		{name: "Truncate does not truncate", local: func(l *badLocal) { l.truncate = func() (bool, error) { return true, nil } }},
		{name: "Read fails", local: func(l *badLocal) { l.read = fail[[]storage.Batch] }},
		{name: "Read returns a batch that is not there", local: func(l *badLocal) {
			l.read = func([]storage.Batch, error) ([]storage.Batch, error) {
				return []storage.Batch{{Epoch: 1, FirstOffset: 3, LastOffset: 1 << 40, Data: []byte("x")}}, nil
			}
		}},
		{name: "GetRange fails", store: func(s *badStore) { s.getRange = fail[[]byte] }},
		{name: "metadata Read fails", log: func(l *badLog) { l.read = fail[[]metadata.Record] }},
		{name: "metadata Read out of order", log: func(l *badLog) {
			l.read = func(recs []metadata.Record, err error) ([]metadata.Record, error) {
				slices.Reverse(recs)
				return recs, err
			}
		}},
		{name: "metadata Read below the cursor", log: func(l *badLog) {
			l.read = func(recs []metadata.Record, err error) ([]metadata.Record, error) {
				for i := range recs {
					recs[i].Offset -= 100
				}
				return recs, err
			}
		}},
		{name: "metadata Read undecodable", republish: true, log: func(l *badLog) {
			l.read = func(recs []metadata.Record, err error) ([]metadata.Record, error) {
				for i := range recs {
					recs[i].Value = []byte("garbage")
				}
				return recs, err
			}
		}},
		{name: "metadata Watermarks fails", log: func(l *badLog) {
			l.watermarks = func(int64, int64, error) (int64, int64, error) { return 0, 0, errInjected }
		}},
		{name: "metadata Watermarks negative", log: func(l *badLog) { l.watermarks = func(int64, int64, error) (int64, int64, error) { return -5, -1, nil } }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				var on atomic.Bool
				log1 := memstore.NewLocalLog()
				local := &badLocal{LocalLog: memstore.NewLocalLog(), on: &on}
				store := &badStore{ObjectStore: w.store(2), on: &on}
				mlog := &badLog{Log: w.meta, on: &on}
				if tc.local != nil {
					tc.local(local)
				}
				if tc.store != nil {
					tc.store(store)
				}
				if tc.log != nil {
					tc.log(mlog)
				}
				// Broker 1 has A's e1 0-9 and leads epoch 2 from 10,
				// republishing from 0; broker 2 has e1 0-19.
				require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
				require.NoError(t, log1.Append(ctx, tpA, []storage.Batch{clustertest.MakeBatch(tpA, 1, 0, 9)}))
				require.NoError(t, log1.AssignEpoch(tpA, 2, 10))
				require.NoError(t, local.LocalLog.Append(ctx, tpA, []storage.Batch{
					clustertest.MakeBatch(tpA, 1, 0, 9), clustertest.MakeBatch(tpA, 1, 10, 19)}))
				require.NoError(t, log1.AssignEpoch(tpB, 1, 0))

				on.Store(true)
				n1 := w.start(1, walstore.NodeConfig{Local: log1})
				n2 := w.start(2, walstore.NodeConfig{Local: local, Store: store, Log: mlog})
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 2, []int32{2}, 0))
				require.NoError(t, n1.BecomeLeader(ctx, tpB, 1, []int32{2}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 2, 1))
				require.NoError(t, n2.BecomeFollower(ctx, tpB, 1, 1))
				produce(t, n1, log1, tpA, 2, 10, 19)
				produce(t, n1, log1, tpB, 1, 0, 9)
				settle(time.Minute)
				if tc.local != nil { // only the local log's faults are A's alone
					requireSameLog(t, log1, local.LocalLog, tpB)
				}
				// Whatever A's log holds is a prefix of the truth: broker
				// 1's log, or broker 2's own before truncation.
				for _, b := range local.LocalLog.Batches(tpA) {
					if b.FirstOffset >= 10 && b.Epoch == 1 {
						continue // not yet truncated
					}
					assert.Contains(t, log1.Batches(tpA), b)
				}

				on.Store(false)
				if tc.republish {
					require.NoError(t, n1.Republish(ctx, tpA, 0))
				}
				produce(t, n1, log1, tpA, 2, 20, 29)
				produce(t, n1, log1, tpB, 1, 10, 19)
				settle(time.Minute)
				requireSameLog(t, log1, local.LocalLog, tpA)
				requireSameLog(t, log1, local.LocalLog, tpB)
			})
		})
	}
}

// requireDependencyError checks err names dependency and, if is is set,
// matches it.
func requireDependencyError(t *testing.T, err error, dependency string, is error) {
	t.Helper()
	var de *walstore.DependencyError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, dependency, de.Dependency)
	if is != nil {
		assert.ErrorIs(t, err, is)
	}
}

// A leader whose local log misbehaves for one partition says so with a
// typed error naming the call, from the transition or the Republish that
// met it, and keeps replicating the others.
func TestLeaderReportsAMisbehavingLocalLog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local func(*badLocal)
		// republish: the error comes from Republish; otherwise from
		// BecomeLeader.
		republish  bool
		dependency string
		is         error
	}{
		{"EndOffset fails", func(l *badLocal) { l.endOffset = fail[int64] }, false, "LocalLog.EndOffset", errInjected},
		{"EndOffset negative", func(l *badLocal) {
			l.endOffset = func(int64, error) (int64, error) { return -1, nil }
		}, false, "LocalLog.EndOffset", walstore.ErrContractViolation},
		{"Read fails", func(l *badLocal) { l.read = fail[[]storage.Batch] }, true, "LocalLog.Read", errInjected},
		{"Read returns nothing below the end", func(l *badLocal) {
			l.read = func([]storage.Batch, error) ([]storage.Batch, error) { return nil, nil }
		}, true, "LocalLog.Read", walstore.ErrContractViolation},
		{"Read returns batches that do not continue", func(l *badLocal) {
			l.read = func(bs []storage.Batch, err error) ([]storage.Batch, error) {
				return []storage.Batch{clustertest.MakeBatch(tpA, 1, 0, 9), clustertest.MakeBatch(tpA, 1, 12, 19)}, err
			}
		}, true, "LocalLog.Read", walstore.ErrContractViolation},
		{"Read returns batches below from", func(l *badLocal) {
			l.read = func([]storage.Batch, error) ([]storage.Batch, error) {
				return []storage.Batch{clustertest.MakeBatch(tpA, 1, -10, -1)}, nil
			}
		}, true, "LocalLog.Read", walstore.ErrContractViolation},
		{"Read returns an invalid batch", func(l *badLocal) {
			l.read = func([]storage.Batch, error) ([]storage.Batch, error) {
				return []storage.Batch{{Epoch: -1, FirstOffset: 0, LastOffset: 9}}, nil
			}
		}, true, "LocalLog.Read", walstore.ErrContractViolation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				var on atomic.Bool
				local := &badLocal{LocalLog: memstore.NewLocalLog(), on: &on}
				tc.local(local)
				log2 := memstore.NewLocalLog()
				for _, tp := range []metadata.TopicPartition{tpA, tpB} {
					require.NoError(t, local.AssignEpoch(tp, 1, 0))
					require.NoError(t, local.LocalLog.Append(ctx, tp, []storage.Batch{
						clustertest.MakeBatch(tp, 1, 0, 9), clustertest.MakeBatch(tp, 1, 10, 19)}))
				}
				n1 := w.start(1, walstore.NodeConfig{Local: local})
				n2 := w.start(2, walstore.NodeConfig{Local: log2})
				require.NoError(t, n1.BecomeLeader(ctx, tpB, 1, []int32{2}, 0))
				require.NoError(t, n2.BecomeFollower(ctx, tpB, 1, 1))

				on.Store(true)
				err := n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1)
				if tc.republish {
					require.NoError(t, err)
					err = n1.Republish(ctx, tpA, 0)
				}
				requireDependencyError(t, err, tc.dependency, tc.is)

				produce(t, n1, local.LocalLog, tpB, 1, 20, 29)
				require.NoError(t, n1.WaitDurable(ctx, tpB, 1, 29))
				settle(time.Minute)
				requireSameLog(t, local.LocalLog, log2, tpB)
			})
		})
	}
}

// A leader whose metadata log or store misbehaves retries and degrades,
// with a health error naming the call; what it could not do is done once
// the dependency behaves. Garbage collection returns the failed call.
func TestLeaderSurvivesAMisbehavingStoreOrMetadataLog(t *testing.T) {
	for _, tc := range []struct {
		name       string
		store      func(*badStore)
		log        func(*badLog)
		dependency string // named by the health error, if set
		is         error
	}{
		{name: "metadata Append fails", log: func(l *badLog) { l.append = fail[int64] }, dependency: "metadata.Log.Append", is: errInjected},
		{name: "metadata Append returns a negative offset", log: func(l *badLog) {
			l.append = func(int64, error) (int64, error) { return -3, nil }
		}, dependency: "metadata.Log.Append", is: walstore.ErrContractViolation},
		{name: "Put fails with an untyped error", store: func(s *badStore) { s.put = fail[metadata.ObjectRef] }, dependency: "ObjectStore.Put", is: errInjected},
		{name: "Delete fails", store: func(s *badStore) { s.del = func(error) error { return errInjected } }},
		{name: "List fails", store: func(s *badStore) { s.list = fail[[]storage.ObjectInfo] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				var on atomic.Bool
				store := &badStore{ObjectStore: w.store(1), on: &on}
				mlog := &badLog{Log: w.meta, on: &on}
				if tc.store != nil {
					tc.store(store)
				}
				if tc.log != nil {
					tc.log(mlog)
				}
				log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
				n1 := w.start(1, walstore.NodeConfig{Local: log1, Store: store, Log: mlog, DegradedAfter: 5 * time.Second, GCInterval: time.Hour})
				n2 := w.start(2, walstore.NodeConfig{Local: log2})
				require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, nil, -1)) // no followers: objects are garbage at once
				require.NoError(t, n1.BecomeLeader(ctx, tpB, 1, []int32{2}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpB, 1, 1))
				produce(t, n1, log1, tpA, 1, 0, 9)
				require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 9))

				on.Store(true)
				produce(t, n1, log1, tpB, 1, 0, 9)
				settle(time.Minute)
				_, gcErr := n1.CollectGarbage(ctx)
				_, sweepErr := n1.Sweep(ctx, -time.Hour)
				switch {
				case tc.store != nil && store.del != nil:
					requireDependencyError(t, gcErr, "ObjectStore.Delete", errInjected)
				case tc.store != nil && store.list != nil:
					requireDependencyError(t, sweepErr, "ObjectStore.List", errInjected)
				default:
					require.True(t, n1.Health().Degraded)
					if tc.dependency != "" {
						requireDependencyError(t, n1.Health().Err, tc.dependency, tc.is)
					} else {
						assert.ErrorIs(t, n1.Health().Err, tc.is)
					}
				}

				on.Store(false)
				require.NoError(t, n1.WaitDurable(ctx, tpB, 1, 9))
				settle(time.Minute)
				assert.False(t, n1.Health().Degraded)
				requireSameLog(t, log1, log2, tpB)
				_, err := n1.CollectGarbage(ctx)
				require.NoError(t, err)
				_, err = n1.Sweep(ctx, -time.Hour)
				require.NoError(t, err)
			})
		})
	}
}

// A metadata log without partitions is refused when the Node is made.
func TestNodeRefusesAMetadataLogWithoutPartitions(t *testing.T) {
	for _, n := range []int32{0, -1, math.MinInt32} {
		w := newWorld(t)
		_, err := walstore.NewNode(walstore.NodeConfig{
			BrokerID: 1, Store: w.store(1), Log: &badLog{Log: w.meta, partitions: func() int32 { return n }}, Local: memstore.NewLocalLog(),
		})
		requireDependencyError(t, err, "metadata.Log.Partitions", walstore.ErrContractViolation)
	}
}
