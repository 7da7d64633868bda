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

// gatedLog is a local log whose appends wait at a gate while it is shut,
// and that counts the appends it started.
type gatedLog struct {
	*memstore.LocalLog
	mu      sync.Mutex
	shut    chan struct{} // nil while open
	started atomic.Int64
}

func (g *gatedLog) Append(ctx context.Context, tp metadata.TopicPartition, bs []storage.Batch) error {
	g.started.Add(1)
	g.mu.Lock()
	gate := g.shut
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.LocalLog.Append(ctx, tp, bs)
}

// TestStopReplicaWaitsForTheAppendInFlight: once StopReplica (or
// BecomeLeader) returns, the follower side has no append to the partition
// in flight and makes none after. A broker reads its log end right after
// to start a new epoch there, and a controller judges the log it elects;
// an append landing after either (the simulation's seed 719441 had one)
// would put records in the log that the decision did not see.
func TestStopReplicaWaitsForTheAppendInFlight(t *testing.T) {
	for _, transition := range []string{"StopReplica", "BecomeLeader"} {
		t.Run(transition, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				tp := metadata.TopicPartition{Topic: "t", Partition: 0}
				cluster, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1", "az2": "b2"}})
				require.NoError(t, err)
				meta, err := memstore.NewLog(1)
				require.NoError(t, err)
				defer meta.Close()
				log1 := memstore.NewLocalLog()
				log2 := &gatedLog{LocalLog: memstore.NewLocalLog()}
				newNode := func(id int32, az string, local storage.LocalLog) *walstore.Node {
					store, err := cluster.Store(az)
					require.NoError(t, err)
					n, err := walstore.NewNode(walstore.NodeConfig{BrokerID: id, Store: store, Log: meta, Local: local, Logger: discard(),
						Interval: 10 * time.Millisecond})
					require.NoError(t, err)
					return n
				}
				leader, follower := newNode(1, "az1", log1), newNode(2, "az2", log2)
				runCtx, stop := context.WithCancel(ctx)
				done := make(chan error, 2)
				go func() { done <- leader.Run(runCtx) }()
				go func() { done <- follower.Run(runCtx) }()

				require.NoError(t, log1.AssignEpoch(tp, 1, 0))
				require.NoError(t, leader.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
				require.NoError(t, follower.BecomeFollower(ctx, tp, 1, 1))
				produce := func(first, last int64) {
					b := storage.Batch{Epoch: 1, FirstOffset: first, LastOffset: last, MaxTimestamp: 1, Data: []byte{byte(first)}}
					require.NoError(t, log1.Append(ctx, tp, []storage.Batch{b}))
					require.NoError(t, leader.Append(ctx, tp, b))
					require.NoError(t, leader.WaitDurable(ctx, tp, 1, last))
				}

				// The follower's next append waits at the gate.
				gate := make(chan struct{})
				log2.mu.Lock()
				log2.shut = gate
				log2.mu.Unlock()
				produce(0, 9)
				time.Sleep(time.Second)
				synctest.Wait()
				require.Equal(t, int64(1), log2.started.Load(), "the follower's append is in flight")

				returned := make(chan error, 1)
				go func() {
					if transition == "StopReplica" {
						returned <- follower.StopReplica(ctx, tp)
					} else {
						returned <- follower.BecomeLeader(ctx, tp, 2, []int32{1}, -1)
					}
				}()
				synctest.Wait()
				select {
				case err := <-returned:
					t.Fatalf("%s returned (%v) with an append in flight", transition, err)
				default:
				}
				close(gate)
				require.NoError(t, <-returned)
				end, err := log2.EndOffset(tp)
				require.NoError(t, err)
				require.Equal(t, int64(10), end, "the append in flight completed before the transition returned")

				// Nothing more is appended, whatever the old leader publishes.
				log2.mu.Lock()
				log2.shut = nil
				log2.mu.Unlock()
				produce(10, 19)
				time.Sleep(time.Second)
				synctest.Wait()
				require.Equal(t, int64(1), log2.started.Load(), "appends after %s returned", transition)
				stop()
				require.NoError(t, <-done)
				require.NoError(t, <-done)
			})
		})
	}
}
