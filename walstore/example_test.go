package walstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// Broker 1 in az1 leads one partition and replicates it to brokers 2 and
// 3 in az2 and az3 through object storage, all in memory. Each broker runs
// one Node and tells it of its role changes.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objects, _ := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "wal-az1", "az2": "wal-az2", "az3": "wal-az3"},
	})
	meta, _ := memstore.NewLog(4, memstore.WithMaxPollWait(10*time.Millisecond))
	defer meta.Close()
	tp := metadata.TopicPartition{Topic: "orders", Partition: 0}

	nodes := map[int32]*walstore.Node{}
	logs := map[int32]*memstore.LocalLog{}
	for id, az := range map[int32]string{1: "az1", 2: "az2", 3: "az3"} {
		store, _ := objects.Store(az)
		logs[id] = memstore.NewLocalLog()
		nodes[id], _ = walstore.NewNode(walstore.NodeConfig{
			BrokerID: id, Store: store, Log: meta, Local: logs[id],
			Interval: 10 * time.Millisecond,
			// A broker relays its followers' progress to the leader's
			// Node (Kafka's fetch path); here they share a process.
			OnProgress: func(p walstore.Progress) { nodes[p.Leader].RecordProgress(p) },
		})
	}
	for _, n := range nodes {
		go n.Run(ctx)
	}

	// The controller makes broker 1 the leader at epoch 1 (its local log
	// records epoch 1 from offset 0, as makeLeader leaves it) and brokers
	// 2 and 3 its followers.
	_ = logs[1].AssignEpoch(tp, 1, 0)
	if err := nodes[1].BecomeLeader(ctx, tp, 1, []int32{2, 3}, -1); err != nil {
		panic(err)
	}
	for _, id := range []int32{2, 3} {
		if err := nodes[id].BecomeFollower(ctx, tp, 1, 1); err != nil {
			panic(err)
		}
	}

	// Producers write three batches: the broker appends each to its log,
	// then to the Node, and acknowledges once it is durable.
	for off := int64(0); off < 30; off += 10 {
		b := storage.Batch{Epoch: 1, FirstOffset: off, LastOffset: off + 9, Data: []byte(fmt.Sprintf("records %d-%d", off, off+9))}
		_ = logs[1].Append(ctx, tp, []storage.Batch{b})
		if err := nodes[1].Append(ctx, tp, b); err != nil {
			panic(err)
		}
	}
	if err := nodes[1].WaitDurable(ctx, tp, 1, 29); err != nil { // acks-on-upload
		panic(err)
	}
	for _, id := range []int32{2, 3} {
		end, _ := logs[id].EndOffset(tp)
		for ; end < 30; end, _ = logs[id].EndOffset(tp) {
			time.Sleep(time.Millisecond) // followers apply asynchronously
		}
		fmt.Printf("broker %d has %s up to offset %d\n", id, tp, end-1)
	}
	// Output:
	// broker 2 has orders-0 up to offset 29
	// broker 3 has orders-0 up to offset 29
}

// A leader's broker keeps its in-sync set with what Replicas says of each
// follower. Broker 3 is a follower that has not started: it holds the high
// watermark, and acks=all, back until the broker takes it out of the set
// (here at once; a broker waits replica.lag.time.max.ms past its
// LastCaughtUp). To come back, it is added to the Node's set first and to
// the controller's once caught up (docs/broker-integration.md).
func ExampleNode_Replicas() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objects, _ := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "wal-az1", "az2": "wal-az2", "az3": "wal-az3"},
	})
	meta, _ := memstore.NewLog(4, memstore.WithMaxPollWait(10*time.Millisecond))
	defer meta.Close()
	tp := metadata.TopicPartition{Topic: "orders", Partition: 0}

	nodes := map[int32]*walstore.Node{}
	logs := map[int32]*memstore.LocalLog{}
	for id, az := range map[int32]string{1: "az1", 2: "az2"} {
		store, _ := objects.Store(az)
		logs[id] = memstore.NewLocalLog()
		nodes[id], _ = walstore.NewNode(walstore.NodeConfig{
			BrokerID: id, Store: store, Log: meta, Local: logs[id],
			Interval:   10 * time.Millisecond,
			OnProgress: func(p walstore.Progress) { nodes[p.Leader].RecordProgress(p) },
		})
		go nodes[id].Run(ctx)
	}
	_ = logs[1].AssignEpoch(tp, 1, 0)
	_ = nodes[1].BecomeLeader(ctx, tp, 1, []int32{2, 3}, -1)
	_ = nodes[2].BecomeFollower(ctx, tp, 1, 1)
	b := storage.Batch{Epoch: 1, FirstOffset: 0, LastOffset: 9, Data: []byte("records 0-9")}
	_ = logs[1].Append(ctx, tp, []storage.Batch{b})
	_ = nodes[1].Append(ctx, tp, b)

	// The broker looks at its followers now and then (here, until broker
	// 2 has applied the batch) and keeps in the set those caught up.
	var inSync []int32
	for inSync == nil {
		time.Sleep(time.Millisecond)
		for _, r := range nodes[1].Replicas(tp) {
			if r.CaughtUp && r.EndOffset == 10 {
				inSync = append(inSync, r.Broker)
			}
		}
	}
	for _, r := range nodes[1].Replicas(tp) {
		fmt.Printf("broker %d: end offset %d, caught up %v\n", r.Broker, r.EndOffset, r.CaughtUp)
	}
	if err := nodes[1].SetInSync(tp, inSync); err != nil {
		panic(err)
	}
	if err := nodes[1].WaitReplicated(ctx, tp, 1, 9); err != nil { // acks=all
		panic(err)
	}
	fmt.Println("in sync:", inSync, "high watermark:", nodes[1].HighWatermark(tp))
	// Output:
	// broker 2: end offset 10, caught up true
	// broker 3: end offset -1, caught up false
	// in sync: [2] high watermark: 10
}
