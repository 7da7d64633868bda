package metering_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// cluster is three brokers in three AZs on one memstore cluster and one
// metadata log, each broker with a Meter of its own around its store and
// its view of the log, as each broker of a real cluster would have.
type cluster struct {
	objects *memstore.Cluster
	meta    *memstore.Log
	nodes   map[int32]*walstore.Node
	logs    map[int32]*memstore.LocalLog
	meters  map[int32]*metering.Meter
	// stop stops every Node and waits for them; later calls do nothing.
	stop func()
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	objects, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "wal-az1", "az2": "wal-az2", "az3": "wal-az3"}, Seed: 1,
	})
	require.NoError(t, err)
	// Four metadata partitions for brokers 1-3: each broker reads a
	// partition of its own (follower_id % 4), so the entries it reads are
	// exactly those of the partitions it follows.
	meta, err := memstore.NewLog(4, memstore.WithMaxPollWait(5*time.Millisecond))
	require.NoError(t, err)
	c := &cluster{objects: objects, meta: meta, nodes: map[int32]*walstore.Node{},
		logs: map[int32]*memstore.LocalLog{}, meters: map[int32]*metering.Meter{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	for id, az := range map[int32]string{1: "az1", 2: "az2", 3: "az3"} {
		store, err := objects.Store(az)
		require.NoError(t, err)
		c.meters[id] = newMeter(t)
		c.logs[id] = memstore.NewLocalLog()
		c.nodes[id], err = walstore.NewNode(walstore.NodeConfig{
			BrokerID: id, Store: c.meters[id].Store(store), Log: c.meters[id].Log(meta), Local: c.logs[id],
			Interval: 5 * time.Millisecond,
		})
		require.NoError(t, err)
	}
	for _, n := range c.nodes {
		go func() { _ = n.Run(ctx); done <- struct{}{} }()
	}
	c.stop = sync.OnceFunc(func() {
		cancel()
		for range c.nodes {
			<-done
		}
	})
	t.Cleanup(func() {
		c.stop()
		meta.Close()
	})
	return c
}

// lead makes broker 1 the leader of tps at epoch 1 and brokers 2 and 3
// their followers.
func (c *cluster) lead(t *testing.T, tps []metadata.TopicPartition) {
	ctx := context.Background()
	for _, tp := range tps {
		require.NoError(t, c.logs[1].AssignEpoch(tp, 1, 0))
		require.NoError(t, c.nodes[1].BecomeLeader(ctx, tp, 1, []int32{2, 3}, -1))
		for _, id := range []int32{2, 3} {
			require.NoError(t, c.nodes[id].BecomeFollower(ctx, tp, 1, 1))
		}
	}
}

// produce appends batches of about size bytes to tp until end offsets,
// ten records a batch.
func (c *cluster) produce(t *testing.T, rng *rand.Rand, tp metadata.TopicPartition, batches, size int) {
	ctx := context.Background()
	end, err := c.logs[1].EndOffset(tp)
	require.NoError(t, err)
	for range batches {
		data := make([]byte, size/2+rng.IntN(size))
		for i := range data {
			data[i] = byte('a' + rng.IntN(8)) // compressible, as records are
		}
		b := storage.Batch{Epoch: 1, FirstOffset: end, LastOffset: end + 9, MaxTimestamp: time.Now().UnixMilli(), Data: data}
		require.NoError(t, c.logs[1].Append(ctx, tp, []storage.Batch{b}))
		require.NoError(t, c.nodes[1].Append(ctx, tp, b))
		end += 10
	}
}

// caughtUp waits until both followers hold everything the leader has.
func (c *cluster) caughtUp(t *testing.T, tps []metadata.TopicPartition) {
	require.Eventually(t, func() bool {
		for _, tp := range tps {
			want, _ := c.logs[1].EndOffset(tp)
			for _, id := range []int32{2, 3} {
				if got, _ := c.logs[id].EndOffset(tp); got != want {
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 2*time.Millisecond)
}

func within(t *testing.T, want, got float64, what string) {
	t.Helper()
	require.Greater(t, want, 0.0, what)
	require.LessOrEqual(t, math.Abs(got-want)/want, 0.001, "%s: ledger %.9g, bill %.9g", what, got, want)
}

// The ledgers of the three brokers' Meters, summed over every partition,
// come to costmodel.RunCost of what the object store and the metadata log
// counted themselves, line by line, with nothing left unattributed; and
// the topic produced to most costs most.
func TestLedgerSumsToRunCost(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	c := newCluster(t)
	var orders, clicks []metadata.TopicPartition
	for p := range 12 {
		orders = append(orders, metadata.TopicPartition{Topic: "orders", Partition: int32(p)})
	}
	for p := range 5 {
		clicks = append(clicks, metadata.TopicPartition{Topic: "clicks", Partition: int32(p)})
	}
	all := append(append([]metadata.TopicPartition{}, orders...), clicks...)
	c.lead(t, all)
	for round := range 20 {
		for _, tp := range orders {
			c.produce(t, rng, tp, 2, 4000)
		}
		for _, tp := range clicks[:1+round%len(clicks)] {
			c.produce(t, rng, tp, 1, 300)
		}
		if round%5 == 4 {
			c.caughtUp(t, all)
		}
	}
	c.caughtUp(t, all)
	// Stop before reading the counters, so that no request is in flight.
	c.stop()

	var total costmodel.Share
	var unattributed costmodel.Share
	var entries uint64
	topics := map[string]float64{}
	var usage costmodel.Usage
	for id, m := range c.meters {
		s := m.Snapshot().Ledger
		total = total.Add(s.Total().Share)
		unattributed = unattributed.Add(s.Unattributed.Share)
		for _, tc := range s.Topics() {
			topics[tc.Partition.Topic] += tc.Cost.TotalUSD
		}
		if id != 1 {
			entries += c.nodes[id].Stats().Follower.Entries
		}
		u := m.Usage()
		usage.Puts += u.Puts
		usage.Gets += u.Gets
		usage.BytesUp += u.BytesUp
		usage.BytesDown += u.BytesDown
		usage.MetadataBytes += u.MetadataBytes
		usage.ControlBytes += u.ControlBytes
	}
	// The bill, from the store's and the log's own accounting.
	st := c.objects.Stats().Total
	ml := c.meta.Stats().Total
	bill := costmodel.Usage{
		Puts: st.PutRequests, Gets: st.GetRequests, BytesUp: st.BytesUp, BytesDown: st.BytesDown,
		MetadataBytes: ml.AppendedBytes*costmodel.DefaultMetadataRF + ml.BytesRead,
		ControlBytes:  int64(entries) * costmodel.DefaultControlBytesPerPartition,
		ProducedBytes: 1, RF: 3,
	}
	require.Positive(t, bill.Puts)
	require.Positive(t, bill.Gets)
	usage.ProducedBytes, usage.RF = bill.ProducedBytes, bill.RF
	require.Equal(t, bill, usage, "what the Meters counted, against what the store and the log counted")

	p := costmodel.S3Express2025()
	want, err := costmodel.RunCost(p, bill)
	require.NoError(t, err)
	got, err := costmodel.PriceShare(p, total)
	require.NoError(t, err)
	within(t, want.ActiveTier.PutUSD, got.PutUSD, "PUT")
	within(t, want.ActiveTier.GetUSD, got.GetUSD, "GET")
	within(t, want.ActiveTier.UploadUSD, got.UploadUSD, "upload")
	within(t, want.ActiveTier.RetrievalUSD, got.RetrievalUSD, "retrieval")
	within(t, want.ActiveTier.MetadataUSD, got.MetadataUSD, "metadata")
	within(t, want.ActiveTier.ControlUSD, got.ControlUSD, "control")
	within(t, want.ActiveTier.TotalUSD, got.TotalUSD, "total")
	require.Equal(t, costmodel.Share{}, unattributed, "every request and byte has a partition")
	require.Greater(t, topics["orders"], 4*topics["clicks"], fmt.Sprint(topics))
	require.Positive(t, topics["clicks"])
}
