package kafkalog

import (
	"fmt"
	"math/rand/v2"

	"github.com/activetier/activetier/metadata"
)

// flushMessage is what a leader publishes for one combined object: an entry
// for each of parts, sections contiguous in the object, 10-50 records and
// 1-8 KiB per section, a third of them zstd-compressed, as a busy broker's
// 100 ms flush produces. r makes it reproducible from a seed.
func flushMessage(r *rand.Rand, writer int32, key string, parts []metadata.TopicPartition) *metadata.Message {
	obj := metadata.ObjectRef{
		AZ:     "use1-az4",
		Bucket: "wal--use1-az4--x-s3",
		Key:    fmt.Sprintf("wal/broker-%d/%s.seg", writer, key),
	}
	m := &metadata.Message{Object: obj, WriterBrokerID: writer}
	pos := int64(16)
	ts := int64(1_760_000_000_000) + r.Int64N(1_000_000)
	for _, tp := range parts {
		first := 5_000_000 + r.Int64N(100_000)
		e := metadata.Entry{
			Partition:      tp,
			RecordEpoch:    7,
			PublisherEpoch: 7,
			FirstOffset:    first,
			LastOffset:     first + 9 + r.Int64N(41),
			MaxTimestamp:   ts + r.Int64N(100),
			Object:         obj,
			Position:       pos,
			Length:         1024 + r.Int64N(7*1024+1),
			Checksum:       r.Uint64(),
			WriterBrokerID: writer,
		}
		e.UncompressedSize = e.Length
		if r.IntN(3) == 0 {
			e.Codec = metadata.CodecZstd
			e.UncompressedSize = e.Length * (20 + r.Int64N(21)) / 10
		}
		pos += e.Length
		m.Entries = append(m.Entries, e)
	}
	return m
}

// topicPartitions returns partitions 0..n-1 of topic.
func topicPartitions(topic string, n int) []metadata.TopicPartition {
	out := make([]metadata.TopicPartition, n)
	for i := range out {
		out[i] = metadata.TopicPartition{Topic: topic, Partition: int32(i)}
	}
	return out
}
