package walstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// An adversary's look at CollectGarbage and Sweep handing their deletes to
// Run: calls raced against transitions and Run's end, a store whose Delete
// hangs, fails or breaks its contract, a List that answers outside the
// prefix, Run called twice or stopped before it started. Every call must
// return, with a documented error, and nothing a follower still needs may
// be deleted.

// requireGCCallError checks err is one a call may end with while Run
// stops or its ctx ends: none, ErrStopped, or ctx's.
func requireGCCallError(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil || errors.Is(err, walstore.ErrStopped) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	t.Fatalf("%s: undocumented error %v", what, err)
}

// Calls of both kinds, some given up on mid-way, raced against BecomeLeader,
// BecomeFollower and StopReplica and against Run's end, in many orders:
// every call returns with a documented error, and the bubble ends with no
// goroutine left (synctest fails a test whose goroutines stay blocked).
func TestAdversaryGCCallsRaceTransitionsAndStop(t *testing.T) {
	for stopAfter := range 6 {
		for cancelAfter := range 4 {
			t.Run(fmt.Sprintf("stop%d-cancel%d", stopAfter, cancelAfter), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					w := newWorld(t)
					store := faults.WrapStore(w.store(1), faults.Delay(3*time.Millisecond))
					g := newGCNodeOn(t, w, store)
					g.run(t)
					g.garbage(t, 2)
					orphan(t, store, "a.wal")
					time.Sleep(time.Hour)
					require.NoError(t, g.local.AssignEpoch(tpB, 1, 0))

					var wg sync.WaitGroup
					for i := range 6 {
						ctx, cancel := context.WithCancel(t.Context())
						defer cancel()
						if i%2 == 1 {
							wg.Go(func() {
								time.Sleep(time.Duration(cancelAfter) * time.Millisecond)
								cancel()
							})
						}
						wg.Go(func() {
							time.Sleep(time.Duration(i) * time.Millisecond)
							_, err := g.CollectGarbage(ctx)
							requireGCCallError(t, err, "CollectGarbage")
						})
						wg.Go(func() {
							time.Sleep(time.Duration(i) * time.Millisecond)
							_, err := g.Sweep(ctx, time.Minute)
							requireGCCallError(t, err, "Sweep")
						})
					}
					wg.Go(func() {
						// Transitions may fail once Run stops; only their
						// return matters here.
						_ = g.BecomeLeader(t.Context(), tpB, 1, nil, -1)
						_ = g.StopReplica(t.Context(), tpA)
						_ = g.BecomeFollower(within(t, time.Second), tpB, 2, 2)
					})
					wg.Go(func() {
						time.Sleep(time.Duration(stopAfter) * time.Millisecond)
						g.stop()
					})
					wg.Wait()

					_, err := g.CollectGarbage(t.Context())
					require.ErrorIs(t, err, walstore.ErrStopped)
					_, err = g.Sweep(t.Context(), time.Minute)
					require.ErrorIs(t, err, walstore.ErrStopped)
				})
			})
		}
	}
}

// A Delete that never answers (until its ctx ends) holds the calls that
// wait for it; when Run's ctx is cancelled Run returns, and so do they:
// with ctx's error for one given up on, ErrStopped for the others.
func TestAdversaryGCDeleteHangsThenRunStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var hang faults.Set
		store := faults.WrapStore(w.store(1), &hang)
		g := newGCNodeOn(t, w, store)
		orphan(t, store, "a.wal")
		time.Sleep(10 * time.Minute) // less than GCInterval: every delete is a call's
		g.run(t)
		g.garbage(t, 2)
		hang.Add(faults.On(faults.IsOp(faults.OpDelete), faults.Delay(1000*time.Hour)))

		collected, swept, givenUp := make(chan error, 1), make(chan error, 1), make(chan error, 1)
		ctx, cancel := context.WithCancel(t.Context())
		go func() { _, err := g.CollectGarbage(t.Context()); collected <- err }()
		go func() { _, err := g.Sweep(t.Context(), time.Minute); swept <- err }()
		go func() { _, err := g.CollectGarbage(ctx); givenUp <- err }()
		settle(time.Minute)
		require.Empty(t, collected, "the delete hangs")
		require.Empty(t, swept, "the delete hangs")
		cancel()
		require.ErrorIs(t, <-givenUp, context.Canceled)

		g.stop() // Run must return though the store does not answer
		require.ErrorIs(t, <-collected, walstore.ErrStopped)
		require.ErrorIs(t, <-swept, walstore.ErrStopped)
		assert.Equal(t, 3, listed(t, store), "no delete took effect")
	})
}

// Delete failing after it took effect: the call fails with a
// *DependencyError naming ObjectStore.Delete, the objects stay tracked,
// and the next call finishes the job without error.
func TestAdversaryGCDeleteLostAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var set faults.Set
		store := faults.WrapStore(w.store(1), &set)
		g := newGCNodeOn(t, w, store)
		orphan(t, store, "a.wal")
		time.Sleep(10 * time.Minute)
		g.run(t)
		g.garbage(t, 1)

		remove := set.Add(faults.On(faults.IsOp(faults.OpDelete), faults.FailAfter(storage.ErrUnavailable)))
		_, err := g.CollectGarbage(t.Context())
		requireDependencyError(t, err, "ObjectStore.Delete", nil)
		var fe *faults.Error
		require.ErrorAs(t, err, &fe, "the store's own error is kept")
		_, err = g.Sweep(t.Context(), time.Minute)
		requireDependencyError(t, err, "ObjectStore.Delete", nil)
		remove()

		n, err := g.CollectGarbage(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 1, n, "still tracked after the failed call")
		_, err = g.Sweep(t.Context(), time.Minute)
		require.NoError(t, err)
		assert.Zero(t, listed(t, store))
	})
}

// Delete answering storage.ErrNotFound, which the contract says a missing
// object is not: a missing object is gone, which is what the delete was
// for, so the call succeeds; and a batch so answered is deleted again one
// object at a time, so that the objects that were there still go.
func TestAdversaryGCDeleteNotFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var set faults.Set
		store := faults.WrapStore(w.store(1), &set)
		g := newGCNodeOn(t, w, store)
		g.run(t)
		g.garbage(t, 3)
		require.Equal(t, 3, listed(t, store))

		// Every delete answered ErrNotFound: the call ends, nothing is
		// tracked any more, though the store kept the objects.
		remove := set.Add(faults.On(faults.IsOp(faults.OpDelete), faults.Fail(storage.ErrNotFound)))
		n, err := g.CollectGarbage(t.Context())
		require.NoError(t, err, "a missing object is not an error")
		assert.Equal(t, 3, n)
		assert.Equal(t, 3, listed(t, store), "the store did not delete them")
		remove()

		// Sweep finds them untracked. Its batch is refused whole, each
		// object alone goes through.
		remove = set.Add(faults.On(func(r faults.Request) bool {
			return r.Op == faults.OpDelete && len(r.Refs) > 1
		}, faults.Fail(storage.ErrNotFound)))
		defer remove()
		time.Sleep(10 * time.Minute)
		n, err = g.Sweep(t.Context(), time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		assert.Zero(t, listed(t, store), "the objects that were there are deleted")
	})
}

// prefixBlindStore lists the whole bucket whatever the prefix: a store that
// breaks the List contract.
type prefixBlindStore struct{ storage.ObjectStore }

func (s prefixBlindStore) List(ctx context.Context, bucket, _ string) ([]storage.ObjectInfo, error) {
	return s.ObjectStore.List(ctx, bucket, "")
}

// A List that answers objects outside the prefix: they are left alone and
// Sweep says the store broke its contract. A List that fails fails Sweep
// with a *DependencyError naming ObjectStore.List, before Run as well as
// during it, and deletes nothing.
func TestAdversaryGCSweepListMisbehaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var set faults.Set
		inner := faults.WrapStore(w.store(1), &set)
		store := prefixBlindStore{inner}
		g := newGCNodeOn(t, w, store)
		orphan(t, store, "a.wal")
		_, err := store.Put(t.Context(), "2/theirs.wal", []byte("another broker's"))
		require.NoError(t, err)
		time.Sleep(time.Hour)

		remove := set.Add(faults.On(faults.IsOp(faults.OpList), faults.Fail(storage.ErrUnavailable)))
		_, err = g.Sweep(t.Context(), time.Minute) // before Run: the List is the call's own
		requireDependencyError(t, err, "ObjectStore.List", storage.ErrUnavailable)
		g.run(t)
		_, err = g.Sweep(t.Context(), time.Minute)
		requireDependencyError(t, err, "ObjectStore.List", storage.ErrUnavailable)
		remove()
		assert.Equal(t, 2, listed(t, inner), "a failed List deletes nothing")

		_, err = g.Sweep(t.Context(), time.Minute)
		require.ErrorIs(t, err, walstore.ErrContractViolation)
		infos, err := inner.List(t.Context(), "bucket-az1", "")
		require.NoError(t, err)
		keys := make([]string, 0, len(infos))
		for _, info := range infos {
			keys = append(keys, info.Ref.Key)
		}
		assert.Contains(t, keys, "2/theirs.wal", "an object outside the prefix is never deleted")
	})
}

// Run called twice: the second returns ErrStopped at once and changes
// nothing; calls go on through the first, and fail with ErrStopped once it
// returned, as do calls queued before a Run whose ctx had already ended.
func TestAdversaryGCRunTwiceAndRunThatNeverRan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		store := w.store(1)
		g := newGCNodeOn(t, w, store)
		g.run(t)
		synctest.Wait() // the first Run has begun: the second is the one refused
		require.ErrorIs(t, g.Run(t.Context()), walstore.ErrStopped)
		g.garbage(t, 1)
		n, err := g.CollectGarbage(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		g.stop()
		require.ErrorIs(t, g.Run(t.Context()), walstore.ErrStopped)
		_, err = g.CollectGarbage(t.Context())
		require.ErrorIs(t, err, walstore.ErrStopped)
	})
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		store := w.store(1)
		g := newGCNodeOn(t, w, store)
		orphan(t, store, "a.wal")
		time.Sleep(time.Hour)
		collected, swept := make(chan error, 1), make(chan error, 1)
		go func() { _, err := g.CollectGarbage(t.Context()); collected <- err }()
		go func() { _, err := g.Sweep(t.Context(), time.Minute); swept <- err }()
		synctest.Wait()

		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.NoError(t, g.Run(ctx))
		for _, ch := range []chan error{collected, swept} {
			err := <-ch
			require.ErrorIs(t, err, walstore.ErrStopped, "a queued call whose Run never got going")
		}
		_, err := g.Sweep(t.Context(), time.Minute)
		require.ErrorIs(t, err, walstore.ErrStopped)
		assert.Equal(t, 1, listed(t, store), "nothing deleted by a Run whose ctx had ended")
	})
}

// Objects a follower has not applied are never deleted, however many
// calls, of either kind and with age zero, race each other and a
// transition; what was acknowledged durable stays readable.
func TestAdversaryGCSparesWhatAFollowerStillNeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		store := w.store(1)
		g := newGCNodeOn(t, w, store)
		g.run(t)
		require.NoError(t, g.local.AssignEpoch(tpA, 1, 0))
		require.NoError(t, g.BecomeLeader(t.Context(), tpA, 1, []int32{2}, -1))
		for i := range int64(3) {
			produce(t, g.Node, g.local, tpA, 1, 10*i, 10*i+9)
			settle(time.Second)
		}
		require.NoError(t, g.WaitDurable(t.Context(), tpA, 1, 29))
		objects := listed(t, store)
		require.Equal(t, 3, objects)
		time.Sleep(time.Hour)

		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				_, err := g.CollectGarbage(t.Context())
				assert.NoError(t, err)
			})
			wg.Go(func() {
				_, err := g.Sweep(t.Context(), 0)
				assert.NoError(t, err)
			})
		}
		wg.Go(func() { produce(t, g.Node, g.local, tpA, 1, 30, 39) })
		wg.Wait()
		require.NoError(t, g.WaitDurable(t.Context(), tpA, 1, 39))
		n, err := g.CollectGarbage(t.Context())
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.Equal(t, objects+1, listed(t, store), "every object a follower still needs is kept")

		// A follower reading from scratch still finds every acknowledged batch.
		flog := memstore.NewLocalLog()
		f := w.start(2, walstore.NodeConfig{Local: flog})
		require.NoError(t, f.BecomeFollower(t.Context(), tpA, 1, 1))
		settle(time.Minute)
		requireSameLog(t, g.local, flog, tpA)
	})
}
