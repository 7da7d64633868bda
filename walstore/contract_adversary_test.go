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

// The transitions as an adversary calls them: from every role, with a
// context already cancelled, after Run returned, on a local log that
// fails each call once, while other goroutines append and wait.

// roleFixture puts a partition of broker 1 in a role: none, leading at
// epoch 1, or following broker 2 at epoch 1.
type roleFixture struct {
	name  string
	state walstore.RoleState
	put   func(ctx context.Context, t *testing.T, n *walstore.Node, local *memstore.LocalLog, tp metadata.TopicPartition)
}

var roleFixtures = []roleFixture{
	{"none", walstore.RoleState{Role: walstore.NoRole, Epoch: -1, Leader: -1},
		func(context.Context, *testing.T, *walstore.Node, *memstore.LocalLog, metadata.TopicPartition) {}},
	{"leading", walstore.RoleState{Role: walstore.Leading, Epoch: 1, Leader: 1},
		func(ctx context.Context, t *testing.T, n *walstore.Node, local *memstore.LocalLog, tp metadata.TopicPartition) {
			require.NoError(t, local.AssignEpoch(tp, 1, 0))
			require.NoError(t, n.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
		}},
	{"following", walstore.RoleState{Role: walstore.Following, Epoch: 1, Leader: 2},
		func(ctx context.Context, t *testing.T, n *walstore.Node, _ *memstore.LocalLog, tp metadata.TopicPartition) {
			require.NoError(t, n.BecomeFollower(ctx, tp, 1, 2))
		}},
}

// transitionCalls are the three transitions, each to epoch 5 where it
// names one.
var transitionCalls = []struct {
	name string
	call func(ctx context.Context, n *walstore.Node, tp metadata.TopicPartition) error
}{
	{"BecomeLeader", func(ctx context.Context, n *walstore.Node, tp metadata.TopicPartition) error {
		return n.BecomeLeader(ctx, tp, 5, []int32{2}, -1)
	}},
	{"BecomeFollower", func(ctx context.Context, n *walstore.Node, tp metadata.TopicPartition) error {
		return n.BecomeFollower(ctx, tp, 5, 2)
	}},
	{"StopReplica", func(ctx context.Context, n *walstore.Node, tp metadata.TopicPartition) error {
		return n.StopReplica(ctx, tp)
	}},
}

// Every transition, from every role, with a context already cancelled is
// refused, every time, and changes nothing; the same call with a live
// context then takes effect.
func TestContractEveryTransitionWithACancelledContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		local := memstore.NewLocalLog()
		n := w.start(1, walstore.NodeConfig{Local: local})
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		i := int32(0)
		for _, from := range roleFixtures {
			for _, tr := range transitionCalls {
				tp := metadata.TopicPartition{Topic: "cancelled", Partition: i}
				i++
				from.put(ctx, t, n, local, tp)
				for range 10 { // a random choice between a free lock and an ended context would show
					err := tr.call(cancelled, n, tp)
					requireNotInEffect(t, n, tp, err, from.state, context.Canceled)
				}
				end, err := local.EndOffset(tp)
				require.NoError(t, err)
				require.NoError(t, local.AssignEpoch(tp, 5, end))
				require.NoError(t, tr.call(ctx, n, tp), "%s from %s with a live context", tr.name, from.name)
				assert.Equal(t, map[string]walstore.Role{"BecomeLeader": walstore.Leading, "BecomeFollower": walstore.Following, "StopReplica": walstore.NoRole}[tr.name],
					n.Role(tp).Role, "%s from %s", tr.name, from.name)
			}
		}
	})
}

// After Run has returned, BecomeLeader and BecomeFollower are refused
// with ErrStopped, from every role, leaving it as it was; StopReplica
// succeeds; Append and the waits fail with ErrStopped; the queries
// answer.
func TestContractCallsAfterRunReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		local := memstore.NewLocalLog()
		n, err := walstore.NewNode(walstore.NodeConfig{BrokerID: 1, Store: w.store(1), Log: w.meta, Local: local, Logger: discard()})
		require.NoError(t, err)
		runCtx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- n.Run(runCtx) }()
		tps := make([]metadata.TopicPartition, len(roleFixtures))
		for i, from := range roleFixtures {
			tps[i] = metadata.TopicPartition{Topic: "stopped", Partition: int32(i)}
			from.put(ctx, t, n, local, tps[i])
		}
		settle(time.Second)
		stop()
		require.NoError(t, <-ran)

		for i, from := range roleFixtures {
			tp := tps[i]
			for _, tr := range transitionCalls[:2] {
				requireNotInEffect(t, n, tp, tr.call(ctx, n, tp), from.state, walstore.ErrStopped)
			}
			require.NoError(t, n.StopReplica(ctx, tp), "StopReplica from %s", from.name)
			assert.Equal(t, walstore.NoRole, n.Role(tp).Role)
			require.ErrorIs(t, n.Append(ctx, tp, clustertest.MakeBatch(tp, 1, 0, 0)), walstore.ErrStopped)
			require.ErrorIs(t, n.WaitDurable(ctx, tp, 1, 0), walstore.ErrStopped)
			require.ErrorIs(t, n.WaitReplicated(ctx, tp, 1, 0), walstore.ErrStopped)
			assert.NoError(t, n.PartitionError(tp))
		}
		assert.True(t, n.Health().Healthy())
		_ = n.Stats()
	})
}

// On a local log whose every call fails once each time the broker
// changes a role, each transition either takes effect or is refused with
// the role before it still in effect (a broker retries it), and the two
// brokers end with the same log, healthy.
func TestContractTransitionsOnALocalLogThatFailsEachCallOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		local1, local2 := newTrapLocal(), newTrapLocal()
		n1 := w.start(1, walstore.NodeConfig{Local: local1})
		n2 := w.start(2, walstore.NodeConfig{Local: local2})
		nodes := map[int32]*walstore.Node{1: n1, 2: n2}
		locals := map[int32]*trapLocal{1: local1, 2: local2}
		armAll := func() {
			for _, l := range locals {
				for _, m := range []string{"EndOffset", "Epochs", "Append", "Truncate", "Read"} {
					l.failing(m, tpA, 1)
				}
			}
		}
		// retry makes call until it takes effect; every refusal must leave
		// the role as it was.
		refusals := 0
		retry := func(id int32, call func(ctx context.Context, n *walstore.Node) error) {
			t.Helper()
			n := nodes[id]
			for attempt := 0; ; attempt++ {
				require.Less(t, attempt, 10, "broker %d's transition never took effect", id)
				before := n.Role(tpA)
				err := call(ctx, n)
				if err == nil {
					return
				}
				refusals++
				requireNotInEffect(t, n, tpA, err, before, errInjected)
			}
		}
		lead := func(id int32, epoch int32, other int32) {
			local := locals[id].LocalLog
			end, err := local.EndOffset(tpA)
			require.NoError(t, err)
			require.NoError(t, local.AssignEpoch(tpA, epoch, end))
			armAll()
			retry(other, func(ctx context.Context, n *walstore.Node) error { return n.BecomeFollower(ctx, tpA, epoch, id) })
			retry(id, func(ctx context.Context, n *walstore.Node) error {
				return n.BecomeLeader(ctx, tpA, epoch, []int32{other}, 0)
			})
		}
		next := int64(0)
		produceAt := func(id int32, epoch int32) {
			produce(t, nodes[id], locals[id].LocalLog, tpA, epoch, next, next+9)
			require.NoError(t, nodes[id].WaitReplicated(within(t, time.Hour), tpA, epoch, next+9))
			next += 10
		}
		lead(1, 1, 2)
		produceAt(1, 1)
		lead(2, 2, 1)
		produceAt(2, 2)
		lead(1, 3, 2)
		produceAt(1, 3)
		armAll()
		retry(2, func(ctx context.Context, n *walstore.Node) error { return n.StopReplica(ctx, tpA) })
		settle(time.Minute)
		assert.Positive(t, refusals, "some transition met a failure")
		requireSameLog(t, local1.LocalLog, local2.LocalLog, tpA)
		for id, n := range nodes {
			assert.True(t, n.Health().Healthy(), "broker %d: %v", id, n.Health().Partitions)
		}
	})
}

// Transitions of a partition while other goroutines wait for its records
// and append to another: every wait ends, with nil or ErrNotLeader, and
// every record a wait acknowledged is on the follower at the end. The
// broker's own lock orders its local appends with its role changes, as
// Kafka's leaderIsrUpdateLock does; the waits run outside it.
func TestContractTransitionsInterleavedWithAppendsAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log1, log2 := memstore.NewLocalLog(), memstore.NewLocalLog()
		n1 := w.start(1, walstore.NodeConfig{Local: log1})
		n2 := w.start(2, walstore.NodeConfig{Local: log2})

		var mu sync.Mutex // the broker's partition lock
		epoch := int32(0) // tpA's leader epoch while broker 1 leads it, else 0
		lead := func(e int32) {
			mu.Lock()
			defer mu.Unlock()
			end, err := log1.EndOffset(tpA)
			require.NoError(t, err)
			from, err := log2.EndOffset(tpA) // what the follower lacks, as its fetches tell
			require.NoError(t, err)
			require.NoError(t, log1.AssignEpoch(tpA, e, end))
			require.NoError(t, n1.BecomeLeader(ctx, tpA, e, []int32{2}, from))
			require.NoError(t, n2.BecomeFollower(ctx, tpA, e, 1))
			epoch = e
		}
		resign := func(e int32) {
			mu.Lock()
			defer mu.Unlock()
			require.NoError(t, n1.BecomeFollower(ctx, tpA, e, 2))
			epoch = 0
		}
		require.NoError(t, log1.AssignEpoch(tpB, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpB, 1, []int32{2}, -1))
		require.NoError(t, n2.BecomeFollower(ctx, tpB, 1, 1))
		lead(1)

		type acked struct {
			epoch int32
			last  int64
		}
		var (
			wg      sync.WaitGroup
			ackedMu sync.Mutex
			acks    []acked
			waits   int
		)
		stop := make(chan struct{})
		// tpA's producer: appends under the broker's lock while leading,
		// then waits outside it, in a goroutine of its own per batch.
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(3 * time.Millisecond):
				}
				mu.Lock()
				e := epoch
				var last int64
				err := func() error {
					if e == 0 {
						return nil
					}
					first, err := log1.EndOffset(tpA)
					if err != nil {
						return err
					}
					last = first + 1
					b := clustertest.MakeBatch(tpA, e, first, last)
					if err := log1.Append(ctx, tpA, []storage.Batch{b}); err != nil {
						return err
					}
					return n1.Append(ctx, tpA, b)
				}()
				mu.Unlock()
				if !assert.NoError(t, err, "appending to tpA at epoch %d", e) {
					return
				}
				if e == 0 {
					continue
				}
				wg.Go(func() {
					err := n1.WaitReplicated(within(t, time.Hour), tpA, e, last)
					ackedMu.Lock()
					defer ackedMu.Unlock()
					waits++
					switch {
					case err == nil:
						acks = append(acks, acked{e, last})
					case !errors.Is(err, walstore.ErrNotLeader):
						t.Errorf("a wait of epoch %d ended with %v", e, err)
					}
				})
			}
		})
		// tpB's producer appends without pause, never waiting for tpA's
		// transitions.
		wg.Go(func() {
			for off := int64(0); ; off += 2 {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				b := clustertest.MakeBatch(tpB, 1, off, off+1)
				if !assert.NoError(t, log1.Append(ctx, tpB, []storage.Batch{b})) || !assert.NoError(t, n1.Append(ctx, tpB, b)) {
					return
				}
			}
		})
		for e := int32(2); e < 20; e += 2 {
			time.Sleep(20 * time.Millisecond)
			resign(e)
			time.Sleep(7 * time.Millisecond)
			lead(e + 1)
		}
		close(stop)
		wg.Wait()
		settle(time.Minute)

		requireSameLog(t, log1, log2, tpA)
		requireSameLog(t, log1, log2, tpB)
		ackedMu.Lock()
		defer ackedMu.Unlock()
		require.NotEmpty(t, acks)
		t.Logf("%d waits, %d acknowledged", waits, len(acks))
		byOffset := make(map[int64]int32)
		for _, b := range log2.Batches(tpA) {
			byOffset[b.LastOffset] = b.Epoch
		}
		for _, a := range acks {
			assert.Equal(t, a.epoch, byOffset[a.last], "acknowledged offset %d of epoch %d", a.last, a.epoch)
		}
	})
}
