// Command quickstart runs a leader and two followers replicating one
// partition through in-memory object storage, the shape of an activetier
// deployment in under 100 lines. Run it with
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
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

	// Broker 1 in az1 leads; brokers 2 and 3 follow.
	tp := metadata.TopicPartition{Topic: "orders", Partition: 0}
	followers := func(metadata.TopicPartition) []int32 { return []int32{2, 3} }
	leaderLog := memstore.NewLocalLog()
	store1, err := objects.Store("az1")
	check(err)
	leader, err := walstore.NewLeader(walstore.LeaderConfig{
		BrokerID: 1, Store: store1, Log: meta, Local: leaderLog, Followers: followers,
		Interval: 20 * time.Millisecond,
	})
	check(err)
	go leader.Run(ctx)

	logs := map[int32]*memstore.LocalLog{}
	for id, az := range map[int32]string{2: "az2", 3: "az3"} {
		store, err := objects.Store(az)
		check(err)
		logs[id] = memstore.NewLocalLog()
		f, err := walstore.NewFollower(walstore.FollowerConfig{
			BrokerID: id, Store: store, Log: meta, Local: logs[id],
			Follows: func(metadata.TopicPartition) bool { return true },
		})
		check(err)
		go f.Run(ctx)
	}

	// The broker makes itself leader at epoch 1, then produces 100 batches.
	check(leaderLog.AssignEpoch(tp, 1, 0))
	check(leader.BecomeLeader(ctx, tp, 1, -1))
	start := time.Now()
	for i := int64(0); i < 100; i++ {
		b := combiner.Batch{Epoch: 1, FirstOffset: i * 10, LastOffset: i*10 + 9,
			MaxTimestamp: time.Now().UnixMilli(), Data: fmt.Appendf(nil, "batch %d", i)}
		check(leaderLog.Append(ctx, tp, []combiner.Batch{b}))
		check(leader.Append(ctx, tp, b))
	}
	check(leader.WaitDurable(ctx, tp, 999))
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
