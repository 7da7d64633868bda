package walstore_test

import (
	"context"
	"fmt"
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

// trapLocal is a local log whose calls of a partition can be made to fail
// (a number of calls in a row, or every call) or to hang until released
// or their context ends.
type trapLocal struct {
	*memstore.LocalLog
	mu   sync.Mutex
	fail map[trapKey]int // calls still to fail; negative: every call
	hang map[trapKey]chan struct{}
}

type trapKey struct {
	method string
	tp     metadata.TopicPartition
}

func newTrapLocal() *trapLocal {
	return &trapLocal{LocalLog: memstore.NewLocalLog(), fail: make(map[trapKey]int), hang: make(map[trapKey]chan struct{})}
}

// failing makes the next n calls of method for tp fail (n < 0: every
// call, until failing is called again).
func (l *trapLocal) failing(method string, tp metadata.TopicPartition, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail[trapKey{method, tp}] = n
}

// hanging makes the calls of method for tp wait, until the returned
// function is called or their context ends.
func (l *trapLocal) hanging(method string, tp metadata.TopicPartition) (release func()) {
	gate := make(chan struct{})
	l.mu.Lock()
	l.hang[trapKey{method, tp}] = gate
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.hang, trapKey{method, tp})
			l.mu.Unlock()
			close(gate)
		})
	}
}

func (l *trapLocal) trap(ctx context.Context, method string, tp metadata.TopicPartition) error {
	k := trapKey{method, tp}
	l.mu.Lock()
	gate, n := l.hang[k], l.fail[k]
	if n > 0 {
		l.fail[k] = n - 1
	}
	l.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if n != 0 {
		return fmt.Errorf("%s of %s: %w", method, tp, errInjected)
	}
	return nil
}

func (l *trapLocal) EndOffset(tp metadata.TopicPartition) (int64, error) {
	if err := l.trap(context.Background(), "EndOffset", tp); err != nil {
		return 0, err
	}
	return l.LocalLog.EndOffset(tp)
}

func (l *trapLocal) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	if err := l.trap(context.Background(), "Epochs", tp); err != nil {
		return nil, err
	}
	return l.LocalLog.Epochs(tp)
}

func (l *trapLocal) Append(ctx context.Context, tp metadata.TopicPartition, bs []storage.Batch) error {
	if err := l.trap(ctx, "Append", tp); err != nil {
		return err
	}
	return l.LocalLog.Append(ctx, tp, bs)
}

func (l *trapLocal) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	if err := l.trap(ctx, "Truncate", tp); err != nil {
		return err
	}
	return l.LocalLog.Truncate(ctx, tp, offset)
}

func (l *trapLocal) Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	if err := l.trap(ctx, "Read", tp); err != nil {
		return nil, err
	}
	return l.LocalLog.Read(ctx, tp, from, maxBytes)
}

// within returns a context that ends after d (of the bubble's time), so
// that a wait that would never end fails instead of running time forward
// for ever.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// requireNotInEffect checks that err is a *TransitionError that says the
// role want is still in effect, as Node.Role says, and matches is.
func requireNotInEffect(t *testing.T, n *walstore.Node, tp metadata.TopicPartition, err error, want walstore.RoleState, is error) {
	t.Helper()
	var te *walstore.TransitionError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, want, te.InEffect, "the role in effect")
	assert.Equal(t, tp, te.Partition)
	assert.Contains(t, err.Error(), "still "+want.String())
	assert.Equal(t, want, n.Role(tp), "Node.Role")
	if is != nil {
		assert.ErrorIs(t, err, is)
	}
}

// hangTransition starts transition, a transition of tpA at the broker of
// local, which hangs in local's EndOffset of tpA for a minute, then gives
// up, the log answering again.
func hangTransition(t *testing.T, local *trapLocal, transition func(ctx context.Context) error) {
	release := local.hanging("EndOffset", tpA)
	t.Cleanup(release)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	context.AfterFunc(ctx, release)
	done := make(chan error, 1)
	go func() { done <- transition(ctx) }()
	t.Cleanup(func() { <-done })
	settle(time.Second)
}

// twoBrokers starts broker 1 leading tpA and tpB at epoch 1 and broker 2
// following both over local, with 0-9 of tpA replicated.
func twoBrokers(t *testing.T, cfg2 walstore.NodeConfig) (w *world, n1, n2 *walstore.Node, log1 *memstore.LocalLog) {
	ctx := t.Context()
	w = newWorld(t)
	log1 = memstore.NewLocalLog()
	n1 = w.start(1, walstore.NodeConfig{Local: log1})
	n2 = w.start(2, cfg2)
	for _, tp := range []metadata.TopicPartition{tpA, tpB} {
		require.NoError(t, log1.AssignEpoch(tp, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tp, 1, 1))
	}
	produce(t, n1, log1, tpA, 1, 0, 9)
	require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 9))
	return w, n1, n2, log1
}

// A BecomeLeader that is refused, or gives up, leaves the partition
// followed: it validates and prepares before it stops following. It once
// stopped following first, so a refusal left the partition neither
// followed nor led.
func TestContractRefusedBecomeLeaderKeepsFollowing(t *testing.T) {
	following := walstore.RoleState{Role: walstore.Following, Epoch: 1, Leader: 1}
	for _, tc := range []struct {
		name      string
		epoch     int32
		followers []int32
		// prepare sets the trap, and returns the context to call with.
		prepare func(t *testing.T, local *trapLocal, n1, n2 *walstore.Node, log1 *memstore.LocalLog) context.Context
		is      error
	}{
		{name: "this broker among the followers", epoch: 2, followers: []int32{2}},
		{name: "a negative follower", epoch: 2, followers: []int32{-1, 1}},
		{name: "a negative epoch", epoch: -1, followers: []int32{1}},
		{name: "the epoch it follows", epoch: 1, followers: []int32{1}, is: walstore.ErrStaleEpoch},
		{name: "LocalLog.EndOffset fails", epoch: 2, followers: []int32{1}, is: errInjected,
			prepare: func(t *testing.T, local *trapLocal, _, _ *walstore.Node, _ *memstore.LocalLog) context.Context {
				local.failing("EndOffset", tpA, 1)
				return t.Context()
			}},
		{name: "context already cancelled", epoch: 2, followers: []int32{1}, is: context.Canceled,
			prepare: func(t *testing.T, _ *trapLocal, _, _ *walstore.Node, _ *memstore.LocalLog) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return ctx
			}},
		// A transition waits only for the partition's own: one of another
		// partition, or its local-log call, does not hold it up.
		{name: "context ends while another transition of the partition hangs", epoch: 2, followers: []int32{1}, is: context.DeadlineExceeded,
			prepare: func(t *testing.T, local *trapLocal, _, n2 *walstore.Node, _ *memstore.LocalLog) context.Context {
				hangTransition(t, local, func(ctx context.Context) error { return n2.BecomeLeader(ctx, tpA, 2, []int32{1}, -1) })
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				t.Cleanup(cancel)
				return ctx
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				local := newTrapLocal()
				cfg := walstore.NodeConfig{Local: local}
				cfg.LocalTimeout = 10 * time.Minute
				_, n1, n2, log1 := twoBrokers(t, cfg)
				ctx := t.Context()
				if tc.prepare != nil {
					ctx = tc.prepare(t, local, n1, n2, log1)
				}
				err := n2.BecomeLeader(ctx, tpA, tc.epoch, tc.followers, -1)
				requireNotInEffect(t, n2, tpA, err, following, tc.is)

				// Still following: broker 1's next records reach it.
				produce(t, n1, log1, tpA, 1, 10, 19)
				require.NoError(t, n1.WaitReplicated(within(t, 30*time.Minute), tpA, 1, 19))
				requireSameLog(t, log1, local.LocalLog, tpA)
			})
		})
	}
}

// A BecomeFollower or StopReplica that is refused, or gives up, leaves
// the partition led: resigning, which cannot be undone, comes after every
// step that can fail or wait. BecomeFollower once resigned first, then
// waited for the follower engine: a context that ended meanwhile left
// the partition neither led nor followed, with an error that did not say
// the leadership was gone.
func TestContractGivenUpBecomeFollowerKeepsLeading(t *testing.T) {
	leading := walstore.RoleState{Role: walstore.Leading, Epoch: 1, Leader: 1}
	type call func(ctx context.Context, n *walstore.Node) error
	becomeFollower := func(epoch, leader int32) call {
		return func(ctx context.Context, n *walstore.Node) error { return n.BecomeFollower(ctx, tpA, epoch, leader) }
	}
	stopReplica := func(ctx context.Context, n *walstore.Node) error { return n.StopReplica(ctx, tpA) }
	cancelled := func(t *testing.T, _ *trapLocal, _, _ *walstore.Node, _ *memstore.LocalLog) context.Context {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		return ctx
	}
	// hung makes another transition of tpA at broker 1 hang in its local
	// log: a transition waits only for the partition's own, not for one
	// of another partition, nor for its local-log calls.
	hung := func(t *testing.T, local *trapLocal, n1, _ *walstore.Node, _ *memstore.LocalLog) context.Context {
		hangTransition(t, local, func(ctx context.Context) error { return n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1) })
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	for _, tc := range []struct {
		name    string
		call    call
		prepare func(t *testing.T, local *trapLocal, n1, n2 *walstore.Node, log2 *memstore.LocalLog) context.Context
		is      error
	}{
		{name: "BecomeFollower led by this broker", call: becomeFollower(2, 1)},
		{name: "BecomeFollower with a negative leader", call: becomeFollower(2, -1)},
		{name: "BecomeFollower at a negative epoch", call: becomeFollower(-1, 2)},
		{name: "BecomeFollower with a cancelled context", call: becomeFollower(2, 2), prepare: cancelled, is: context.Canceled},
		{name: "BecomeFollower while an append hangs", call: becomeFollower(2, 2), prepare: hung, is: context.DeadlineExceeded},
		{name: "StopReplica with a cancelled context", call: stopReplica, prepare: cancelled, is: context.Canceled},
		{name: "StopReplica while an append hangs", call: stopReplica, prepare: hung, is: context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				local, log2 := newTrapLocal(), memstore.NewLocalLog()
				cfg := walstore.NodeConfig{Local: local}
				cfg.LocalTimeout = 10 * time.Minute
				n1 := w.start(1, cfg)
				n2 := w.start(2, walstore.NodeConfig{Local: log2})
				// Broker 1 leads tpA; broker 2 leads tpB, which broker 1
				// follows.
				require.NoError(t, local.AssignEpoch(tpA, 1, 0))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
				require.NoError(t, log2.AssignEpoch(tpB, 1, 0))
				require.NoError(t, n2.BecomeLeader(ctx, tpB, 1, []int32{1}, -1))
				require.NoError(t, n1.BecomeFollower(ctx, tpB, 1, 2))
				produce(t, n1, local.LocalLog, tpA, 1, 0, 9)
				require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 9))

				callCtx := ctx
				if tc.prepare != nil {
					callCtx = tc.prepare(t, local, n1, n2, log2)
				}
				requireNotInEffect(t, n1, tpA, tc.call(callCtx, n1), leading, tc.is)

				// Still leading: the next records are accepted and
				// replicated.
				produce(t, n1, local.LocalLog, tpA, 1, 10, 19)
				require.NoError(t, n1.WaitReplicated(within(t, 30*time.Minute), tpA, 1, 19))
				requireSameLog(t, local.LocalLog, log2, tpA)
			})
		})
	}
}
