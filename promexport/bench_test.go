package promexport_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/promexport"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// BenchmarkReplication is walstore's BenchmarkReplication (a leader and two
// followers on memstore with no latency, codec none, 100 partitions, 2048
// batches of 4 KiB per op, appended until both followers have applied
// them) on two clusters side by side: bare, and with every broker's store
// and metadata log wrapped by a Meter and a Collector registered over the
// Meter and the Nodes. Each op runs once on each, in alternating order, so
// that a machine whose load drifts slows both alike; metered/bare is the
// ratio of their median throughputs per op (medians, because a shared
// machine's load spikes hit single ops), what the export costs.
func BenchmarkReplication(b *testing.B) {
	const opBytes = 2048 * 4096
	bare, metered := newRig(b, false), newRig(b, true)
	var took [2][]time.Duration
	b.SetBytes(2 * opBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for k := range 2 {
			k ^= i & 1
			start := time.Now()
			[]*rig{bare, metered}[k].op(b)
			took[k] = append(took[k], time.Since(start))
		}
	}
	b.StopTimer()
	median := func(d []time.Duration) float64 { slices.Sort(d); return d[len(d)/2].Seconds() }
	bareS, meteredS := median(took[0]), median(took[1])
	b.ReportMetric(opBytes/1e6/bareS, "bare-MB/s")
	b.ReportMetric(opBytes/1e6/meteredS, "metered-MB/s")
	b.ReportMetric(bareS/meteredS, "metered/bare")
	// One scrape, to show the registry is live and not only registered.
	if _, err := metered.reg.Gather(); err != nil {
		b.Fatal(err)
	}
}

// rig is one cluster of BenchmarkReplication.
type rig struct {
	nodes map[int32]*walstore.Node
	logs  map[int32]*memstore.LocalLog
	data  [][]byte
	end   []int64
	reg   *prometheus.Registry
}

const rigPartitions = 100

func rigTP(i int) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: "bench", Partition: int32(i)}
}

func newRig(b *testing.B, metered bool) *rig {
	const batchBytes, batchesPerOp = 4096, 2048
	objects, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1", "az2": "b2", "az3": "b3"}, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	meta, err := memstore.NewLog(4, memstore.WithMaxPollWait(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := map[int32]*memstore.LocalLog{}
	nodes := map[int32]*walstore.Node{}
	var promNodes []promexport.Node
	var meter *metering.Meter
	if metered {
		if meter, err = metering.New(metering.Config{Prices: costmodel.S3Express2025()}); err != nil {
			b.Fatal(err)
		}
	}
	for id, az := range map[int32]string{1: "az1", 2: "az2", 3: "az3"} {
		inner, _ := objects.Store(az)
		var store storage.ObjectStore = inner
		var log metadata.Log = meta
		if metered {
			store, log = meter.Store(store), meter.Log(log)
		}
		logs[id] = memstore.NewLocalLog()
		nodes[id], err = walstore.NewNode(walstore.NodeConfig{BrokerID: id, Store: store, Log: log, Local: logs[id],
			Interval: 2 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		promNodes = append(promNodes, promexport.Node{Broker: fmt.Sprint(id), Engine: nodes[id]})
	}
	reg := prometheus.NewRegistry()
	if metered {
		c, err := promexport.New(promexport.Config{Meter: meter, Nodes: promNodes})
		if err != nil {
			b.Fatal(err)
		}
		reg.MustRegister(c)
	}
	done := make(chan struct{}, len(nodes))
	for _, n := range nodes {
		go func() { _ = n.Run(ctx); done <- struct{}{} }()
	}
	b.Cleanup(func() {
		cancel()
		for range nodes {
			<-done
		}
		meta.Close()
	})
	for i := range rigPartitions {
		for _, id := range []int32{2, 3} {
			if err := nodes[id].BecomeFollower(ctx, rigTP(i), 1, 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := nodes[1].BecomeLeader(ctx, rigTP(i), 1, []int32{2, 3}, -1); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([][]byte, batchesPerOp)
	for i := range data {
		buf := make([]byte, 0, batchBytes+128)
		for len(buf) < batchBytes {
			buf = fmt.Appendf(buf, `{"ts":%d,"level":"info","svc":"checkout-%d","order":%d}`+"\n", 1764400000000+rng.IntN(1000), rng.IntN(8), rng.Uint32())
		}
		data[i] = buf[:batchBytes]
	}
	return &rig{nodes: nodes, logs: logs, data: data, end: make([]int64, rigPartitions), reg: reg}
}

// op appends the batches round robin and waits until both followers have
// applied them.
func (r *rig) op(b *testing.B) {
	ctx := context.Background()
	for i, d := range r.data {
		p := i % rigPartitions
		batch := storage.Batch{Epoch: 1, FirstOffset: r.end[p], LastOffset: r.end[p] + 9, MaxTimestamp: time.Now().UnixMilli(), Data: d}
		if err := r.nodes[1].Append(ctx, rigTP(p), batch); err != nil {
			b.Fatal(err)
		}
		r.end[p] += 10
	}
	for _, id := range []int32{2, 3} {
		for i := range rigPartitions {
			for e, _ := r.logs[id].EndOffset(rigTP(i)); e < r.end[i]; e, _ = r.logs[id].EndOffset(rigTP(i)) {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
}
