package kafkalog_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/activetier/activetier/metadata/kafkalog"
)

// Example wires the log as a broker would, on an in-process Kafka cluster
// standing in for the real one: the leader publishes to the metadata
// partition of a follower, the follower reads its one partition from the
// offset it last applied, and garbage collection trims what was applied.
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

	// Leader side: broker 6 follows the partitions of this flush, so the
	// message goes to metadata partition 6 % 4.
	const follower = 6
	partition := follower % log.Partitions()
	for _, msg := range []string{"object-1 entries", "object-2 entries"} {
		if _, err := log.Append(ctx, partition, []byte(msg)); err != nil {
			fmt.Println(err)
			return
		}
	}

	// Follower side: broker 6 reads partition 2 from the offset after the
	// last entry it applied (0 on first start).
	applied := int64(0)
	recs, err := log.Read(ctx, partition, applied, 100)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range recs {
		fmt.Printf("partition %d offset %d: %s\n", r.Partition, r.Offset, r.Value)
		applied = r.Offset + 1
	}

	// Garbage collection: everything below what the followers applied goes.
	if err := log.Trim(ctx, partition, applied); err != nil {
		fmt.Println(err)
		return
	}
	low, high, err := log.Watermarks(ctx, partition)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("watermarks after trim: [%d, %d)\n", low, high)

	// Output:
	// partition 2 offset 0: object-1 entries
	// partition 2 offset 1: object-2 entries
	// watermarks after trim: [2, 2)
}
