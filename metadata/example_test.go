package metadata_test

import (
	"fmt"

	"github.com/activetier/activetier/metadata"
)

// A leader publishes the sections of one combined object: it encodes the
// message, appends it to the metadata log, and a follower decodes it.
func ExampleAppendMessage() {
	obj := metadata.ObjectRef{AZ: "use1-az4", Bucket: "wal--use1-az4--x-s3", Key: "wal/broker-3/000042"}
	entry := func(p int32, first, last, pos, length int64) metadata.Entry {
		return metadata.Entry{
			Partition:   metadata.TopicPartition{Topic: "orders", Partition: p},
			RecordEpoch: 7, PublisherEpoch: 7,
			FirstOffset: first, LastOffset: last, MaxTimestamp: 1_760_000_000_050,
			Object: obj, Position: pos, Length: length, UncompressedSize: length,
			Checksum: 0x9e3779b97f4a7c15, WriterBrokerID: 3,
		}
	}
	m := &metadata.Message{
		Object:         obj,
		WriterBrokerID: 3,
		// Given in any order; encoded, and decoded, in object order.
		Entries: []metadata.Entry{
			entry(1, 5_000_120, 5_000_149, 4112, 2048),
			entry(0, 5_010_000, 5_010_019, 16, 4096),
		},
	}
	b, err := metadata.AppendMessage(nil, m)
	if err != nil {
		fmt.Println(err)
		return
	}
	got, err := metadata.DecodeMessage(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d bytes\n", len(b))
	for _, e := range got.Entries {
		fmt.Printf("%s offsets %d-%d at %s [%d, %d)\n", e.Partition, e.FirstOffset, e.LastOffset, e.Object, e.Position, e.Position+e.Length)
	}
	// Output:
	// 115 bytes
	// orders-0 offsets 5010000-5010019 at wal--use1-az4--x-s3/wal/broker-3/000042 [16, 4112)
	// orders-1 offsets 5000120-5000149 at wal--use1-az4--x-s3/wal/broker-3/000042 [4112, 6160)
}

// Four brokers, two metadata partitions: each entry goes to the metadata
// partition its followers read, and each follower reads one partition.
func ExamplePartitioner_Split() {
	p, err := metadata.NewPartitioner(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	obj := metadata.ObjectRef{Bucket: "wal", Key: "obj-1"}
	m := &metadata.Message{Object: obj, WriterBrokerID: 0}
	for i := range int32(3) {
		m.Entries = append(m.Entries, metadata.Entry{
			Partition:   metadata.TopicPartition{Topic: "a", Partition: i},
			FirstOffset: 10, LastOffset: 19, Object: obj,
			Position: int64(i) * 100, Length: 100, UncompressedSize: 100,
		})
	}
	// Broker 0 leads everything; a-0 and a-1 are followed by broker 1,
	// a-2 by brokers 2 and 3.
	followers := map[int32][]int32{0: {1}, 1: {1}, 2: {2, 3}}
	routed, err := p.Split(m, func(tp metadata.TopicPartition) []int32 { return followers[tp.Partition] })
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range routed {
		fmt.Printf("metadata partition %d:", r.Partition)
		for _, e := range r.Message.Entries {
			fmt.Printf(" %s", e.Partition)
		}
		fmt.Println()
	}
	for broker := range int32(4) {
		part, _ := p.For(broker)
		fmt.Printf("broker %d reads %d\n", broker, part)
	}
	// Output:
	// metadata partition 0: a-2
	// metadata partition 1: a-0 a-1 a-2
	// broker 0 reads 0
	// broker 1 reads 1
	// broker 2 reads 0
	// broker 3 reads 1
}
