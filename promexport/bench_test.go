package promexport_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/promexport"
	"github.com/activetier/activetier/walstore"
)

// BenchmarkReplication is walstore's BenchmarkReplication (a leader and two
// followers on memstore with no latency, codec none, 100 partitions, 2048
// batches of 4 KiB per op, appended until both followers have applied
// them) run twice: bare, and with every broker's store and metadata log
// wrapped by a Meter and a Collector registered over the Meter and the
// Nodes. metered/bare of the two throughputs is what the export costs.
func BenchmarkReplication(b *testing.B) {
	for _, metered := range []bool{false, true} {
		b.Run(map[bool]string{false: "bare", true: "metered"}[metered], func(b *testing.B) {
			benchReplication(b, metered)
		})
	}
}

func benchReplication(b *testing.B, metered bool) {
	const partitions, batchBytes, batchesPerOp = 100, 4096, 2048
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
		var store walstore.ObjectStore = inner
		var log metadata.Log = meta
		if metered {
			store, log = meter.Store(store), meter.Log(log)
		}
		logs[id] = memstore.NewLocalLog()
		nodes[id], err = walstore.NewNode(walstore.NodeConfig{BrokerID: id, Store: store, Log: log, Local: logs[id],
			Leader: walstore.LeaderConfig{Interval: 2 * time.Millisecond}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	tp := func(i int) metadata.TopicPartition { return metadata.TopicPartition{Topic: "bench", Partition: int32(i)} }
	for i := range partitions {
		for _, id := range []int32{2, 3} {
			if err := nodes[id].BecomeFollower(ctx, tp(i), 1, 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := nodes[1].BecomeLeader(ctx, tp(i), 1, []int32{2, 3}, -1); err != nil {
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
	end := make([]int64, partitions)
	b.SetBytes(batchesPerOp * batchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i, d := range data {
			p := i % partitions
			batch := combiner.Batch{Epoch: 1, FirstOffset: end[p], LastOffset: end[p] + 9, MaxTimestamp: time.Now().UnixMilli(), Data: d}
			if err := nodes[1].Append(ctx, tp(p), batch); err != nil {
				b.Fatal(err)
			}
			end[p] += 10
		}
		for _, id := range []int32{2, 3} {
			for i := range partitions {
				for e, _ := logs[id].EndOffset(tp(i)); e < end[i]; e, _ = logs[id].EndOffset(tp(i)) {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}
	}
	b.StopTimer()
	if metered {
		// One scrape, to show the registry is live and not only registered.
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
