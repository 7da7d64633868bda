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

// healthLog records what OnHealth reports.
type healthLog struct {
	mu      sync.Mutex
	reports []walstore.Health
}

func (h *healthLog) record(hl walstore.Health) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, hl)
}

func (h *healthLog) last(t *testing.T) walstore.Health {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	require.NotEmpty(t, h.reports, "OnHealth was never called")
	return h.reports[len(h.reports)-1]
}

// requireFailing checks that n reports tp failing in role, the failure
// naming dependency and matching is, in Health (as OnHealth last reported it too), in
// Stats and in PartitionError.
func requireFailing(t *testing.T, n *walstore.Node, reports *healthLog, tp metadata.TopicPartition, role walstore.Role, dependency string, is error) {
	t.Helper()
	synctest.Wait() // OnHealth is called once the change is made
	h := n.Health()
	require.False(t, h.Healthy())
	require.Equal(t, 1, h.FailingPartitions)
	require.Len(t, h.Partitions, 1)
	pe := h.Partitions[0]
	assert.Equal(t, tp, pe.Partition)
	assert.Equal(t, role, pe.Role)
	assert.False(t, pe.Since.IsZero())
	requireDependencyError(t, pe, dependency, is)
	assert.Contains(t, pe.Error(), tp.String())
	assert.Contains(t, pe.Error(), dependency)
	err := n.PartitionError(tp)
	var got *walstore.PartitionError
	require.ErrorAs(t, err, &got)
	assert.Equal(t, role, got.Role)
	requireDependencyError(t, err, dependency, is)
	assert.Equal(t, h.Partitions, n.Stats().Health.Partitions)
	assert.Equal(t, h.Partitions, reports.last(t).Partitions, "OnHealth's last report")
}

func requireHealthy(t *testing.T, n *walstore.Node, reports *healthLog, tp metadata.TopicPartition) {
	t.Helper()
	synctest.Wait()
	assert.True(t, n.Health().Healthy(), "%v", n.Health().Partitions)
	assert.NoError(t, n.PartitionError(tp))
	assert.True(t, reports.last(t).Healthy(), "OnHealth's last report")
}

// A leadership whose take-up fails in the background (the local log's
// Epochs, read to publish its epoch markers; its Read, failing or not
// answering, when it republishes) is reported: Health names the
// partition and the failing call, PartitionError returns it, OnHealth
// tells; and it clears once the take-up goes on. It was only logged:
// BecomeLeader had returned nil, Health stayed healthy, and the partition
// never replicated, so acks=all never completed; a Read that did not
// answer held the republish for good.
func TestContractLeadershipFailingInTheBackgroundIsReported(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		hang         bool
		// republish: broker 1 holds 0-19 and broker 2 starts empty.
		republish bool
		is        error
	}{
		{name: "Epochs fails", method: "Epochs", is: errInjected},
		{name: "Read fails", method: "Read", republish: true, is: errInjected},
		{name: "Read does not answer", method: "Read", republish: true, hang: true, is: storage.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				local, log2 := newTrapLocal(), memstore.NewLocalLog()
				var reports healthLog
				n1 := w.start(1, walstore.NodeConfig{Local: local, OnHealth: reports.record})
				n2 := w.start(2, walstore.NodeConfig{Local: log2})
				release := func() { local.failing(tc.method, tpA, 0) }
				if tc.hang {
					release = local.hanging(tc.method, tpA)
					t.Cleanup(release)
				} else {
					local.failing(tc.method, tpA, -1)
				}
				from, start := int64(-1), int64(0)
				if tc.republish {
					seedLog(t, local.LocalLog, tpA, 1, 20)
					from, start = 0, 20
				}
				require.NoError(t, local.AssignEpoch(tpA, 2, start))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 2, []int32{2}, from))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 2, 1))
				produce(t, n1, local.LocalLog, tpA, 2, start, start+9)
				require.ErrorIs(t, n1.WaitReplicated(within(t, time.Minute), tpA, 2, start+9), context.DeadlineExceeded,
					"the partition does not replicate")
				requireFailing(t, n1, &reports, tpA, walstore.Leading, "LocalLog."+tc.method, tc.is)

				release()
				require.NoError(t, n1.WaitReplicated(within(t, time.Minute), tpA, 2, start+9))
				requireHealthy(t, n1, &reports, tpA)
				requireSameLog(t, local.LocalLog, log2, tpA)
			})
		})
	}
}

// A followed partition whose local log keeps failing (its appends, its
// truncations, its loads) is reported the same way, and clears once the
// call succeeds again. It was visible only as a counter
// (FollowerStats.LocalErrors) and logs.
func TestContractFollowerFailingLocalLogIsReported(t *testing.T) {
	for _, tc := range []struct {
		method, dependency string
		// emptyEpoch gives broker 2's log an epoch without records, which
		// the follower truncates away when it loads the log.
		emptyEpoch bool
	}{
		{method: "Append", dependency: "LocalLog.Append"},
		{method: "Truncate", dependency: "LocalLog.Truncate", emptyEpoch: true},
		{method: "Epochs", dependency: "LocalLog.Epochs"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				log1, local := memstore.NewLocalLog(), newTrapLocal()
				var reports healthLog
				n1 := w.start(1, walstore.NodeConfig{Local: log1})
				n2 := w.start(2, walstore.NodeConfig{Local: local, OnHealth: reports.record})
				local.failing(tc.method, tpA, -1)
				if tc.emptyEpoch {
					require.NoError(t, local.AssignEpoch(tpA, 1, 0))
				}
				require.NoError(t, log1.AssignEpoch(tpA, 2, 0))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 2, []int32{2}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 2, 1))
				produce(t, n1, log1, tpA, 2, 0, 9)
				settle(time.Minute)
				requireFailing(t, n2, &reports, tpA, walstore.Following, tc.dependency, errInjected)

				local.failing(tc.method, tpA, 0)
				require.NoError(t, n1.WaitReplicated(within(t, time.Minute), tpA, 2, 9))
				settle(time.Minute)
				requireHealthy(t, n2, &reports, tpA)
				requireSameLog(t, log1, local.LocalLog, tpA)
			})
		})
	}
}

// A failing partition is no longer reported once its role ends; a Node
// reports both sides, in partition order.
func TestContractFailingPartitionsOfBothSides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		local, log2 := newTrapLocal(), memstore.NewLocalLog()
		var reports healthLog
		n1 := w.start(1, walstore.NodeConfig{Local: local, OnHealth: reports.record})
		n2 := w.start(2, walstore.NodeConfig{Local: log2})
		// Broker 1 leads tpB, whose Epochs fail, and follows tpA, whose
		// appends fail.
		local.failing("Epochs", tpB, -1)
		local.failing("Append", tpA, -1)
		require.NoError(t, local.AssignEpoch(tpB, 1, 0))
		require.NoError(t, n1.BecomeLeader(ctx, tpB, 1, []int32{2}, -1))
		require.NoError(t, log2.AssignEpoch(tpA, 1, 0))
		require.NoError(t, n2.BecomeLeader(ctx, tpA, 1, []int32{1}, -1))
		require.NoError(t, n1.BecomeFollower(ctx, tpA, 1, 2))
		produce(t, n2, log2, tpA, 1, 0, 9)
		settle(time.Minute)
		h := n1.Health()
		require.Equal(t, 2, h.FailingPartitions)
		require.Len(t, h.Partitions, 2)
		assert.Equal(t, []metadata.TopicPartition{tpA, tpB}, []metadata.TopicPartition{h.Partitions[0].Partition, h.Partitions[1].Partition})
		assert.Equal(t, []walstore.Role{walstore.Following, walstore.Leading}, []walstore.Role{h.Partitions[0].Role, h.Partitions[1].Role})
		requireDependencyError(t, h.Partitions[0], "LocalLog.Append", errInjected)
		requireDependencyError(t, h.Partitions[1], "LocalLog.Epochs", errInjected)
		assert.Equal(t, 2, reports.last(t).FailingPartitions)

		require.NoError(t, n1.StopReplica(ctx, tpA))
		local.failing("Epochs", tpB, 0) // or following it fails too
		require.NoError(t, n1.BecomeFollower(ctx, tpB, 2, 2))
		settle(time.Second)
		requireHealthy(t, n1, &reports, tpA)
		assert.NoError(t, n1.PartitionError(tpB))
	})
}

// However many partitions fail, Health lists MaxFailingListed of them, the
// first in partition order, and counts them all; PartitionError answers
// for each.
func TestContractFailingPartitionsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		local := newTrapLocal()
		n1 := w.start(1, walstore.NodeConfig{Local: local})
		const partitions = 3 * walstore.MaxFailingListed
		var tps []metadata.TopicPartition
		for i := range partitions {
			tp := metadata.TopicPartition{Topic: fmt.Sprintf("t%03d", partitions-i), Partition: int32(i)}
			tps = append(tps, tp)
			local.failing("Epochs", tp, -1)
			require.NoError(t, local.AssignEpoch(tp, 1, 0))
			require.NoError(t, n1.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
		}
		settle(time.Second)
		h := n1.Health()
		require.Equal(t, partitions, h.FailingPartitions)
		require.Len(t, h.Partitions, walstore.MaxFailingListed)
		for i, pe := range h.Partitions {
			assert.Equal(t, tps[partitions-1-i], pe.Partition, "listed %d", i)
		}
		for _, tp := range tps {
			requireDependencyError(t, n1.PartitionError(tp), "LocalLog.Epochs", errInjected)
		}
	})
}
