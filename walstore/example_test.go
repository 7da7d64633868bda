package walstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// A leader in az1 replicates one partition to followers in az2 and az3
// through object storage, all in memory.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objects, _ := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "wal-az1", "az2": "wal-az2", "az3": "wal-az3"},
	})
	meta, _ := memstore.NewLog(4, memstore.WithMaxPollWait(10*time.Millisecond))
	defer meta.Close()
	tp := metadata.TopicPartition{Topic: "orders", Partition: 0}
	followers := func(metadata.TopicPartition) []int32 { return []int32{2, 3} }

	store1, _ := objects.Store("az1")
	leader, _ := walstore.NewLeader(walstore.LeaderConfig{
		BrokerID: 1, Store: store1, Log: meta, Local: memstore.NewLocalLog(),
		Followers: followers, Interval: 10 * time.Millisecond,
	})
	go leader.Run(ctx)

	logs := map[int32]*memstore.LocalLog{}
	for id, az := range map[int32]string{2: "az2", 3: "az3"} {
		store, _ := objects.Store(az)
		logs[id] = memstore.NewLocalLog()
		f, _ := walstore.NewFollower(walstore.FollowerConfig{
			BrokerID: id, Store: store, Log: meta, Local: logs[id],
			Follows: func(metadata.TopicPartition) bool { return true },
		})
		go f.Run(ctx)
	}

	// The broker became leader at epoch 1 and appends three batches.
	if err := leader.BecomeLeader(ctx, tp, 1, -1); err != nil {
		panic(err)
	}
	for off := int64(0); off < 30; off += 10 {
		b := combiner.Batch{Epoch: 1, FirstOffset: off, LastOffset: off + 9, Data: []byte(fmt.Sprintf("records %d-%d", off, off+9))}
		if err := leader.Append(ctx, tp, b); err != nil {
			panic(err)
		}
	}
	if err := leader.WaitDurable(ctx, tp, 29); err != nil { // acks-on-upload
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
