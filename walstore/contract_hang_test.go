package walstore_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// A local log that hangs: a call of a partition's EndOffset, Epochs,
// Truncate or Append that never returns (a disk that stopped answering, a
// log that ignores its context). It must cost its partition only: the
// call that made it gives up when its context ends with an error naming
// the call, nothing else waits for it, a later call of that partition is
// refused rather than piling up behind it, and once it returns the
// partition works again.

// hangLocal is a local log whose calls of a partition can be made to hang
// until released, whatever their context says.
type hangLocal struct {
	*memstore.LocalLog
	mu      sync.Mutex
	gates   map[trapKey]chan struct{}
	waiting map[trapKey]int // calls waiting at a gate now
	most    map[trapKey]int // the most that ever waited at once
	calls   map[trapKey]int // calls that met a gate
}

func newHangLocal() *hangLocal {
	return &hangLocal{LocalLog: memstore.NewLocalLog(), gates: make(map[trapKey]chan struct{}),
		waiting: make(map[trapKey]int), most: make(map[trapKey]int), calls: make(map[trapKey]int)}
}

// hang makes the calls of method for tp wait until the returned function
// is called; their context does not end the wait.
func (l *hangLocal) hang(method string, tp metadata.TopicPartition) (release func()) {
	gate := make(chan struct{})
	l.mu.Lock()
	l.gates[trapKey{method, tp}] = gate
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.gates, trapKey{method, tp})
			l.mu.Unlock()
			close(gate)
		})
	}
}

func (l *hangLocal) wait(method string, tp metadata.TopicPartition) {
	k := trapKey{method, tp}
	l.mu.Lock()
	gate := l.gates[k]
	if gate != nil {
		l.calls[k]++
		l.waiting[k]++
		l.most[k] = max(l.most[k], l.waiting[k])
	}
	l.mu.Unlock()
	if gate == nil {
		return
	}
	<-gate
	l.mu.Lock()
	l.waiting[k]--
	l.mu.Unlock()
}

// stats returns how many calls of method for tp met its gate, and the
// most that waited at once.
func (l *hangLocal) stats(method string, tp metadata.TopicPartition) (calls, most int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := trapKey{method, tp}
	return l.calls[k], l.most[k]
}

func (l *hangLocal) EndOffset(tp metadata.TopicPartition) (int64, error) {
	l.wait("EndOffset", tp)
	return l.LocalLog.EndOffset(tp)
}

func (l *hangLocal) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	l.wait("Epochs", tp)
	return l.LocalLog.Epochs(tp)
}

func (l *hangLocal) Append(ctx context.Context, tp metadata.TopicPartition, bs []storage.Batch) error {
	l.wait("Append", tp)
	return l.LocalLog.Append(ctx, tp, bs)
}

func (l *hangLocal) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	l.wait("Truncate", tp)
	return l.LocalLog.Truncate(ctx, tp, offset)
}

// returnsWithin runs call and returns its error, failing the test if it
// has not returned after d of the bubble's time: a call that outlives its
// context would otherwise hang the test until it times out.
func returnsWithin(t *testing.T, d time.Duration, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s has not returned after %v", what, d)
		return nil
	}
}

// requireNoAnswer checks that err is a *TransitionError leaving want in
// effect whose error is a *DependencyError naming dependency and matching
// is.
func requireNoAnswer(t *testing.T, n *walstore.Node, tp metadata.TopicPartition, err error, want walstore.RoleState, dependency string, is error) {
	t.Helper()
	requireNotInEffect(t, n, tp, err, want, is)
	var te *walstore.TransitionError
	require.ErrorAs(t, err, &te)
	requireDependencyError(t, te.Err, dependency, is)
}

// requireStillFailing is requireFailing for a failure whose error changes
// while it lasts (a call that has not answered for longer each time):
// OnHealth tells when a partition begins or stops failing, so its last
// report names the partition and the dependency, with the error of then.
func requireStillFailing(t *testing.T, n *walstore.Node, reports *healthLog, tp metadata.TopicPartition, role walstore.Role, dependency string, is error) {
	t.Helper()
	synctest.Wait()
	h := n.Health()
	require.Equal(t, 1, h.FailingPartitions, "%v", h.Partitions)
	require.Len(t, h.Partitions, 1)
	pe := h.Partitions[0]
	assert.Equal(t, tp, pe.Partition)
	assert.Equal(t, role, pe.Role)
	requireDependencyError(t, pe, dependency, is)
	var got *walstore.PartitionError
	require.ErrorAs(t, n.PartitionError(tp), &got)
	assert.Equal(t, role, got.Role)
	requireDependencyError(t, got, dependency, is)
	last := reports.last(t)
	require.Len(t, last.Partitions, 1, "OnHealth's last report")
	assert.Equal(t, tp, last.Partitions[0].Partition)
	requireDependencyError(t, last.Partitions[0], dependency, is)
}

// A BecomeLeader whose LocalLog.EndOffset hangs gives up when its context
// ends, the partition still followed, with an error naming the call; a
// second one while the call is stuck is refused at once, even with a
// context that never ends, and makes no second call; once the call
// returns, the partition can be led. BecomeLeader once waited for the
// call for ever, and held every other transition of the Node.
func TestContractHungEndOffsetBecomeLeaderGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		local := newHangLocal()
		_, n1, n2, log1 := twoBrokers(t, walstore.NodeConfig{Local: local})
		following := walstore.RoleState{Role: walstore.Following, Epoch: 1, Leader: 1}
		release := local.hang("EndOffset", tpA)
		t.Cleanup(release)

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := returnsWithin(t, time.Minute, "BecomeLeader with a hung EndOffset", func() error {
			return n2.BecomeLeader(ctx, tpA, 2, []int32{1}, -1)
		})
		requireNoAnswer(t, n2, tpA, err, following, "LocalLog.EndOffset", context.DeadlineExceeded)
		assert.ErrorIs(t, err, storage.ErrUnavailable)

		for _, tc := range []struct {
			name string
			call func() error
			in   walstore.RoleState
		}{
			{"BecomeLeader", func() error { return n2.BecomeLeader(t.Context(), tpA, 2, []int32{1}, -1) }, following},
			{"BecomeFollower", func() error { return n2.BecomeFollower(t.Context(), tpA, 2, 1) }, following},
			{"StopReplica", func() error { return n2.StopReplica(t.Context(), tpA) }, following},
		} {
			err := returnsWithin(t, time.Minute, tc.name+" while EndOffset is stuck", tc.call)
			requireNoAnswer(t, n2, tpA, err, tc.in, "LocalLog.EndOffset", storage.ErrUnavailable)
		}
		calls, most := local.stats("EndOffset", tpA)
		assert.Equal(t, 1, calls, "calls of the stuck partition's EndOffset")
		assert.Equal(t, 1, most)

		// Released, the partition works: broker 2 leads it at epoch 2.
		release()
		synctest.Wait()
		require.NoError(t, n1.BecomeFollower(t.Context(), tpA, 2, 2))
		require.NoError(t, local.AssignEpoch(tpA, 2, 10))
		require.NoError(t, n2.BecomeLeader(t.Context(), tpA, 2, []int32{1}, -1))
		produce(t, n2, local.LocalLog, tpA, 2, 10, 19)
		require.NoError(t, n2.WaitReplicated(within(t, time.Minute), tpA, 2, 19))
		requireSameLog(t, local.LocalLog, log1, tpA)
	})
}

// While one partition's local log hangs, in a transition (a BecomeLeader
// of tpC whose EndOffset hangs, its context still live) and in the
// follower engine (tpA's appends hang), the other partitions' transitions,
// appends and waits go on: broker 2 takes tpB over and replicates it to
// broker 1. Once released, tpA catches up. The transition held the Node's
// transitions of every partition, and the append the follower engine's
// lock, for as long as the log hung.
func TestContractHungLocalLogHoldsOnlyItsPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		local := newHangLocal()
		_, n1, n2, log1 := twoBrokers(t, walstore.NodeConfig{Local: local})
		t.Cleanup(local.hang("EndOffset", tpC))
		releaseAppend := local.hang("Append", tpA)
		t.Cleanup(releaseAppend)
		produce(t, n1, log1, tpA, 1, 10, 19)
		settle(time.Second) // broker 2's append of 10-19 hangs

		hungCtx, cancelHung := context.WithCancel(t.Context())
		defer cancelHung()
		hung := make(chan error, 1)
		go func() { hung <- n2.BecomeLeader(hungCtx, tpC, 1, []int32{1}, -1) }()
		settle(time.Second)

		ctx := within(t, time.Minute)
		require.NoError(t, n1.BecomeFollower(ctx, tpB, 2, 2))
		require.NoError(t, local.AssignEpoch(tpB, 2, 0))
		require.NoError(t, n2.BecomeLeader(ctx, tpB, 2, []int32{1}, -1), "tpB's transition while tpC's hangs")
		produce(t, n2, local.LocalLog, tpB, 2, 0, 9)
		require.NoError(t, n2.WaitDurable(ctx, tpB, 2, 9))
		require.NoError(t, n2.WaitReplicated(ctx, tpB, 2, 9), "broker 1 follows tpB")
		requireSameLog(t, local.LocalLog, log1, tpB)
		require.NoError(t, n1.WaitDurable(ctx, tpA, 1, 19), "broker 1 leads tpA on")

		cancelHung()
		requireNoAnswer(t, n2, tpC, <-hung, walstore.RoleState{Role: walstore.NoRole, Epoch: -1, Leader: -1},
			"LocalLog.EndOffset", context.Canceled)

		releaseAppend()
		require.NoError(t, n1.WaitReplicated(within(t, 10*time.Minute), tpA, 1, 19), "tpA catches up once released")
		requireSameLog(t, log1, local.LocalLog, tpA)
		_, most := local.stats("Append", tpA)
		assert.Equal(t, 1, most, "appends of tpA running at once")
	})
}

// A leadership whose local log's Epochs hangs, as it takes its partition
// up (the epoch markers) or judges a follower's progress (a follower
// whose last epoch is an earlier one), is reported as that partition's
// failure naming LocalLog.Epochs; its other partitions replicate
// meanwhile, and it clears and replicates once released. The call waited
// for ever: it was never reported, and progress recorded on the
// follower's engine goroutine held every partition the follower had.
func TestContractHungEpochsIsReported(t *testing.T) {
	for _, tc := range []struct {
		name string
		// atProgress: the leadership has published its markers before
		// Epochs hangs; only judging progress needs it.
		atProgress bool
	}{{"taking the leadership up", false}, {"judging progress", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				local, log2 := newHangLocal(), memstore.NewLocalLog()
				var reports healthLog
				n1 := w.start(1, walstore.NodeConfig{Local: local, OnHealth: reports.record})
				n2 := w.start(2, walstore.NodeConfig{Local: log2})
				for _, tp := range []metadata.TopicPartition{tpA, tpB} {
					require.NoError(t, local.AssignEpoch(tp, 1, 0))
					require.NoError(t, n1.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
					require.NoError(t, n2.BecomeFollower(ctx, tp, 1, 1))
				}
				produce(t, n1, local.LocalLog, tpA, 1, 0, 9)
				require.NoError(t, n1.WaitReplicated(within(t, time.Minute), tpA, 1, 9))

				var release func()
				if tc.atProgress {
					// Epoch 2 begins without records: broker 2's reports
					// keep naming epoch 1, and each needs the lineage.
					require.NoError(t, local.AssignEpoch(tpA, 2, 10))
					require.NoError(t, n1.BecomeLeader(ctx, tpA, 2, []int32{2}, -1))
					require.NoError(t, n2.BecomeFollower(ctx, tpA, 2, 1))
					settle(time.Second)
					release = local.hang("Epochs", tpA)
				} else {
					release = local.hang("Epochs", tpA)
					require.NoError(t, local.AssignEpoch(tpA, 2, 10))
					require.NoError(t, n1.BecomeLeader(ctx, tpA, 2, []int32{2}, -1))
					require.NoError(t, n2.BecomeFollower(ctx, tpA, 2, 1))
				}
				t.Cleanup(release)
				settle(time.Minute)
				requireStillFailing(t, n1, &reports, tpA, walstore.Leading, "LocalLog.Epochs", storage.ErrUnavailable)

				produce(t, n1, local.LocalLog, tpB, 1, 0, 9)
				require.NoError(t, n1.WaitReplicated(within(t, time.Minute), tpB, 1, 9), "tpB replicates meanwhile")
				requireSameLog(t, local.LocalLog, log2, tpB)
				_, most := local.stats("Epochs", tpA)
				assert.Equal(t, 1, most, "Epochs calls of tpA running at once")

				release()
				produce(t, n1, local.LocalLog, tpA, 2, 10, 19)
				require.NoError(t, n1.WaitReplicated(within(t, time.Minute), tpA, 2, 19))
				settle(time.Minute)
				requireHealthy(t, n1, &reports, tpA)
				requireSameLog(t, local.LocalLog, log2, tpA)
			})
		})
	}
}

// Run returns when its context ends while local-log calls hang (a
// transition's EndOffset, the follower engine's Append, the leader
// engine's Epochs), and the calls left behind end once the log returns:
// the bubble, which waits for every goroutine it started, ends, and
// goleak finds none left. Run waited for them: it never returned.
func TestContractRunReturnsWhileLocalLogHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		local, log1 := newHangLocal(), memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		cfg := walstore.NodeConfig{BrokerID: 2, Store: w.store(2), Log: w.meta, Local: local, Logger: discard()}
		n2, err := walstore.NewNode(cfg)
		require.NoError(t, err)
		runCtx, stop := context.WithCancel(t.Context())
		defer stop()
		ran := make(chan error, 1)
		go func() { ran <- n2.Run(runCtx) }()

		ctx := t.Context()
		releaseAppend := local.hang("Append", tpA)
		releaseEpochs := local.hang("Epochs", tpB)
		releaseEnd := local.hang("EndOffset", tpC)
		defer releaseAppend()
		defer releaseEpochs()
		defer releaseEnd()
		require.NoError(t, local.AssignEpoch(tpB, 1, 0))
		require.NoError(t, n2.BecomeLeader(ctx, tpB, 1, []int32{1}, -1))
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		settle(time.Second)
		for method, tp := range map[string]metadata.TopicPartition{"Append": tpA, "Epochs": tpB} {
			calls, _ := local.stats(method, tp)
			require.Equal(t, 1, calls, "%s of %s hangs", method, tp)
		}
		// And a transition in flight, waiting for its own call.
		go func() { _ = n2.BecomeLeader(runCtx, tpC, 1, []int32{1}, -1) }()
		settle(time.Second)

		stop()
		require.NoError(t, returnsWithin(t, time.Minute, "Run with hung local-log calls", func() error { return <-ran }))
		require.ErrorIs(t, n2.BecomeLeader(ctx, tpD, 1, []int32{1}, -1), walstore.ErrStopped)
		// The calls left behind return once released, below; the bubble
		// then ends with every goroutine gone.
	})
}

var (
	tpC = metadata.TopicPartition{Topic: "t", Partition: 2}
	tpD = metadata.TopicPartition{Topic: "t", Partition: 3}
)

// A followed partition whose local log's Epochs hangs as the follower
// engine takes it up (loads its state) is reported failing, naming the
// call, once NodeConfig.LocalTimeout passes; the engine's other
// partitions replicate meanwhile (the engine makes its local-log calls
// one at a time, so they wait for that timeout once, and not again while
// the call is stuck), and it catches up once released. The load held the
// follower engine, and so every partition it follows, for as long as the
// log hung.
func TestContractHungFollowerLoadIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1, local := memstore.NewLocalLog(), newHangLocal()
		var reports healthLog
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		n2 := w.start(2, walstore.NodeConfig{Local: local, OnHealth: reports.record})
		release := local.hang("Epochs", tpA)
		t.Cleanup(release)
		for _, tp := range []metadata.TopicPartition{tpA, tpB} {
			require.NoError(t, log1.AssignEpoch(tp, 1, 0))
			require.NoError(t, n1.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
			require.NoError(t, n2.BecomeFollower(ctx, tp, 1, 1))
			produce(t, n1, log1, tp, 1, 0, 9)
		}
		require.NoError(t, n1.WaitReplicated(within(t, time.Minute), tpB, 1, 9), "tpB replicates meanwhile")
		settle(time.Minute) // past LocalTimeout
		requireStillFailing(t, n2, &reports, tpA, walstore.Following, "LocalLog.Epochs", storage.ErrUnavailable)
		_, most := local.stats("Epochs", tpA)
		assert.Equal(t, 1, most, "Epochs calls of tpA running at once")

		release()
		require.NoError(t, n1.WaitReplicated(within(t, time.Minute), tpA, 1, 9))
		requireSameLog(t, log1, local.LocalLog, tpA)
		requireSameLog(t, log1, local.LocalLog, tpB)
		settle(time.Minute)
		requireHealthy(t, n2, &reports, tpA)
	})
}
