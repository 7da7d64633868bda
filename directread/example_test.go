package directread_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/activetier/activetier/directread"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// Example tails two partitions straight from the buckets: broker 1 in
// az1 leads them, broker 2 in az2 follows, and a consumer in az2 reads
// their committed records from the objects in az1's bucket instead of
// fetching them from broker 1. docs/direct-reads.md ("Reading") shows the
// consumer's part (TestReadmeReaderSnippet).
func Example() {
	var running sync.WaitGroup
	defer running.Wait() // the Nodes' Run returns once ctx is cancelled
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objects, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "wal-az1", "az2": "wal-az2"}})
	if err != nil {
		log.Fatal(err)
	}
	meta, err := memstore.NewLog(2, memstore.WithMaxPollWait(20*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer meta.Close()
	orders := []metadata.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}}

	// Two brokers, one Node each; the followers' progress reaches the
	// leader, which publishes the high watermark as it grows.
	logs := map[int32]*memstore.LocalLog{}
	nodes := map[int32]*walstore.Node{}
	for id, az := range map[int32]string{1: "az1", 2: "az2"} {
		store, err := objects.Store(az)
		if err != nil {
			log.Fatal(err)
		}
		logs[id] = memstore.NewLocalLog()
		nodes[id], err = walstore.NewNode(walstore.NodeConfig{BrokerID: id, Store: store, Log: meta, Local: logs[id],
			Interval:   10 * time.Millisecond,
			OnProgress: func(p walstore.Progress) { nodes[p.Leader].RecordProgress(p) }})
		if err != nil {
			log.Fatal(err)
		}
	}
	for _, n := range nodes {
		running.Go(func() { _ = n.Run(ctx) })
	}
	for _, tp := range orders {
		if err := logs[1].AssignEpoch(tp, 1, 0); err != nil {
			log.Fatal(err)
		}
		if err := nodes[1].BecomeLeader(ctx, tp, 1, []int32{2}, -1); err != nil {
			log.Fatal(err)
		}
		if err := nodes[2].BecomeFollower(ctx, tp, 1, 1); err != nil {
			log.Fatal(err)
		}
		for first := int64(0); first < 30; first += 10 {
			b := storage.Batch{Epoch: 1, FirstOffset: first, LastOffset: first + 9, MaxTimestamp: time.Now().UnixMilli(),
				Data: fmt.Appendf(nil, "%s records %d-%d", tp, first, first+9)}
			if err := logs[1].Append(ctx, tp, []storage.Batch{b}); err != nil {
				log.Fatal(err)
			}
			if err := nodes[1].Append(ctx, tp, b); err != nil {
				log.Fatal(err)
			}
		}
		if err := nodes[1].WaitReplicated(ctx, tp, 1, 29); err != nil { // acks=all
			log.Fatal(err)
		}
	}
	az2, err := objects.Store("az2") // the consumer's AZ: it reads every bucket
	if err != nil {
		log.Fatal(err)
	}
	got := make(map[metadata.TopicPartition][]string)

	// README snippet begins.
	reader, err := directread.New(directread.Config{
		Log:        meta,                                                          // the metadata log the leaders publish to
		Stores:     map[string]storage.ObjectStore{"az1": az2, "az2": az2},        // by AZ; this AZ's client reads both
		Partitions: map[metadata.TopicPartition]int64{orders[0]: 0, orders[1]: 0}, // start offsets
	})
	if err != nil {
		log.Fatal(err)
	}
	defer reader.Close()
	for !caughtUp(reader, orders, 30) {
		fetch, err := reader.Poll(ctx) // committed records only
		if err != nil {
			log.Fatal(err)
		}
		for _, b := range fetch.Batches {
			got[b.Partition] = append(got[b.Partition], string(b.Data))
		}
		for _, err := range fetch.Errors {
			var gone *directread.GoneError
			if !errors.As(err, &gone) {
				log.Fatal(err)
			}
			// Collected or tiered: read [gone.Offset, gone.ResumeHint)
			// from the broker or tiered storage, then resume.
			if err := reader.Seek(gone.Partition, gone.ResumeHint); err != nil {
				log.Fatal(err)
			}
		}
	}
	// README snippet ends.
	for _, tp := range orders {
		fmt.Println(got[tp])
	}
	// Output:
	// [orders-0 records 0-9 orders-0 records 10-19 orders-0 records 20-29]
	// [orders-1 records 0-9 orders-1 records 10-19 orders-1 records 20-29]
}

// caughtUp reports whether the reader has yielded every partition of tps
// up to end.
func caughtUp(r *directread.Reader, tps []metadata.TopicPartition, end int64) bool {
	for _, tp := range tps {
		if next, _ := r.Position(tp); next < end {
			return false
		}
	}
	return true
}
