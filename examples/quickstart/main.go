// Command quickstart runs three brokers, one walstore.Node each,
// replicating one partition through in-memory object storage: the shape of
// an activetier deployment in about 100 lines. Run it with
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// One bucket per AZ, with S3 Express-like latencies, and the metadata log.
	profile, err := memstore.ParseProfile("s3express")
	check(err)
	objects, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "wal-az1", "az2": "wal-az2", "az3": "wal-az3"},
		Profile: profile,
	})
	check(err)
	meta, err := memstore.NewLog(8, memstore.WithMaxPollWait(50*time.Millisecond))
	check(err)
	defer meta.Close()

	// One Node per broker: broker 1 in az1 leads; brokers 2 and 3 follow.
	tp := metadata.TopicPartition{Topic: "orders", Partition: 0}
	logs := map[int32]*memstore.LocalLog{}
	nodes := map[int32]*walstore.Node{}
	for id, az := range map[int32]string{1: "az1", 2: "az2", 3: "az3"} {
		store, err := objects.Store(az)
		check(err)
		logs[id] = memstore.NewLocalLog()
		nodes[id], err = walstore.NewNode(walstore.NodeConfig{
			BrokerID: id, Store: store, Log: meta, Local: logs[id],
			Interval: 20 * time.Millisecond,
			// A broker delivers a follower's progress to the leader, as
			// Kafka's fetch request carries it; here, in process.
			OnProgress: func(p walstore.Progress) { nodes[p.Leader].RecordProgress(p) },
		})
		check(err)
	}
	for _, n := range nodes {
		go n.Run(ctx)
	}

	// The controller makes broker 1 leader at epoch 1 and tells the others.
	check(logs[1].AssignEpoch(tp, 1, 0))
	check(nodes[1].BecomeLeader(ctx, tp, 1, []int32{2, 3}, -1))
	check(nodes[2].BecomeFollower(ctx, tp, 1, 1))
	check(nodes[3].BecomeFollower(ctx, tp, 1, 1))

	// Broker 1 produces 100 batches: to its own log, then to activetier.
	start := time.Now()
	for i := int64(0); i < 100; i++ {
		b := storage.Batch{Epoch: 1, FirstOffset: i * 10, LastOffset: i*10 + 9,
			MaxTimestamp: time.Now().UnixMilli(), Data: fmt.Appendf(nil, "batch %d", i)}
		check(logs[1].Append(ctx, tp, []storage.Batch{b}))
		check(nodes[1].Append(ctx, tp, b))
	}
	check(nodes[1].WaitDurable(ctx, tp, 1, 999))
	fmt.Printf("leader: 1000 records durable in object storage after %v\n", time.Since(start).Round(time.Millisecond))

	for _, id := range []int32{2, 3} {
		for end, _ := logs[id].EndOffset(tp); end < 1000; end, _ = logs[id].EndOffset(tp) {
			time.Sleep(time.Millisecond)
		}
		fmt.Printf("broker %d: caught up after %v\n", id, time.Since(start).Round(time.Millisecond))
	}
	s := objects.Stats().Total
	fmt.Printf("object storage: %d PUTs, %d GETs, %d bytes up, %d bytes down\n",
		s.PutRequests, s.GetRequests, s.BytesUp, s.BytesDown)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
