package walstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// CollectGarbage and Sweep hand their deletes to Run, as the periodic
// collection does: these tests make the calls before Run, while it runs,
// after it returned, with contexts that end, and with a store whose
// Delete fails or hangs. The periodic collection is an hour apart, so
// every delete here is a call's.

// gcStore is a store whose Deletes can be made to fail once or to wait
// for release, through the tree's fault wrapper; it counts the objects
// whose Delete it let through.
type gcStore struct {
	storage.ObjectStore
	*gcFaults
}

type gcFaults struct {
	failOnce atomic.Bool
	hold     atomic.Bool
	release  chan struct{} // closed to let held Deletes go on
	deleted  atomic.Int64
}

func newGCStore(s storage.ObjectStore) *gcStore {
	f := &gcFaults{release: make(chan struct{})}
	return &gcStore{ObjectStore: faults.WrapStore(s, f), gcFaults: f}
}

func (f *gcFaults) Inject(ctx context.Context, req faults.Request) faults.Effect {
	if req.Op != faults.OpDelete {
		return faults.Effect{}
	}
	if f.failOnce.CompareAndSwap(true, false) {
		return faults.Effect{Err: errInjected}
	}
	if f.hold.Load() {
		select {
		case <-f.release:
		case <-ctx.Done():
			return faults.Effect{Err: ctx.Err()}
		}
	}
	f.deleted.Add(int64(len(req.Refs)))
	return faults.Effect{}
}

// gcNode is broker 1's Node over a gcStore, in a world of its own, that
// has not started Run: run starts it, and stop ends it and waits for Run
// to return.
type gcNode struct {
	*walstore.Node
	local *memstore.LocalLog
	stop  func()
}

// newGCNode builds broker 1's node over a store whose Deletes the test
// fails and holds through gcFaults.
func newGCNode(t *testing.T) (*gcNode, *gcStore) {
	t.Helper()
	w := newWorld(t)
	store := newGCStore(w.store(1))
	return newGCNodeOn(t, w, store), store
}

// newGCNodeOn builds broker 1's node over store, collecting garbage only
// when called (GCInterval is an hour).
func newGCNodeOn(t *testing.T, w *world, store storage.ObjectStore) *gcNode {
	t.Helper()
	local := memstore.NewLocalLog()
	n, err := walstore.NewNode(walstore.NodeConfig{BrokerID: 1, Store: store, Log: w.meta, Local: local,
		Logger: discard(), Interval: 10 * time.Millisecond, GCInterval: time.Hour})
	require.NoError(t, err)
	g := &gcNode{Node: n, local: local, stop: func() {}}
	t.Cleanup(func() { g.stop() })
	return g
}

func (g *gcNode) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	var once sync.Once
	g.stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done, "Run")
		})
	}
}

// garbage makes n objects that are garbage at once: tpA's, led without
// followers. Run must be running.
func (g *gcNode) garbage(t *testing.T, n int) {
	t.Helper()
	require.NoError(t, g.local.AssignEpoch(tpA, 1, 0))
	require.NoError(t, g.BecomeLeader(t.Context(), tpA, 1, nil, -1))
	for i := range int64(n) {
		produce(t, g.Node, g.local, tpA, 1, 10*i, 10*i+9)
		settle(time.Second) // each batch its own object
	}
	require.NoError(t, g.WaitDurable(t.Context(), tpA, 1, 10*int64(n)-1))
}

// orphan stores an object under broker 1's prefix that nobody tracks.
func orphan(t *testing.T, store storage.ObjectStore, key string) {
	t.Helper()
	_, err := store.Put(t.Context(), "1/"+key, []byte("nobody tracks it"))
	require.NoError(t, err)
}

func listed(t *testing.T, store storage.ObjectStore) int {
	t.Helper()
	infos, err := store.List(context.Background(), "bucket-az1", "")
	require.NoError(t, err)
	return len(infos)
}

// Calls made before Run wait for it: Run performs their deletes when it
// starts. A call whose context ends first returns its context's error and
// deletes nothing.
func TestGCCallsBeforeRunWaitForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, store := newGCNode(t)
		orphan(t, store, "a.wal")
		time.Sleep(time.Hour)

		_, err := g.CollectGarbage(within(t, time.Second))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		_, err = g.Sweep(within(t, time.Second), time.Minute)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 1, listed(t, store), "a call given up on before Run deletes nothing")

		type result struct {
			n   int
			err error
		}
		collected, swept := make(chan result, 1), make(chan result, 1)
		go func() { n, err := g.CollectGarbage(t.Context()); collected <- result{n, err} }()
		go func() { n, err := g.Sweep(t.Context(), time.Minute); swept <- result{n, err} }()
		synctest.Wait()
		require.Empty(t, collected, "CollectGarbage returned before Run")
		require.Empty(t, swept, "Sweep returned before Run")

		g.run(t)
		c, s := <-collected, <-swept
		require.NoError(t, c.err)
		require.NoError(t, s.err)
		assert.Zero(t, c.n, "nothing is tracked")
		assert.Equal(t, 1, s.n, "the orphan")
		assert.Zero(t, listed(t, store))
		assert.Zero(t, g.Stats().Leader.ObjectsDeleted, "swept objects are not collected ones")
	})
}

// While Run runs, the calls delete what they find and say how much; once
// it has returned they fail with ErrStopped and delete nothing.
func TestGCCallsDuringAndAfterRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, store := newGCNode(t)
		g.run(t)
		g.garbage(t, 2)
		objects := listed(t, store)
		require.Equal(t, 2, objects)

		n, err := g.CollectGarbage(t.Context())
		require.NoError(t, err)
		assert.Equal(t, objects, n)
		assert.Equal(t, uint64(objects), g.Stats().Leader.ObjectsDeleted)
		n, err = g.CollectGarbage(t.Context())
		require.NoError(t, err)
		assert.Zero(t, n, "collecting again is a no-op")

		orphan(t, store, "a.wal")
		time.Sleep(time.Hour)
		n, err = g.Sweep(t.Context(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 1, n)

		orphan(t, store, "b.wal")
		time.Sleep(time.Hour)
		g.stop()
		_, err = g.CollectGarbage(t.Context())
		require.ErrorIs(t, err, walstore.ErrStopped)
		_, err = g.Sweep(t.Context(), time.Minute)
		require.ErrorIs(t, err, walstore.ErrStopped)
		assert.Equal(t, 1, listed(t, store), "nothing is deleted once Run has returned")
	})
}

// A call whose context ends while its delete is under way returns the
// context's error; the delete is Run's, and goes on: its objects are
// deleted and forgotten once the store answers. A call that waits for
// its delete when Run returns fails with ErrStopped.
func TestGCCallContextEndsWhileItsDeleteIsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, store := newGCNode(t)
		g.run(t)
		g.garbage(t, 1)
		store.hold.Store(true)

		ctx, cancel := context.WithCancel(t.Context())
		collected := make(chan error, 1)
		go func() { _, err := g.CollectGarbage(ctx); collected <- err }()
		synctest.Wait()
		require.Empty(t, collected, "the delete is held")
		cancel()
		require.ErrorIs(t, <-collected, context.Canceled)

		store.hold.Store(false)
		close(store.release)
		synctest.Wait()
		assert.Equal(t, int64(1), store.deleted.Load(), "the delete went on")
		assert.Zero(t, listed(t, store))
		assert.Equal(t, uint64(1), g.Stats().Leader.ObjectsDeleted)
		n, err := g.CollectGarbage(t.Context())
		require.NoError(t, err)
		assert.Zero(t, n, "the object is forgotten")

		// Run returns while a Sweep's delete is held.
		store.hold.Store(true)
		store.release = make(chan struct{})
		orphan(t, store, "a.wal")
		time.Sleep(time.Hour)
		swept := make(chan error, 1)
		go func() { _, err := g.Sweep(t.Context(), time.Minute); swept <- err }()
		synctest.Wait()
		require.Empty(t, swept, "the delete is held")
		g.stop()
		require.ErrorIs(t, <-swept, walstore.ErrStopped)
	})
}

// A Delete that fails fails the call with a *DependencyError naming
// ObjectStore.Delete; the objects stay tracked, and the next call
// deletes them.
func TestGCCallDeleteFailsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, store := newGCNode(t)
		g.run(t)
		g.garbage(t, 1)

		store.failOnce.Store(true)
		n, err := g.CollectGarbage(t.Context())
		requireDependencyError(t, err, "ObjectStore.Delete", errInjected)
		assert.Zero(t, n)
		assert.Equal(t, 1, listed(t, store))
		n, err = g.CollectGarbage(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 1, n, "still tracked, deleted again")

		orphan(t, store, "a.wal")
		time.Sleep(time.Hour)
		store.failOnce.Store(true)
		n, err = g.Sweep(t.Context(), time.Minute)
		requireDependencyError(t, err, "ObjectStore.Delete", errInjected)
		assert.Zero(t, n)
		n, err = g.Sweep(t.Context(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.Zero(t, listed(t, store))
	})
}

// Calls made at once, of both kinds, each end without error, and together
// delete everything there is to delete.
func TestGCCallsConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, store := newGCNode(t)
		g.run(t)
		g.garbage(t, 3)
		for _, key := range []string{"a.wal", "b.wal"} {
			orphan(t, store, key)
		}
		time.Sleep(time.Hour)

		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 4 {
			wg.Go(func() {
				_, err := g.CollectGarbage(t.Context())
				errs <- err
			})
			wg.Go(func() {
				_, err := g.Sweep(t.Context(), time.Minute)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		assert.Zero(t, listed(t, store))
		assert.GreaterOrEqual(t, g.Stats().Leader.ObjectsDeleted, uint64(3))
	})
}
