package walstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// entriesDownLog refuses, while down, every message that names an
// object: the metadata log of a broker whose entries cannot be published
// (markers still go, so that a leadership's take-up is not what waits).
type entriesDownLog struct {
	metadata.Log
	down atomic.Bool
}

func (l *entriesDownLog) Append(ctx context.Context, p int32, v []byte) (int64, error) {
	if l.down.Load() {
		if m, err := metadata.DecodeMessage(v); err == nil && len(m.Entries) > 0 {
			return 0, errMetadataDown
		}
	}
	return l.Log.Append(ctx, p, v)
}

// landThenWaitStore stores the body of its first Put at once, then holds
// the Put's answer until release is closed: an upload whose object has
// landed while its attempt is still in flight. With hedge set, the first
// Put holds its object too, ignoring its context, so that its copy lands
// only when released, after the hedge stored its own: a hedge's loser.
type landThenWaitStore struct {
	storage.ObjectStore
	release chan struct{}
	once    sync.Once
	hedge   bool
	puts    atomic.Int64
}

// open releases the first Put; it may be called more than once.
func (s *landThenWaitStore) open() { s.once.Do(func() { close(s.release) }) }

func (s *landThenWaitStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	if s.puts.Add(1) != 1 {
		return s.ObjectStore.Put(ctx, key, body)
	}
	if s.hedge {
		<-s.release
		return s.ObjectStore.Put(context.Background(), key, body)
	}
	ref, err := s.ObjectStore.Put(ctx, key, body)
	<-s.release
	return ref, err
}

// Sweep never deletes an object a live leadership still means to publish:
// one stored while the metadata log refuses its entries, a republish copy
// waiting for its entries to be published, or one whose upload attempt
// has not reported it yet. Sweep once deleted them when they were older
// than its age; the entries, published once the log came back, named a
// missing object, WaitDurable acknowledged them, and followers stopped at
// the missing range. What no entry will ever name (a hedge's losing copy)
// is still swept.
func TestContractSweepSparesObjectsStillToBePublished(t *testing.T) {
	for _, tc := range []struct {
		name string
		// republish: broker 1 holds 0-19 and broker 2 starts empty, so
		// the leadership republishes; otherwise it produces 0-9.
		republish bool
		store     func(w *world) *landThenWaitStore // broker 1's, if not nil
		// entriesDown: the metadata log refuses entries while Sweep runs.
		entriesDown bool
		swept       int // objects Sweep deletes
	}{
		{name: "stored, entries refused by the metadata log", entriesDown: true},
		{name: "republish copy, entries refused by the metadata log", republish: true, entriesDown: true},
		{name: "stored, upload attempt not answered yet", store: func(w *world) *landThenWaitStore {
			return &landThenWaitStore{ObjectStore: w.store(1), release: make(chan struct{})}
		}},
		{name: "hedged upload, entries refused by the metadata log", entriesDown: true, swept: 1, store: func(w *world) *landThenWaitStore {
			return &landThenWaitStore{ObjectStore: w.store(1), release: make(chan struct{}), hedge: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
				meta := &entriesDownLog{Log: w.meta}
				cfg := walstore.NodeConfig{Local: log1, Log: meta}
				// Attempts outlast the sweep age.
				cfg.RequestTimeout = time.Hour
				var store *landThenWaitStore
				if tc.store != nil {
					store = tc.store(w)
					cfg.Store = store
					// Only the hedge case has a second attempt.
					cfg.UploadHedge.Disabled = !store.hedge
				}
				n1 := w.start(1, cfg)
				if store != nil {
					t.Cleanup(store.open) // before the Node stops (cleanups run last first), should the test fail
				}
				n2 := w.start(2, walstore.NodeConfig{Local: log2})
				meta.down.Store(tc.entriesDown)

				last, epoch := int64(9), int32(1)
				if tc.republish {
					seedLog(t, log1, tpA, 1, 20)
					last, epoch = 19, 2
					require.NoError(t, log1.AssignEpoch(tpA, epoch, 20))
					require.NoError(t, n1.BecomeLeader(ctx, tpA, epoch, []int32{2}, 0))
					require.NoError(t, n2.BecomeFollower(ctx, tpA, epoch, 1))
				} else {
					require.NoError(t, log1.AssignEpoch(tpA, epoch, 0))
					require.NoError(t, n1.BecomeLeader(ctx, tpA, epoch, []int32{2}, -1))
					require.NoError(t, n2.BecomeFollower(ctx, tpA, epoch, 1))
					produce(t, n1, log1, tpA, epoch, 0, last)
				}
				settle(time.Second)
				if store != nil && store.hedge {
					store.open() // the loser lands after the hedge won
				}
				settle(10 * time.Minute)
				require.Equal(t, 1+tc.swept, w.objectsIn(1), "objects stored")

				n, err := n1.Sweep(ctx, time.Minute)
				require.NoError(t, err)
				require.Equal(t, tc.swept, n, "objects swept")

				meta.down.Store(false)
				if store != nil && !store.hedge {
					store.open()
				}
				wctx, cancel := context.WithTimeout(ctx, time.Hour)
				defer cancel()
				require.NoError(t, n1.WaitReplicated(wctx, tpA, epoch, last))
				settle(time.Minute)
				requireSameLog(t, log1, log2, tpA)
			})
		})
	}
}
