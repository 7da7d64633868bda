package walstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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

// Attacks on how a Node reports a partition whose LocalLog call was given
// up on and still runs (a stuck call): in Health, PartitionError and
// OnHealth, on either side, at every moment a broker may look, with many
// partitions stuck at once, and as the calls return.

// stuckLocal is a local log whose calls of a partition can be made to
// hang, whatever their context says, until released, or to fail.
type stuckLocal struct {
	*memstore.LocalLog
	mu    sync.Mutex
	gates map[trapKey]chan struct{}
	fails map[trapKey]error
	calls map[trapKey]int // calls that met a gate
}

func newStuckLocal() *stuckLocal {
	return &stuckLocal{LocalLog: memstore.NewLocalLog(), gates: make(map[trapKey]chan struct{}),
		fails: make(map[trapKey]error), calls: make(map[trapKey]int)}
}

// hang makes the next calls of method for tp wait until release.
func (l *stuckLocal) hang(method string, tp metadata.TopicPartition) (release func()) {
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

// fail makes the calls of method for tp fail with err; nil stops.
func (l *stuckLocal) fail(method string, tp metadata.TopicPartition, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		delete(l.fails, trapKey{method, tp})
		return
	}
	l.fails[trapKey{method, tp}] = err
}

// met returns how many calls of method for tp met its gate.
func (l *stuckLocal) met(method string, tp metadata.TopicPartition) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[trapKey{method, tp}]
}

func (l *stuckLocal) enter(method string, tp metadata.TopicPartition) error {
	k := trapKey{method, tp}
	l.mu.Lock()
	gate, err := l.gates[k], l.fails[k]
	if gate != nil {
		l.calls[k]++
	}
	l.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return err
}

func (l *stuckLocal) EndOffset(tp metadata.TopicPartition) (int64, error) {
	if err := l.enter("EndOffset", tp); err != nil {
		return 0, err
	}
	return l.LocalLog.EndOffset(tp)
}

func (l *stuckLocal) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	if err := l.enter("Epochs", tp); err != nil {
		return nil, err
	}
	return l.LocalLog.Epochs(tp)
}

func (l *stuckLocal) Append(ctx context.Context, tp metadata.TopicPartition, bs []storage.Batch) error {
	if err := l.enter("Append", tp); err != nil {
		return err
	}
	return l.LocalLog.Append(ctx, tp, bs)
}

func (l *stuckLocal) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	if err := l.enter("Truncate", tp); err != nil {
		return err
	}
	return l.LocalLog.Truncate(ctx, tp, offset)
}

func (l *stuckLocal) Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	if err := l.enter("Read", tp); err != nil {
		return nil, err
	}
	return l.LocalLog.Read(ctx, tp, from, maxBytes)
}

// healthWatch is an OnHealth that checks what the Node promises of its
// calls: one at a time, and only when the health says something new.
type healthWatch struct {
	inFlight   atomic.Int32
	mu         sync.Mutex
	reports    []walstore.Health
	concurrent int // calls made while another ran
	repeats    int // calls that said nothing the one before did not
}

func (w *healthWatch) record(h walstore.Health) {
	if w.inFlight.Add(1) > 1 {
		w.mu.Lock()
		w.concurrent++
		w.mu.Unlock()
	}
	defer w.inFlight.Add(-1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.reports); n > 0 && sameReport(w.reports[n-1], h) {
		w.repeats++
	}
	w.reports = append(w.reports, h)
}

// sameReport reports whether a and b say the same, to the last error.
func sameReport(a, b walstore.Health) bool {
	return a.Degraded == b.Degraded && a.FailingPartitions == b.FailingPartitions &&
		slices.EqualFunc(a.Partitions, b.Partitions, func(x, y *walstore.PartitionError) bool {
			return x.Partition == y.Partition && x.Role == y.Role && x.Err.Error() == y.Err.Error()
		})
}

// last returns the last report, failing the test if there is none.
func (w *healthWatch) last(t *testing.T) walstore.Health {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NotEmpty(t, w.reports, "OnHealth was never called")
	return w.reports[len(w.reports)-1]
}

func (w *healthWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.reports)
}

// check fails the test if OnHealth was called concurrently or with a
// report that said nothing new.
func (w *healthWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Zero(t, w.concurrent, "OnHealth calls made while another ran")
	assert.Zero(t, w.repeats, "OnHealth calls that said nothing new")
}

// requireConsistent checks what any Health must say of itself: its
// count covers its list, the list is bounded, in order, each partition
// once, and each entry is what PartitionError says of it.
func requireConsistent(t *testing.T, n *walstore.Node, h walstore.Health) {
	t.Helper()
	require.GreaterOrEqual(t, h.FailingPartitions, len(h.Partitions), "%v", h.Partitions)
	require.LessOrEqual(t, len(h.Partitions), walstore.MaxFailingListed)
	require.Equal(t, min(h.FailingPartitions, walstore.MaxFailingListed), len(h.Partitions), "%v", h.Partitions)
	for i := 1; i < len(h.Partitions); i++ {
		require.Negative(t, h.Partitions[i-1].Partition.Compare(h.Partitions[i].Partition), "listed in order, once each: %v", h.Partitions)
	}
}

// requireStuck checks that n, and OnHealth's last report, list tp
// failing in role, naming the stuck call dependency, among count failing.
func requireStuck(t *testing.T, n *walstore.Node, w *healthWatch, tp metadata.TopicPartition, role walstore.Role, dependency string, count int) {
	t.Helper()
	synctest.Wait()
	h := n.Health()
	requireConsistent(t, n, h)
	require.Equal(t, count, h.FailingPartitions, "%v", h.Partitions)
	i := slices.IndexFunc(h.Partitions, func(e *walstore.PartitionError) bool { return e.Partition == tp })
	require.GreaterOrEqual(t, i, 0, "%s listed: %v", tp, h.Partitions)
	pe := h.Partitions[i]
	assert.Equal(t, role, pe.Role)
	requireDependencyError(t, pe, dependency, storage.ErrUnavailable)
	var got *walstore.PartitionError
	require.ErrorAs(t, n.PartitionError(tp), &got)
	assert.Equal(t, role, got.Role)
	requireDependencyError(t, got, dependency, storage.ErrUnavailable)
	if w != nil {
		last := w.last(t)
		assert.Equal(t, h.FailingPartitions, last.FailingPartitions, "OnHealth's last report")
		assert.Equal(t, partitionsOf(h), partitionsOf(last), "OnHealth's last report")
	}
}

func partitionsOf(h walstore.Health) []string {
	var out []string
	for _, e := range h.Partitions {
		out = append(out, fmt.Sprintf("%s/%s", e.Partition, e.Role))
	}
	return out
}

// requireAllHealthy checks that n and OnHealth's last report are healthy.
func requireAllHealthy(t *testing.T, n *walstore.Node, w *healthWatch, tps ...metadata.TopicPartition) {
	t.Helper()
	synctest.Wait()
	h := n.Health()
	assert.True(t, h.Healthy(), "%v", h.Partitions)
	for _, tp := range tps {
		assert.NoError(t, n.PartitionError(tp), "%s", tp)
	}
	if w != nil {
		assert.True(t, w.last(t).Healthy(), "OnHealth's last report: %v", w.last(t).Partitions)
	}
}

var errStuckTest = errors.New("the local log failed")

// stuckNode is broker 1, over a stuckLocal and watched, and broker 2, over
// a memstore log: broker 1 leads tpA and tpB at epoch 1 and broker 2
// follows them, or, with following, the other way round; 0-9 of tpA are
// replicated.
type stuckNode struct {
	w      *world
	n, n2  *walstore.Node
	local  *stuckLocal
	log2   *memstore.LocalLog
	watch  *healthWatch
	leader *walstore.Node // of tpA and tpB
}

func newStuckNode(t *testing.T, following bool) *stuckNode {
	s := &stuckNode{w: newWorld(t), local: newStuckLocal(), log2: memstore.NewLocalLog(), watch: &healthWatch{}}
	// OnHealth may read the Node's health: it must not deadlock with the
	// call that reports it.
	var self atomic.Pointer[walstore.Node]
	s.n = s.w.start(1, walstore.NodeConfig{Local: s.local, OnHealth: func(h walstore.Health) {
		s.watch.record(h)
		if n := self.Load(); n != nil {
			_ = n.Health()
			_ = n.PartitionError(tpA)
		}
	}})
	self.Store(s.n)
	s.n2 = s.w.start(2, walstore.NodeConfig{Local: s.log2})
	leader, follower, leaderLog, id, other := s.n, s.n2, s.local.LocalLog, int32(1), int32(2)
	if following {
		leader, follower, leaderLog, id, other = s.n2, s.n, s.log2, 2, 1
	}
	for _, tp := range []metadata.TopicPartition{tpA, tpB} {
		require.NoError(t, leaderLog.AssignEpoch(tp, 1, 0))
		require.NoError(t, leader.BecomeLeader(t.Context(), tp, 1, []int32{other}, -1))
		require.NoError(t, follower.BecomeFollower(t.Context(), tp, 1, id))
	}
	s.leader = leader
	produce(t, s.leader, leaderLog, tpA, 1, 0, 9)
	require.NoError(t, s.leader.WaitReplicated(within(t, time.Minute), tpA, 1, 9))
	settle(time.Second)
	return s
}

// stuckCase makes a call of broker 1's log of tpA stuck: it hangs, and
// its caller gives up on it.
type stuckCase struct {
	name       string
	following  bool   // broker 1 follows tpA
	dependency string // the stuck call
	// stick makes the call hang and be given up on; it returns the
	// release.
	stick func(t *testing.T, s *stuckNode) (release func())
	// counted: an engine reports the partition failing too, besides the
	// stuck call.
	counted bool
}

var stuckCases = []stuckCase{
	{name: "leader/Republish Read", dependency: "LocalLog.Read", counted: true,
		stick: func(t *testing.T, s *stuckNode) func() {
			release := s.local.hang("Read", tpA)
			err := s.n.Republish(within(t, time.Minute), tpA, 0)
			requireDependencyError(t, err, "LocalLog.Read", storage.ErrUnavailable)
			return release
		}},
	{name: "leader/progress Epochs", dependency: "LocalLog.Epochs", counted: true,
		stick: func(t *testing.T, s *stuckNode) func() {
			// Epoch 2 begins without records: broker 2's reports keep
			// naming epoch 1, and each needs the lineage.
			require.NoError(t, s.local.AssignEpoch(tpA, 2, 10))
			require.NoError(t, s.n.BecomeLeader(t.Context(), tpA, 2, []int32{2}, -1))
			require.NoError(t, s.n2.BecomeFollower(t.Context(), tpA, 2, 1))
			settle(time.Second)
			release := s.local.hang("Epochs", tpA)
			settle(time.Minute)
			require.Equal(t, 1, s.local.met("Epochs", tpA))
			return release
		}},
	{name: "leader/RecordProgress Epochs from the broker", dependency: "LocalLog.Epochs", counted: true,
		stick: func(t *testing.T, s *stuckNode) func() {
			require.NoError(t, s.local.AssignEpoch(tpA, 2, 10))
			require.NoError(t, s.n.BecomeLeader(t.Context(), tpA, 2, []int32{2}, -1))
			settle(time.Second)
			release := s.local.hang("Epochs", tpA)
			s.n.RecordProgress(walstore.Progress{Partition: tpA, Leader: 1, Follower: 2, EndOffset: 10, LastEpoch: 1})
			return release
		}},
	{name: "follower/BecomeLeader EndOffset", following: true, dependency: "LocalLog.EndOffset",
		stick: func(t *testing.T, s *stuckNode) func() {
			release := s.local.hang("EndOffset", tpA)
			require.NoError(t, s.local.AssignEpoch(tpA, 2, 10))
			err := s.n.BecomeLeader(within(t, time.Minute), tpA, 2, []int32{2}, -1)
			requireDependencyError(t, err, "LocalLog.EndOffset", context.DeadlineExceeded)
			return release
		}},
	{name: "follower/Append", following: true, dependency: "LocalLog.Append", counted: true,
		stick: func(t *testing.T, s *stuckNode) func() {
			release := s.local.hang("Append", tpA)
			produce(t, s.n2, s.log2, tpA, 1, 10, 19)
			settle(time.Minute)
			require.Equal(t, 1, s.local.met("Append", tpA))
			return release
		}},
	{name: "follower/Truncate", following: true, dependency: "LocalLog.Truncate", counted: true,
		stick: func(t *testing.T, s *stuckNode) func() {
			// Broker 1 appends 10-19 of epoch 1 on its own, which broker
			// 2, leading at epoch 2 from 10, never had: broker 1 must
			// truncate them.
			require.NoError(t, s.n.StopReplica(t.Context(), tpA))
			b := []storage.Batch{clustertest.MakeBatch(tpA, 1, 10, 19)}
			require.NoError(t, s.local.LocalLog.Append(t.Context(), tpA, b))
			release := s.local.hang("Truncate", tpA)
			require.NoError(t, s.log2.AssignEpoch(tpA, 2, 10))
			require.NoError(t, s.n2.BecomeLeader(t.Context(), tpA, 2, []int32{1}, -1))
			require.NoError(t, s.n.BecomeFollower(t.Context(), tpA, 2, 2))
			produce(t, s.n2, s.log2, tpA, 2, 10, 14)
			settle(time.Minute)
			require.Equal(t, 1, s.local.met("Truncate", tpA))
			return release
		}},
}

// Whichever call of a partition is stuck, on either side and whoever
// gave up on it, the Node lists the partition once, in the role in
// effect, naming the call, in Health, PartitionError and OnHealth's last
// report; the other partition's transitions and the partition's refused
// transitions change nothing of it; once the call returns it clears, and
// OnHealth's last report says so. OnHealth is never called twice at once
// nor with no news.
func TestStuckCallIsReportedUntilItReturns(t *testing.T) {
	for _, tc := range stuckCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStuckNode(t, tc.following)
				role := walstore.Leading
				if tc.following {
					role = walstore.Following
				}
				release := tc.stick(t, s)
				t.Cleanup(release)
				settle(time.Minute)
				requireStuck(t, s.n, s.watch, tpA, role, tc.dependency, 1)
				in := s.n.Role(tpA)
				reports := s.watch.count()

				// The stuck partition's transitions are refused at once and
				// change nothing; the other partition's go on.
				for _, call := range []func() error{
					func() error { return s.n.BecomeLeader(t.Context(), tpA, 5, []int32{2}, -1) },
					func() error { return s.n.BecomeFollower(t.Context(), tpA, 5, 2) },
					func() error { return s.n.StopReplica(t.Context(), tpA) },
				} {
					err := returnsWithin(t, time.Second, "a transition of the stuck partition", call)
					requireNotInEffect(t, s.n, tpA, err, in, storage.ErrUnavailable)
				}
				require.NoError(t, s.n.StopReplica(t.Context(), tpB))
				settle(time.Minute)
				requireStuck(t, s.n, s.watch, tpA, role, tc.dependency, 1)
				assert.Equal(t, reports, s.watch.count(), "OnHealth calls with nothing new")
				h := s.n.Health()
				assert.Equal(t, h.Partitions, s.n.Health().Partitions, "the entry stays the same while the call runs")

				release()
				settle(time.Minute)
				requireAllHealthy(t, s.n, s.watch, tpA, tpB)
				require.NoError(t, s.n.StopReplica(t.Context(), tpA), "once the call returned")
				requireAllHealthy(t, s.n, s.watch, tpA, tpB)
				s.watch.check(t)
			})
		})
	}
}

// Many partitions stuck at once, on both sides, besides partitions
// failing in their engine only and stuck partitions the Node has no role
// for: Health lists the first MaxFailingListed of them all in order, each
// once, and counts each failing partition once, whether its engine
// reports it too or not; OnHealth's last report says the same. As the
// calls return, the count falls with them, and the Node ends healthy.
func TestStuckManyPartitionsAreCountedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const led, followed, fresh, failing = 12, 10, 3, 2
		w := newWorld(t)
		local, log2 := newStuckLocal(), memstore.NewLocalLog()
		watch := &healthWatch{}
		n := w.start(1, walstore.NodeConfig{Local: local, OnHealth: watch.record})
		n2 := w.start(2, walstore.NodeConfig{Local: log2})
		named := func(topic string, count int) []metadata.TopicPartition {
			var tps []metadata.TopicPartition
			for i := range count {
				tps = append(tps, metadata.TopicPartition{Topic: topic, Partition: int32(i)})
			}
			return tps
		}
		// Topics sorted so that each kind has partitions among the first
		// listed.
		ledTPs, followedTPs := named("b-led", led), named("a-followed", followed)
		freshTPs, failingTPs := named("0-fresh", fresh), named("a-failing", failing)
		for _, tp := range slices.Concat(ledTPs, failingTPs) {
			require.NoError(t, local.AssignEpoch(tp, 1, 0))
			require.NoError(t, n.BecomeLeader(t.Context(), tp, 1, []int32{2}, -1))
			require.NoError(t, n2.BecomeFollower(t.Context(), tp, 1, 1))
			produce(t, n, local.LocalLog, tp, 1, 0, 9)
		}
		for _, tp := range followedTPs {
			require.NoError(t, log2.AssignEpoch(tp, 1, 0))
			require.NoError(t, n2.BecomeLeader(t.Context(), tp, 1, []int32{1}, -1))
			require.NoError(t, n.BecomeFollower(t.Context(), tp, 1, 2))
		}
		settle(time.Minute)
		require.True(t, n.Health().Healthy(), "%v", n.Health().Partitions)

		var releases []func()
		t.Cleanup(func() {
			for _, r := range releases {
				r()
			}
		})
		// Led: Republishes whose Reads hang, all at once.
		var wg sync.WaitGroup
		for _, tp := range ledTPs {
			releases = append(releases, local.hang("Read", tp))
			wg.Go(func() {
				err := n.Republish(within(t, time.Minute), tp, 0)
				assert.ErrorIs(t, err, storage.ErrUnavailable, "%s", tp)
			})
		}
		wg.Wait()
		// Followed: Appends that hang, met one after another.
		for _, tp := range followedTPs {
			releases = append(releases, local.hang("Append", tp))
			produce(t, n2, log2, tp, 1, 0, 9)
		}
		// No role: BecomeLeaders whose EndOffset hangs.
		for _, tp := range freshTPs {
			releases = append(releases, local.hang("EndOffset", tp))
			require.NoError(t, local.AssignEpoch(tp, 1, 0))
			err := n.BecomeLeader(within(t, time.Minute), tp, 1, []int32{2}, -1)
			requireDependencyError(t, err, "LocalLog.EndOffset", context.DeadlineExceeded)
		}
		// Failing in the engine only: Epochs fails, the leadership cannot
		// publish its markers.
		for _, tp := range failingTPs {
			local.fail("Epochs", tp, errStuckTest)
			require.NoError(t, local.AssignEpoch(tp, 2, 10))
			require.NoError(t, n.BecomeLeader(t.Context(), tp, 2, []int32{2}, -1))
		}
		settle(10 * time.Minute)
		for _, tp := range followedTPs {
			require.Equal(t, 1, local.met("Append", tp), "%s's Append hangs", tp)
		}

		want := slices.Concat(followedTPs, failingTPs, ledTPs) // in partition order
		slices.SortFunc(want, metadata.TopicPartition.Compare)
		check := func(want []metadata.TopicPartition) {
			t.Helper()
			synctest.Wait()
			h := n.Health()
			requireConsistent(t, n, h)
			require.Equal(t, len(want), h.FailingPartitions, "%v", partitionsOf(h))
			var listed []metadata.TopicPartition
			for _, e := range h.Partitions {
				listed = append(listed, e.Partition)
			}
			assert.Equal(t, want[:min(len(want), walstore.MaxFailingListed)], listed)
			for _, tp := range want {
				assert.Error(t, n.PartitionError(tp), "%s", tp)
			}
			for _, tp := range freshTPs {
				assert.NoError(t, n.PartitionError(tp), "%s has no role", tp)
			}
			last := watch.last(t)
			assert.Equal(t, h.FailingPartitions, last.FailingPartitions, "OnHealth's last report")
			assert.Equal(t, partitionsOf(h), partitionsOf(last), "OnHealth's last report")
		}
		check(want)

		// The calls return, a kind at a time.
		for i, r := range releases {
			r()
			if i == led-1 || i == led+followed-1 || i == len(releases)-1 {
				settle(10 * time.Minute)
				var still []metadata.TopicPartition
				for _, tp := range want {
					switch {
					case slices.Contains(ledTPs, tp) && i < led-1,
						slices.Contains(followedTPs, tp) && i < led+followed-1,
						slices.Contains(failingTPs, tp):
						still = append(still, tp)
					}
				}
				check(still)
			}
		}
		for _, tp := range failingTPs {
			local.fail("Epochs", tp, nil)
		}
		settle(10 * time.Minute)
		requireAllHealthy(t, n, watch, slices.Concat(ledTPs, followedTPs, freshTPs, failingTPs)...)
		watch.check(t)
	})
}

// Health is one snapshot, however the Node's state moves under it: while
// a leadership's Epochs, read to judge a follower's progress, hangs past
// RequestTimeout and returns, again and again (the partition stuck, then
// failing in its engine too, then neither), every Health read meanwhile
// counts what it lists: never fewer failing partitions than listed, nor
// a partition listed while it says healthy. It runs on the wall clock,
// since the race it looks for is between goroutines, not timers.
func TestStuckHealthIsOneSnapshot(t *testing.T) {
	w := newWorld(t)
	local := newStuckLocal()
	watch := &healthWatch{}
	n := w.start(1, walstore.NodeConfig{Local: local, OnHealth: watch.record,
		RequestTimeout: time.Millisecond})
	require.NoError(t, local.AssignEpoch(tpA, 1, 0))
	require.NoError(t, n.BecomeLeader(t.Context(), tpA, 1, []int32{2}, -1))
	require.NoError(t, local.AssignEpoch(tpA, 2, 0))
	require.NoError(t, n.BecomeLeader(t.Context(), tpA, 2, []int32{2}, -1))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Pointer[walstore.Health]
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				h := n.Health()
				if h.FailingPartitions < len(h.Partitions) || len(h.Partitions) != min(h.FailingPartitions, walstore.MaxFailingListed) {
					bad.CompareAndSwap(nil, &h)
				}
				_ = n.PartitionError(tpA)
			}
		})
	}
	progress := walstore.Progress{Partition: tpA, Leader: 1, Follower: 2, EndOffset: 0, LastEpoch: 1}
	for i := 0; i < 50 && bad.Load() == nil; i++ {
		release := local.hang("Epochs", tpA)
		n.RecordProgress(progress) // gives up on the call after RequestTimeout
		release()
		for n.PartitionError(tpA) != nil && bad.Load() == nil {
			n.RecordProgress(progress) // refused while stuck; then judged, and cleared
		}
	}
	close(stop)
	wg.Wait()
	if h := bad.Load(); h != nil {
		t.Fatalf("a Health that does not count what it lists: %d failing, listed %v", h.FailingPartitions, partitionsOf(*h))
	}
	watch.check(t)
}

// A call stuck before Run (a BecomeLeader of a followed partition whose
// EndOffset hangs) is reported before Run, while Run runs (the follower
// engine's calls of it refused meanwhile, and counted once), and after
// Run has returned; a call stuck as Run ends (an Append the follower
// engine gives up on when its context ends) is reported after Run too.
// When the calls return after Run, StopReplica succeeds, as documented,
// and the partition's failure ends with its role, as OnHealth's last report
// says too. A failure recorded before Run ended stayed listed after
// StopReplica, which the engines, stopped, no longer performed.
func TestStuckAroundRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		log1, local := memstore.NewLocalLog(), newStuckLocal()
		watch := &healthWatch{}
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		n, err := walstore.NewNode(walstore.NodeConfig{BrokerID: 2, Store: w.store(2), Log: w.meta, Local: local,
			Logger: discard(), OnHealth: watch.record, OnProgress: n1.RecordProgress})
		require.NoError(t, err)
		for _, tp := range []metadata.TopicPartition{tpA, tpB} {
			require.NoError(t, log1.AssignEpoch(tp, 1, 0))
			require.NoError(t, n1.BecomeLeader(t.Context(), tp, 1, []int32{2}, -1))
			require.NoError(t, n.BecomeFollower(t.Context(), tp, 1, 1))
		}
		// Before Run.
		releaseEnd := local.hang("EndOffset", tpA)
		t.Cleanup(releaseEnd)
		require.NoError(t, local.AssignEpoch(tpA, 2, 0))
		err = n.BecomeLeader(within(t, time.Second), tpA, 2, []int32{1}, -1)
		requireDependencyError(t, err, "LocalLog.EndOffset", context.DeadlineExceeded)
		requireStuck(t, n, watch, tpA, walstore.Following, "LocalLog.EndOffset", 1)

		runCtx, stop := context.WithCancel(t.Context())
		defer stop()
		ran := make(chan error, 1)
		go func() { ran <- n.Run(runCtx) }()
		settle(time.Minute)
		requireStuck(t, n, watch, tpA, walstore.Following, "LocalLog.EndOffset", 1)

		// tpC led, its markers failing for good.
		local.fail("Epochs", tpC, errStuckTest)
		require.NoError(t, local.AssignEpoch(tpC, 1, 0))
		require.NoError(t, n.BecomeLeader(t.Context(), tpC, 1, []int32{1}, -1))
		settle(time.Minute)
		requireStuck(t, n, watch, tpA, walstore.Following, "LocalLog.EndOffset", 2)

		releaseAppend := local.hang("Append", tpB)
		t.Cleanup(releaseAppend)
		produce(t, n1, log1, tpB, 1, 0, 9)
		settle(time.Second) // the engine waits for the Append
		stop()
		require.NoError(t, returnsWithin(t, time.Minute, "Run", func() error { return <-ran }))
		synctest.Wait()
		requireStuck(t, n, watch, tpA, walstore.Following, "LocalLog.EndOffset", 3)
		requireStuck(t, n, watch, tpB, walstore.Following, "LocalLog.Append", 3)

		releaseEnd()
		releaseAppend()
		synctest.Wait()
		// tpB's call, given up on as Run ended, returned; nobody retries
		// tpA's load or tpC's markers after Run, so their engines' failures
		// stay as Run left them, until their roles end.
		require.NoError(t, n.PartitionError(tpB))
		assert.Equal(t, 2, n.Health().FailingPartitions, "%v", partitionsOf(n.Health()))
		for _, tp := range []metadata.TopicPartition{tpA, tpB, tpC} {
			require.NoError(t, n.StopReplica(t.Context(), tp), "%s after Run", tp)
			assert.NoError(t, n.PartitionError(tp), "%s has no role", tp)
		}
		requireAllHealthy(t, n, watch, tpA, tpB, tpC)
		watch.check(t)
	})
}

// PartitionError of a partition the Node has never seen, or could never
// have a role for, is nil while another is stuck; and a stuck partition's
// report, changed by its caller, is not the Node's.
func TestStuckPartitionErrorOfUnknownPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStuckNode(t, true)
		release := s.local.hang("Append", tpA)
		t.Cleanup(release)
		produce(t, s.n2, s.log2, tpA, 1, 10, 19)
		settle(time.Minute)
		requireStuck(t, s.n, s.watch, tpA, walstore.Following, "LocalLog.Append", 1)
		// What Health and PartitionError return is the caller's.
		h := s.n.Health()
		h.Partitions[0].Role, h.Partitions[0].Err = walstore.NoRole, nil
		var pe *walstore.PartitionError
		require.ErrorAs(t, s.n.PartitionError(tpA), &pe)
		pe.Role, pe.Err = walstore.NoRole, nil
		requireStuck(t, s.n, s.watch, tpA, walstore.Following, "LocalLog.Append", 1)
		for _, tp := range []metadata.TopicPartition{
			{Topic: "unknown", Partition: 3}, {}, {Topic: "t", Partition: -1}, {Topic: tpA.Topic, Partition: tpA.Partition, TopicID: [16]byte{1}},
		} {
			assert.NoError(t, s.n.PartitionError(tp), "%+v", tp)
		}
	})
}
