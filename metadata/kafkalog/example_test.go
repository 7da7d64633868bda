package kafkalog_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metadata/kafkalog"
)

// Example wires the log as brokers do, on an in-process Kafka cluster
// standing in for the real one. The leader splits one object's entries by
// follower and appends one encoded message per metadata partition; a
// follower reads its one metadata partition from the offset it last applied;
// garbage collection trims what was applied.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	ctx := context.Background()

	log, err := kafkalog.New(ctx, kafkalog.Config{
		SeedBrokers: cluster.ListenAddrs(),
		Partitions:  4, // at least the number of brokers: one reader each
		CreateTopic: true,
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer log.Close()
	partitioner, err := metadata.NewPartitioner(log.Partitions())
	if err != nil {
		fmt.Println(err)
		return
	}

	// Leader side: broker 1 uploaded an object with sections of orders-0
	// (followed by brokers 2 and 6) and orders-1 (followed by 3 and 5).
	followers := func(tp metadata.TopicPartition) []int32 {
		return map[int32][]int32{0: {2, 6}, 1: {3, 5}}[tp.Partition]
	}
	object := metadata.ObjectRef{AZ: "use1-az4", Bucket: "wal--use1-az4--x-s3", Key: "wal/broker-1/0001.seg"}
	section := func(partition int32, first, position int64) metadata.Entry {
		return metadata.Entry{
			Partition:   metadata.TopicPartition{Topic: "orders", Partition: partition},
			RecordEpoch: 5, PublisherEpoch: 5,
			FirstOffset: first, LastOffset: first + 99,
			Object: object, Position: position, Length: 4096, UncompressedSize: 4096,
			WriterBrokerID: 1,
		}
	}
	flush := &metadata.Message{Object: object, WriterBrokerID: 1, Entries: []metadata.Entry{
		section(0, 100, 16),
		section(1, 700, 4112),
	}}
	routed, err := partitioner.Split(flush, followers)
	if err != nil {
		fmt.Println(err)
		return
	}
	var buf []byte
	for _, r := range routed {
		if buf, err = metadata.AppendMessage(buf[:0], r.Message); err != nil {
			fmt.Println(err)
			return
		}
		if _, err := log.Append(ctx, r.Partition, buf); err != nil {
			fmt.Println(err)
			return
		}
	}

	// Follower side: broker 6 reads its metadata partition from the offset
	// after the last message it applied (0 on first start).
	mine, err := partitioner.For(6)
	if err != nil {
		fmt.Println(err)
		return
	}
	applied := int64(0)
	recs, err := log.Read(ctx, mine, applied, 100)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("broker 6 reads metadata partition %d\n", mine)
	for _, rec := range recs {
		m, err := metadata.DecodeMessage(rec.Value)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, e := range m.Entries {
			fmt.Printf("%s offsets %d-%d: %s bytes [%d, %d)\n",
				e.Partition, e.FirstOffset, e.LastOffset, e.Object, e.Position, e.Position+e.Length)
		}
		applied = rec.Offset + 1
	}

	// Garbage collection: once every reader of the partition (brokers 2
	// and 6) applied a message, it can go.
	if err := log.Trim(ctx, mine, applied); err != nil {
		fmt.Println(err)
		return
	}
	low, high, err := log.Watermarks(ctx, mine)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("partition %d after trim: [%d, %d)\n", mine, low, high)

	// Output:
	// broker 6 reads metadata partition 2
	// orders-0 offsets 100-199: wal--use1-az4--x-s3/wal/broker-1/0001.seg bytes [16, 4112)
	// partition 2 after trim: [1, 1)
}
