package walstore_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

type panickingLog struct{ *memstore.LocalLog }

func (panickingLog) Append(context.Context, metadata.TopicPartition, []storage.Batch) error {
	panic("the broker's log panics")
}

// TestLocalLogPanicCrashesTheProcess: a LocalLog that panics while the
// follower appends must crash the process with its panic, as any panic in
// a goroutine does, not leave the follower's Run waiting for its own lock
// (which hid such a panic as a hang). The panicking run happens in a child
// process: this test's binary, run again for the one subtest.
func TestLocalLogPanicCrashesTheProcess(t *testing.T) {
	if os.Getenv("ACTIVETIER_PANIC_CHILD") == "1" {
		panicWhileAppending(t)
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLocalLogPanicCrashesTheProcess$")
	cmd.Env = append(os.Environ(), "ACTIVETIER_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the child ended without crashing:\n%s", out)
	require.NoError(t, ctx.Err(), "the child hung instead of crashing:\n%s", out)
	require.Contains(t, string(out), "the broker's log panics")
}

func panicWhileAppending(t *testing.T) {
	ctx := context.Background()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	cluster, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1", "az2": "b2"}})
	require.NoError(t, err)
	meta, err := memstore.NewLog(1)
	require.NoError(t, err)
	store1, err := cluster.Store("az1")
	require.NoError(t, err)
	store2, err := cluster.Store("az2")
	require.NoError(t, err)
	log1 := memstore.NewLocalLog()
	leader, err := walstore.NewNode(walstore.NodeConfig{BrokerID: 1, Store: store1, Log: meta, Local: log1, Logger: discard(),
		Interval: time.Millisecond})
	require.NoError(t, err)
	follower, err := walstore.NewNode(walstore.NodeConfig{BrokerID: 2, Store: store2, Log: meta, Local: panickingLog{memstore.NewLocalLog()}, Logger: discard()})
	require.NoError(t, err)
	go leader.Run(ctx)
	go follower.Run(ctx)
	require.NoError(t, log1.AssignEpoch(tp, 1, 0))
	require.NoError(t, leader.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
	require.NoError(t, follower.BecomeFollower(ctx, tp, 1, 1))
	b := storage.Batch{Epoch: 1, FirstOffset: 0, LastOffset: 0, MaxTimestamp: 1, Data: []byte("x")}
	require.NoError(t, log1.Append(ctx, tp, []storage.Batch{b}))
	require.NoError(t, leader.Append(ctx, tp, b))
	time.Sleep(time.Minute) // the follower's append panics long before
}
