package combiner_test

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// A leader encodes the batches of two partitions into one object; a
// follower of one of them decodes its section from that section's byte
// range alone, as it would after one range GET.
func ExampleEncoder() {
	enc, err := combiner.NewEncoder(combiner.EncoderOptions{Codec: metadata.CodecZstd})
	if err != nil {
		log.Fatal(err)
	}
	defer enc.Close()

	orders := metadata.TopicPartition{Topic: "orders", Partition: 0}
	clicks := metadata.TopicPartition{Topic: "clicks", Partition: 3}
	line := []byte(`{"level":"INFO","msg":"order placed","service":"checkout"}` + "\n")
	object, sections, err := enc.Encode(nil, []combiner.SectionInput{
		{Partition: orders, Batches: []storage.Batch{
			{Epoch: 5, FirstOffset: 100, LastOffset: 149, MaxTimestamp: 1_700_000_000_000, Data: bytes.Repeat(line, 50)},
			{Epoch: 5, FirstOffset: 150, LastOffset: 159, MaxTimestamp: 1_700_000_000_500, Data: bytes.Repeat(line, 10)},
		}},
		{Partition: clicks, Batches: []storage.Batch{
			{Epoch: 2, FirstOffset: 7, LastOffset: 7, MaxTimestamp: 1_700_000_000_100, Data: []byte("one small batch")},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range sections {
		fmt.Printf("%s epoch %d offsets %d-%d: %s, %d bytes of batches\n",
			s.Partition, s.Epoch, s.FirstOffset, s.LastOffset, s.Codec, s.UncompressedSize)
	}

	// The follower knows the section from its metadata entry, and fetches
	// only its byte range.
	entry := sections[0].Entry(metadata.ObjectRef{Bucket: "wal--use1-az4--x-s3", Key: "obj-1"}, 5, 1)
	fetched := bytes.Clone(object[entry.Position : entry.Position+entry.Length])

	dec, err := combiner.NewDecoder(combiner.DecoderOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer dec.Close()
	batches, err := dec.DecodeSection(nil, fetched, combiner.SectionOf(entry))
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range batches {
		fmt.Printf("batch %d-%d, %d bytes\n", b.FirstOffset, b.LastOffset, len(b.Data))
	}

	// A damaged range is rejected, naming the partition.
	fetched[len(fetched)/2] ^= 1
	_, err = dec.DecodeSection(nil, fetched, combiner.SectionOf(entry))
	var ce *combiner.CorruptError
	if errors.As(err, &ce) {
		fmt.Println("rejected:", errors.Is(err, combiner.ErrCorrupt), ce.Partition, ce.Reason[:17])
	}
	// Output:
	// orders-0 epoch 5 offsets 100-159: zstd, 3540 bytes of batches
	// clicks-3 epoch 2 offsets 7-7: none, 15 bytes of batches
	// batch 100-149, 2950 bytes
	// batch 150-159, 590 bytes
	// rejected: true orders-0 checksum mismatch
}

// A Builder collects batches of partitions placed on different brokers and
// cuts them, when due, into objects laid out by follower set. Here topic A
// is followed by brokers 1 and 2, topic B by 3 and 4: a small flush gives
// one object per follower set.
func ExampleBuilder() {
	placement := func(tp metadata.TopicPartition) []int32 {
		if tp.Topic == "A" {
			return []int32{1, 2}
		}
		return []int32{3, 4}
	}
	b, err := combiner.NewBuilder(combiner.BuilderConfig{
		Interval:  200 * time.Millisecond,
		Followers: placement,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for i := range 4 {
		tp := metadata.TopicPartition{Topic: []string{"A", "B"}[i%2], Partition: int32(i / 2)}
		batch := storage.Batch{Epoch: 1, FirstOffset: 0, LastOffset: 9, MaxTimestamp: 1, Data: []byte("ten records")}
		if err := b.Add(tp, batch, now); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("due now:", b.Due(now))
	now = now.Add(200 * time.Millisecond)
	fmt.Println("due after the interval:", b.Due(now))

	objects, err := b.Cut(nil)
	if err != nil {
		log.Fatal(err)
	}
	for i, o := range objects {
		fmt.Printf("object %d (%d bytes):", i, len(o.Data))
		for j, s := range o.Sections {
			fmt.Printf(" %s%v", s.Partition, o.Followers[j])
		}
		fmt.Println()
	}
	// Output:
	// due now: false
	// due after the interval: true
	// object 0 (134 bytes): A-0[1 2] A-1[1 2]
	// object 1 (134 bytes): B-0[3 4] B-1[3 4]
}
