package walstore_test

import (
	"context"
	"errors"
	"sync"
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

// Adversary tests of the Node's role transitions (BecomeLeader,
// BecomeFollower, StopReplica), through the exported API only: every
// transition from every role at stale, equal and later epochs, before,
// during and after Run, with a local log whose EndOffset fails, hangs or
// answers what its contract forbids, and racing one another and the
// calls a broker makes meanwhile.

// endLocal is a local log whose next EndOffset of a partition can be
// made to answer what a test says instead of the log's end.
type endLocal struct {
	*memstore.LocalLog
	mu  sync.Mutex
	end map[metadata.TopicPartition]func() (int64, error)
}

func newEndLocal() *endLocal {
	return &endLocal{LocalLog: memstore.NewLocalLog(), end: make(map[metadata.TopicPartition]func() (int64, error))}
}

// answer makes the next EndOffset of tp call fn instead of the log.
func (l *endLocal) answer(tp metadata.TopicPartition, fn func() (int64, error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end[tp] = fn
}

func (l *endLocal) EndOffset(tp metadata.TopicPartition) (int64, error) {
	l.mu.Lock()
	fn := l.end[tp]
	delete(l.end, tp)
	l.mu.Unlock()
	if fn != nil {
		return fn()
	}
	return l.LocalLog.EndOffset(tp)
}

// roleSubject is broker 1, whose transitions of tpA a test makes, over
// an endLocal; broker 2 exists only as the leader it is told of.
type roleSubject struct {
	n     *walstore.Node
	local *endLocal
	run   func() // starts Run, if not started
	stop  func() // ends Run and waits for it
}

// newRoleSubject makes broker 1's Node, not yet running.
func newRoleSubject(t *testing.T, w *world) *roleSubject {
	local := newEndLocal()
	n, err := walstore.NewNode(walstore.NodeConfig{
		BrokerID: 1, Store: w.store(1), Log: w.meta, Local: local, Logger: discard(),
		Interval: 10 * time.Millisecond, Backoff: walstore.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var once sync.Once
	s := &roleSubject{n: n, local: local}
	s.run = func() { once.Do(func() { go func() { done <- n.Run(ctx) }() }) }
	s.stop = func() {
		s.run()
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(func() {
		cancel()
		s.run()
	})
	return s
}

var (
	leadingAt5   = walstore.RoleState{Role: walstore.Leading, Epoch: 5, Leader: 1}
	followingAt5 = walstore.RoleState{Role: walstore.Following, Epoch: 5, Leader: 2}
	noRoleState  = walstore.RoleState{Role: walstore.NoRole, Epoch: -1, Leader: -1}
)

// into puts tpA at s into role: led at epoch 5 holding 0-9, or followed
// at 5 with broker 2 as leader.
func (s *roleSubject) into(t *testing.T, role walstore.Role) {
	ctx := t.Context()
	switch role {
	case walstore.Leading:
		require.NoError(t, s.local.AssignEpoch(tpA, 5, 0))
		require.NoError(t, s.n.BecomeLeader(ctx, tpA, 5, []int32{2}, -1))
		produce(t, s.n, s.local.LocalLog, tpA, 5, 0, 9)
	case walstore.Following:
		require.NoError(t, s.n.BecomeFollower(ctx, tpA, 5, 2))
	}
}

// requireRoleWorks checks that the role s has of tpA, want, works: a
// leadership accepts the next records and makes them durable.
func (s *roleSubject) requireRoleWorks(t *testing.T, want walstore.RoleState) {
	t.Helper()
	require.Equal(t, want, s.n.Role(tpA))
	if want.Role != walstore.Leading {
		assert.Equal(t, int64(-1), s.n.DurableOffset(tpA), "a partition not led has no durable offset")
		return
	}
	end, err := s.local.LocalLog.EndOffset(tpA)
	require.NoError(t, err)
	_ = s.local.AssignEpoch(tpA, want.Epoch, end) // a later epoch begins at the end; the same one goes on
	produce(t, s.n, s.local.LocalLog, tpA, want.Epoch, end, end+9)
	require.NoError(t, s.n.WaitDurable(within(t, time.Hour), tpA, want.Epoch, end+9))
	assert.Nil(t, s.n.PartitionError(tpA))
}

// roleCall is a transition of tpA at s.
type roleCall struct {
	name string
	do   func(ctx context.Context, s *roleSubject) error
}

func becomeLeaderAt(epoch int32) roleCall {
	return roleCall{name: "BecomeLeader", do: func(ctx context.Context, s *roleSubject) error {
		end, err := s.local.LocalLog.EndOffset(tpA)
		if err != nil {
			return err
		}
		_ = s.local.AssignEpoch(tpA, epoch, end) // as makeLeader leaves the log; refused if not later
		return s.n.BecomeLeader(ctx, tpA, epoch, []int32{2}, -1)
	}}
}

func becomeFollowerAt(epoch, leader int32) roleCall {
	return roleCall{name: "BecomeFollower", do: func(ctx context.Context, s *roleSubject) error {
		return s.n.BecomeFollower(ctx, tpA, epoch, leader)
	}}
}

var stopReplicaCall = roleCall{name: "StopReplica", do: func(ctx context.Context, s *roleSubject) error {
	return s.n.StopReplica(ctx, tpA)
}}

// TestAdversaryRolesEveryTransitionFromEveryRole makes every transition
// from every role at epochs below, at and above the role's, before Run
// and while it runs. One that takes effect gives the role it says; one
// that is refused is a *TransitionError saying the role in effect, and
// that role goes on working: a leadership still accepts records and
// makes them durable.
func TestAdversaryRolesEveryTransitionFromEveryRole(t *testing.T) {
	leadingAt := func(e int32) walstore.RoleState {
		return walstore.RoleState{Role: walstore.Leading, Epoch: e, Leader: 1}
	}
	followingAt := func(e, l int32) walstore.RoleState {
		return walstore.RoleState{Role: walstore.Following, Epoch: e, Leader: l}
	}
	for _, tc := range []struct {
		name string
		from walstore.Role
		call roleCall
		want walstore.RoleState // the role after; if refused, the one before
		is   error              // refused, matching is (errAny: any refusal)
	}{
		{name: "none, lead at 4", from: walstore.NoRole, call: becomeLeaderAt(4), want: leadingAt(4)},
		{name: "none, follow at 4", from: walstore.NoRole, call: becomeFollowerAt(4, 2), want: followingAt(4, 2)},
		{name: "none, stop", from: walstore.NoRole, call: stopReplicaCall, want: noRoleState},

		{name: "leading, lead at a lower epoch", from: walstore.Leading, call: becomeLeaderAt(4), want: leadingAt5, is: errAny},
		{name: "leading, lead at the same epoch", from: walstore.Leading, call: becomeLeaderAt(5), want: leadingAt5},
		{name: "leading, lead at a later epoch", from: walstore.Leading, call: becomeLeaderAt(6), want: leadingAt(6)},
		{name: "leading, follow at the same epoch", from: walstore.Leading, call: becomeFollowerAt(5, 2), want: followingAt(5, 2)},
		{name: "leading, follow at a later epoch", from: walstore.Leading, call: becomeFollowerAt(6, 2), want: followingAt(6, 2)},
		{name: "leading, follow itself", from: walstore.Leading, call: becomeFollowerAt(6, 1), want: leadingAt5, is: errAny},
		{name: "leading, stop", from: walstore.Leading, call: stopReplicaCall, want: noRoleState},

		{name: "following, lead at a lower epoch", from: walstore.Following, call: becomeLeaderAt(4), want: followingAt5, is: walstore.ErrStaleEpoch},
		{name: "following, lead at the same epoch", from: walstore.Following, call: becomeLeaderAt(5), want: followingAt5, is: walstore.ErrStaleEpoch},
		{name: "following, lead at a later epoch", from: walstore.Following, call: becomeLeaderAt(6), want: leadingAt(6)},
		{name: "following, follow at a lower epoch", from: walstore.Following, call: becomeFollowerAt(4, 2), want: followingAt5, is: walstore.ErrStaleEpoch},
		{name: "following, follow another at a lower epoch", from: walstore.Following, call: becomeFollowerAt(4, 3), want: followingAt5, is: walstore.ErrStaleEpoch},
		{name: "following, follow at the same epoch", from: walstore.Following, call: becomeFollowerAt(5, 2), want: followingAt5},
		{name: "following, follow at a later epoch", from: walstore.Following, call: becomeFollowerAt(6, 3), want: followingAt(6, 3)},
		{name: "following, stop", from: walstore.Following, call: stopReplicaCall, want: noRoleState},
	} {
		for _, phase := range []string{"before Run", "during Run"} {
			t.Run(tc.name+", "+phase, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := newRoleSubject(t, newWorld(t))
					if phase == "during Run" {
						s.run()
					}
					s.into(t, tc.from)
					before := s.n.Role(tpA)
					err := tc.call.do(t.Context(), s)
					if tc.is != nil {
						requireNotInEffect(t, s.n, tpA, err, before, nil)
						if tc.is != errAny {
							assert.ErrorIs(t, err, tc.is)
						}
						var te *walstore.TransitionError
						require.ErrorAs(t, err, &te)
						assert.Equal(t, tc.call.name, te.Transition)
					} else {
						require.NoError(t, err)
					}
					s.run()
					s.requireRoleWorks(t, tc.want)
				})
			})
		}
	}
}

// errAny marks a refusal whose cause a case does not pin.
var errAny = errors.New("any refusal")

// TestAdversaryRolesAfterRun makes every transition from every role after
// Run returned: BecomeLeader and BecomeFollower are refused with
// ErrStopped and change nothing; StopReplica succeeds and ends the role.
func TestAdversaryRolesAfterRun(t *testing.T) {
	for _, from := range []walstore.Role{walstore.NoRole, walstore.Leading, walstore.Following} {
		for _, call := range []roleCall{becomeLeaderAt(6), becomeFollowerAt(6, 2), becomeFollowerAt(5, 2), stopReplicaCall} {
			t.Run(from.String()+", "+call.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := newRoleSubject(t, newWorld(t))
					s.run()
					s.into(t, from)
					before := s.n.Role(tpA)
					s.stop()
					// A local-log call Run gave up on as it returned
					// still finishes on its own goroutine; until it has,
					// StopReplica is refused by design (see
					// TestAdversaryRolesStopReplicaAfterRunWithAStuckCall).
					synctest.Wait()
					err := call.do(t.Context(), s)
					if call.name == "StopReplica" {
						require.NoError(t, err)
						assert.Equal(t, noRoleState, s.n.Role(tpA))
						assert.Nil(t, s.n.PartitionError(tpA))
						// Again, and of a partition never held.
						require.NoError(t, s.n.StopReplica(t.Context(), tpA))
						require.NoError(t, s.n.StopReplica(t.Context(), tpB))
						return
					}
					requireNotInEffect(t, s.n, tpA, err, before, walstore.ErrStopped)
					assert.ErrorIs(t, s.n.Append(t.Context(), tpA, storage.Batch{}), walstore.ErrStopped)
				})
			})
		}
	}
}

// TestAdversaryRolesStopReplicaOfAnInvalidPartition: a partition no
// transition could have given a role is refused by StopReplica, before,
// during and after Run, and the valid partition's role is untouched.
func TestAdversaryRolesStopReplicaOfAnInvalidPartition(t *testing.T) {
	for _, phase := range []string{"before Run", "during Run", "after Run"} {
		t.Run(phase, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newRoleSubject(t, newWorld(t))
				if phase != "before Run" {
					s.run()
				}
				s.into(t, walstore.Leading)
				if phase == "after Run" {
					s.stop()
				}
				for _, tp := range []metadata.TopicPartition{{Topic: "", Partition: 0}, {Topic: "t", Partition: -1}, {Topic: "a/b", Partition: 0}} {
					err := s.n.StopReplica(t.Context(), tp)
					requireNotInEffect(t, s.n, tp, err, noRoleState, nil)
				}
				if phase == "after Run" {
					assert.Equal(t, leadingAt5, s.n.Role(tpA))
					return
				}
				s.run()
				s.requireRoleWorks(t, leadingAt5)
			})
		})
	}
}

// TestAdversaryRolesEndOffsetMisbehaves makes the EndOffset BecomeLeader
// reads fail, answer a negative end, or not answer before ctx ends, from
// every role (for an end below what is led, see
// TestAdversaryRolesEndOffsetBelowWhatIsLed): each is refused
// with a *DependencyError naming LocalLog.EndOffset, the role is
// unchanged and goes on working, and the next BecomeLeader, the log
// answering again, takes effect.
func TestAdversaryRolesEndOffsetMisbehaves(t *testing.T) {
	for _, tc := range []struct {
		name string
		// answer is EndOffset's answer; nil: it hangs until released.
		answer func() (int64, error)
		is     error
	}{
		{name: "fails", answer: func() (int64, error) { return 0, errInjected }, is: errInjected},
		{name: "negative", answer: func() (int64, error) { return -1, nil }, is: walstore.ErrContractViolation},
		{name: "far negative", answer: func() (int64, error) { return -1 << 62, nil }, is: walstore.ErrContractViolation},
		{name: "hangs until ctx ends", is: context.DeadlineExceeded},
	} {
		for _, from := range []walstore.Role{walstore.NoRole, walstore.Leading, walstore.Following} {
			t.Run(tc.name+", from "+from.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := newRoleSubject(t, newWorld(t))
					s.run()
					s.into(t, from)
					settle(time.Second) // the leadership's own reads of the log are done
					before := s.n.Role(tpA)
					ctx := t.Context()
					release := make(chan struct{})
					var once sync.Once
					t.Cleanup(func() { once.Do(func() { close(release) }) })
					answer := tc.answer
					if answer == nil {
						ctx = within(t, time.Minute)
						answer = func() (int64, error) { <-release; return 0, nil }
					}
					s.local.answer(tpA, answer)
					err := becomeLeaderAt(6).do(ctx, s)
					requireNotInEffect(t, s.n, tpA, err, before, tc.is)
					var de *walstore.DependencyError
					require.ErrorAs(t, err, &de)
					assert.Equal(t, "LocalLog.EndOffset", de.Dependency)
					if tc.answer == nil {
						assert.ErrorIs(t, err, storage.ErrUnavailable)
						// Until the call given up on returns, every
						// transition of tpA is refused at once, naming it;
						// tpB is not held up.
						for _, call := range []roleCall{becomeLeaderAt(7), becomeFollowerAt(7, 2), stopReplicaCall} {
							err := call.do(t.Context(), s)
							requireNotInEffect(t, s.n, tpA, err, before, storage.ErrUnavailable)
							require.ErrorAs(t, err, &de)
							assert.Equal(t, "LocalLog.EndOffset", de.Dependency)
						}
						require.NoError(t, s.local.AssignEpoch(tpB, 1, 0))
						require.NoError(t, s.n.BecomeLeader(t.Context(), tpB, 1, []int32{2}, -1))
						produce(t, s.n, s.local.LocalLog, tpB, 1, 0, 9)
						require.NoError(t, s.n.WaitDurable(within(t, time.Hour), tpB, 1, 9))
						require.NoError(t, s.n.StopReplica(t.Context(), tpB))
						if before.Role != walstore.NoRole {
							assert.Error(t, s.n.PartitionError(tpA), "a partition with a stuck call fails")
						}
						once.Do(func() { close(release) })
						synctest.Wait()
					}
					s.requireRoleWorks(t, before)
					require.NoError(t, becomeLeaderAt(8).do(t.Context(), s))
					s.requireRoleWorks(t, walstore.RoleState{Role: walstore.Leading, Epoch: 8, Leader: 1})
				})
			})
		}
	}
}

// TestAdversaryRolesRacingTransitionsAndCalls races transitions of one
// partition, and of another, with the calls a broker makes meanwhile
// (Append, WaitDurable, WaitReplicated, RecordProgress), an EndOffset
// failing now and then. Whatever the order, every call returns, Role is
// one a transition made, a refusal says the role in effect, and what
// WaitDurable acknowledged reaches the follower of the next epoch.
func TestAdversaryRolesRacingTransitionsAndCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		local1 := newEndLocal()
		n1 := w.start(1, walstore.NodeConfig{Local: local1})
		log2 := memstore.NewLocalLog()
		n2 := w.start(2, walstore.NodeConfig{Local: log2})
		for _, tp := range []metadata.TopicPartition{tpA, tpB} {
			require.NoError(t, local1.AssignEpoch(tp, 1, 0))
			require.NoError(t, n1.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
			require.NoError(t, n2.BecomeFollower(ctx, tp, 1, 1))
		}
		produce(t, n1, local1.LocalLog, tpA, 1, 0, 9)
		require.NoError(t, n1.WaitDurable(within(t, time.Hour), tpA, 1, 9))
		// Broker 2 applies them: the controller elects only an in-sync
		// replica, which holds what was acknowledged.
		settle(time.Second)

		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		record := func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		// The broker's own calls of tpA at epoch 1, racing the transitions.
		wg.Go(func() {
			b := clustertest.MakeBatch(tpA, 1, 10, 19)
			if err := local1.LocalLog.Append(ctx, tpA, []storage.Batch{b}); err != nil {
				return
			}
			if n1.Append(ctx, tpA, b) == nil {
				_ = n1.WaitDurable(within(t, time.Minute), tpA, 1, 19)
			}
		})
		wg.Go(func() { _ = n1.WaitReplicated(within(t, time.Minute), tpA, 1, 9) })
		wg.Go(func() {
			n1.RecordProgress(walstore.Progress{Partition: tpA, Leader: 1, Follower: 2, EndOffset: 10, LastEpoch: 1})
		})
		// The transitions: tpA re-elected, then handed over; tpB stopped
		// and led again; one EndOffset fails.
		local1.answer(tpB, func() (int64, error) { return 0, errInjected })
		for _, c := range []func() error{
			func() error { return n1.BecomeLeader(ctx, tpA, 2, []int32{2}, -1) },
			func() error { return n1.BecomeFollower(ctx, tpA, 3, 2) },
			func() error { return n1.BecomeLeader(ctx, tpB, 2, []int32{2}, -1) },
			func() error { return n1.StopReplica(ctx, tpB) },
			func() error { return n1.StopReplica(within(t, time.Millisecond), tpA) },
		} {
			wg.Go(func() { record(c()) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				var te *walstore.TransitionError
				require.ErrorAs(t, err, &te)
				assert.NotEqual(t, walstore.RoleState{}, te.InEffect)
			}
		}
		for _, tp := range []metadata.TopicPartition{tpA, tpB} {
			switch r := n1.Role(tp); r.Role {
			case walstore.Leading:
				assert.Equal(t, int32(1), r.Leader)
			case walstore.Following:
				assert.Equal(t, walstore.RoleState{Role: walstore.Following, Epoch: 3, Leader: 2}, r)
			}
		}

		// Broker 2 takes tpA over at epoch 4; broker 1 follows it there.
		// The records WaitDurable acknowledged at epoch 1 are on both.
		end, err := log2.EndOffset(tpA)
		require.NoError(t, err)
		require.NoError(t, log2.AssignEpoch(tpA, 4, end))
		require.NoError(t, n1.StopReplica(ctx, tpA))
		require.NoError(t, n2.BecomeLeader(ctx, tpA, 4, []int32{1}, 0))
		require.NoError(t, n1.BecomeFollower(ctx, tpA, 4, 2))
		produce(t, n2, log2, tpA, 4, end, end+9)
		require.NoError(t, n2.WaitReplicated(within(t, time.Hour), tpA, 4, end+9))
		got := local1.LocalLog.Batches(tpA)
		require.NotEmpty(t, got)
		assert.Equal(t, int64(0), got[0].FirstOffset)
		requireSameLog(t, log2, local1.LocalLog, tpA)
		assert.GreaterOrEqual(t, end, int64(10), "the acknowledged records 0-9 survive the re-election")
	})
}

// TestAdversaryRolesAcknowledgedSurvivesRefusedReelection: a re-election
// whose first BecomeLeader is refused (the new leader's EndOffset fails)
// and tried again loses nothing WaitDurable acknowledged under the old
// leader, who meanwhile tried to step down with a context that ended.
func TestAdversaryRolesAcknowledgedSurvivesRefusedReelection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1 := memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		local2 := newEndLocal()
		n2 := w.start(2, walstore.NodeConfig{Local: local2})
		log3 := memstore.NewLocalLog()
		n3 := w.start(3, walstore.NodeConfig{Local: log3})
		require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2, 3}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		require.NoError(t, n3.BecomeFollower(ctx, tpA, 1, 1))
		produce(t, n1, log1, tpA, 1, 0, 9)
		require.NoError(t, n1.WaitDurable(within(t, time.Hour), tpA, 1, 9))
		settle(time.Second) // the followers apply what was published

		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		requireNotInEffect(t, n1, tpA, n1.BecomeFollower(cancelled, tpA, 2, 2),
			walstore.RoleState{Role: walstore.Leading, Epoch: 1, Leader: 1}, context.Canceled)
		require.NoError(t, n1.BecomeFollower(ctx, tpA, 2, 2))

		end, err := local2.LocalLog.EndOffset(tpA)
		require.NoError(t, err)
		require.Equal(t, int64(10), end)
		require.NoError(t, local2.AssignEpoch(tpA, 2, end))
		local2.answer(tpA, func() (int64, error) { return 0, errInjected })
		requireNotInEffect(t, n2, tpA, n2.BecomeLeader(ctx, tpA, 2, []int32{1, 3}, -1),
			walstore.RoleState{Role: walstore.Following, Epoch: 1, Leader: 1}, errInjected)
		require.NoError(t, n3.BecomeFollower(ctx, tpA, 2, 2))
		require.NoError(t, n2.BecomeLeader(ctx, tpA, 2, []int32{1, 3}, -1))
		produce(t, n2, local2.LocalLog, tpA, 2, 10, 19)
		require.NoError(t, n2.WaitReplicated(within(t, time.Hour), tpA, 2, 19))
		requireSameLog(t, local2.LocalLog, log1, tpA)
		requireSameLog(t, local2.LocalLog, log3, tpA)
		assert.Equal(t, int64(0), log3.Batches(tpA)[0].FirstOffset)
	})
}

// TestAdversaryRolesEndOffsetBelowWhatIsLed: re-elected at a later epoch,
// a leader whose log says it ends below what it accepted and made durable
// (a log that lost acknowledged records, which its contract forbids)
// must not begin a leadership there: its markers would make the
// followers of the new epoch truncate records WaitDurable acknowledged.
func TestAdversaryRolesEndOffsetBelowWhatIsLed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRoleSubject(t, newWorld(t))
		s.run()
		s.into(t, walstore.Leading)
		require.NoError(t, s.n.WaitDurable(within(t, time.Hour), tpA, 5, 9))
		settle(time.Second)
		s.local.answer(tpA, func() (int64, error) { return 3, nil })
		err := becomeLeaderAt(6).do(t.Context(), s)
		requireNotInEffect(t, s.n, tpA, err, leadingAt5, walstore.ErrContractViolation)
		var de *walstore.DependencyError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, "LocalLog.EndOffset", de.Dependency)
		assert.Equal(t, int64(10), s.n.DurableOffset(tpA), "the leadership goes on")
		s.requireRoleWorks(t, leadingAt5)
	})
}

// TestAdversaryRolesWaitForTheTransitionInFlight: while a BecomeLeader of
// tpA waits on its EndOffset, another transition of tpA waits its turn
// and gives up when its context ends, changing nothing; one of tpB goes
// ahead; the leadership in effect still accepts records meanwhile; and
// the BecomeLeader in flight, once the log answers, takes effect.
// (Appending to the Node what the local log does not hold, a broker
// breaking its contract, makes that BecomeLeader refused instead, its
// log end below what the leadership accepted: before, it began a new
// leadership there, whose markers truncated what WaitDurable had
// acknowledged.)
func TestAdversaryRolesWaitForTheTransitionInFlight(t *testing.T) {
	// The waiting BecomeLeader does not take epoch 7 in the log first: it
	// never gets to read the log.
	becomeLeader := roleCall{name: "BecomeLeader", do: func(ctx context.Context, s *roleSubject) error {
		return s.n.BecomeLeader(ctx, tpA, 7, []int32{2}, -1)
	}}
	for _, call := range []roleCall{becomeLeader, becomeFollowerAt(7, 2), stopReplicaCall} {
		t.Run(call.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newRoleSubject(t, newWorld(t))
				s.run()
				s.into(t, walstore.Leading)
				settle(time.Second)
				release := make(chan struct{})
				var once sync.Once
				t.Cleanup(func() { once.Do(func() { close(release) }) })
				s.local.answer(tpA, func() (int64, error) { <-release; return s.local.LocalLog.EndOffset(tpA) })
				inFlight := make(chan error, 1)
				go func() { inFlight <- s.n.BecomeLeader(t.Context(), tpA, 6, []int32{2}, -1) }()
				synctest.Wait()

				err := call.do(within(t, time.Second), s)
				requireNotInEffect(t, s.n, tpA, err, leadingAt5, context.DeadlineExceeded)
				require.NoError(t, s.local.AssignEpoch(tpB, 1, 0))
				require.NoError(t, s.n.BecomeLeader(t.Context(), tpB, 1, []int32{2}, -1))
				// The leadership at 5 goes on while the transition waits.
				produce(t, s.n, s.local.LocalLog, tpA, 5, 10, 14)
				require.NoError(t, s.n.WaitDurable(within(t, time.Hour), tpA, 5, 14))

				// The broker takes epoch 6 at its log's end, and the log
				// answers.
				require.NoError(t, s.local.AssignEpoch(tpA, 6, 15))
				once.Do(func() { close(release) })
				require.NoError(t, <-inFlight)
				assert.Equal(t, walstore.RoleState{Role: walstore.Leading, Epoch: 6, Leader: 1}, s.n.Role(tpA))
				assert.Equal(t, int64(15), s.n.DurableOffset(tpA), "what was durable at 5 stays so at 6")
			})
		})
	}
}

// TestAdversaryRolesEndOffsetAnswersAsCtxEnds: an EndOffset that answers
// as BecomeLeader's context ends is refused as one that did not answer
// in time, a *DependencyError naming LocalLog.EndOffset, whether the call
// was given up on first or its answer came first; the role is unchanged.
// The answer that came first was once refused with the bare context
// error, which named no dependency. Which comes first is the scheduler's
// choice: run it with -count to see both.
func TestAdversaryRolesEndOffsetAnswersAsCtxEnds(t *testing.T) {
	for _, from := range []walstore.Role{walstore.Leading, walstore.Following} {
		t.Run(from.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newRoleSubject(t, newWorld(t))
				s.run()
				s.into(t, from)
				settle(time.Second)
				before := s.n.Role(tpA)
				ctx := within(t, time.Minute)
				ended := make(chan struct{})
				context.AfterFunc(ctx, func() { close(ended) })
				s.local.answer(tpA, func() (int64, error) {
					<-ended
					return s.local.LocalLog.EndOffset(tpA)
				})
				err := becomeLeaderAt(6).do(ctx, s)
				synctest.Wait() // the call given up on, if it was, has returned
				requireNotInEffect(t, s.n, tpA, err, before, context.DeadlineExceeded)
				assert.ErrorIs(t, err, storage.ErrUnavailable)
				var de *walstore.DependencyError
				require.ErrorAs(t, err, &de)
				assert.Equal(t, "LocalLog.EndOffset", de.Dependency)
				s.requireRoleWorks(t, before)
			})
		})
	}
}

// TestAdversaryRolesStopReplicaAfterRunWithAStuckCall: after Run has
// returned, StopReplica of a partition whose EndOffset given up on has
// not returned is refused (the call may still act on the log), naming
// the call; once it returns, StopReplica succeeds and the partition's
// failure ends with its role.
func TestAdversaryRolesStopReplicaAfterRunWithAStuckCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newRoleSubject(t, newWorld(t))
		s.run()
		s.into(t, walstore.Following)
		settle(time.Second)
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		s.local.answer(tpA, func() (int64, error) { <-release; return 0, nil })
		err := becomeLeaderAt(6).do(within(t, time.Minute), s)
		requireNotInEffect(t, s.n, tpA, err, followingAt5, context.DeadlineExceeded)
		s.stop()

		err = s.n.StopReplica(t.Context(), tpA)
		requireNotInEffect(t, s.n, tpA, err, followingAt5, storage.ErrUnavailable)
		var de *walstore.DependencyError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, "LocalLog.EndOffset", de.Dependency)
		assert.Error(t, s.n.PartitionError(tpA))

		once.Do(func() { close(release) })
		synctest.Wait()
		require.NoError(t, s.n.StopReplica(t.Context(), tpA))
		assert.Equal(t, noRoleState, s.n.Role(tpA))
		assert.Nil(t, s.n.PartitionError(tpA))
		assert.Empty(t, s.n.Health().Partitions)
	})
}
