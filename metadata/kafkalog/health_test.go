package kafkalog

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// TestNodeDegradesWhileKafkaRejectsAndRecovers runs a leader Node whose
// metadata log is this package's, on a Kafka cluster that rejects every
// produce (NOT_ENOUGH_REPLICAS) or never answers: the Node reports itself
// degraded after DegradedAfter, whether or not a publish returns, and
// recovers, with the data durable, once Kafka accepts again.
func TestNodeDegradesWhileKafkaRejectsAndRecovers(t *testing.T) {
	for _, tt := range []struct {
		name    string
		install func(c *kfake.Cluster) (remove func())
	}{
		{"not enough replicas", func(c *kfake.Cluster) func() {
			return c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testTopic, Err: kerr.NotEnoughReplicas, Count: -1}).Remove
		}},
		{"no answer", func(c *kfake.Cluster) func() {
			f := installConnFault(c, int16(kmsg.Produce), true)
			return func() { f.on.Store(false) }
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			c := newCluster(t, kfake.SeedTopics(2, testTopic))
			l := openLog(t, c, Config{Partitions: 2, DeliveryTimeout: faultDeliveryTimeout, RequestTimeout: faultRequestTimeout})
			objects, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1"}})
			require.NoError(t, err)
			store, err := objects.Store("az1")
			require.NoError(t, err)
			local := memstore.NewLocalLog()
			var mu sync.Mutex
			var reports []walstore.Health
			n, err := walstore.NewNode(walstore.NodeConfig{
				BrokerID: 1, Store: store, Log: l, Local: local,
				Interval: 10 * time.Millisecond, DegradedAfter: 2 * time.Second,
				Backoff: walstore.Backoff{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond},
				OnHealth: func(h walstore.Health) {
					mu.Lock()
					reports = append(reports, h)
					mu.Unlock()
				},
			})
			require.NoError(t, err)
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- n.Run(runCtx) }()
			defer func() {
				stop()
				require.NoError(t, <-done)
			}()

			tp := metadata.TopicPartition{Topic: "orders", Partition: 0}
			require.NoError(t, local.AssignEpoch(tp, 1, 0))
			require.NoError(t, n.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
			remove := tt.install(c)
			b := storage.Batch{Epoch: 1, FirstOffset: 0, LastOffset: 9, MaxTimestamp: 1, Data: []byte("ten records")}
			require.NoError(t, local.Append(ctx, tp, []storage.Batch{b}))
			require.NoError(t, n.Append(ctx, tp, b))

			require.Eventually(t, func() bool { return n.Health().Degraded }, 30*time.Second, 10*time.Millisecond,
				"the Node never reported itself degraded while Kafka refused every publish")
			h := n.Health()
			require.Error(t, h.Err)
			require.Equal(t, int64(0), n.DurableOffset(tp), "nothing is durable while the entries cannot be published")

			remove()
			require.NoError(t, n.WaitDurable(ctx, tp, 1, 9), "durable once Kafka accepts again")
			require.Eventually(t, func() bool { return !n.Health().Degraded }, 30*time.Second, 10*time.Millisecond, "the Node never recovered")
			mu.Lock()
			defer mu.Unlock()
			require.GreaterOrEqual(t, len(reports), 2)
			require.True(t, reports[0].Degraded, "OnHealth's first report")
			require.False(t, reports[len(reports)-1].Degraded, "OnHealth's last report")
		})
	}
}
