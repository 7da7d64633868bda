package metadata

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// appendNaive is the baseline the codec's size is measured against: the
// encoding one writes first, with every field of every entry as a varint
// (the checksum as 8 bytes) and the topic name per entry, the object once
// per message. It is what the 30-byte-per-partition estimate of the
// KIP-1176 discussion has in mind, give or take the topic name
// (docs/design.md, "Worked cost examples from the KIP-1176 discussion").
func appendNaive(dst []byte, m *Message) []byte {
	dst = appendString(dst, m.Object.AZ)
	dst = appendString(dst, m.Object.Bucket)
	dst = appendString(dst, m.Object.Key)
	dst = binary.AppendUvarint(dst, uint64(m.WriterBrokerID))
	dst = binary.AppendUvarint(dst, uint64(len(m.Entries)))
	for i := range m.Entries {
		e := &m.Entries[i]
		dst = appendString(dst, e.Partition.Topic)
		dst = binary.AppendUvarint(dst, uint64(e.Partition.Partition))
		dst = binary.AppendUvarint(dst, uint64(e.RecordEpoch))
		dst = binary.AppendUvarint(dst, uint64(e.PublisherEpoch))
		dst = binary.AppendUvarint(dst, uint64(e.FirstOffset))
		dst = binary.AppendUvarint(dst, uint64(e.LastOffset))
		dst = binary.AppendVarint(dst, e.MaxTimestamp)
		dst = binary.AppendUvarint(dst, uint64(e.Position))
		dst = binary.AppendUvarint(dst, uint64(e.Length))
		dst = append(dst, byte(e.Codec))
		dst = binary.AppendUvarint(dst, uint64(e.UncompressedSize))
		dst = binary.LittleEndian.AppendUint64(dst, e.Checksum)
		dst = binary.AppendUvarint(dst, uint64(e.WriterBrokerID))
		dst = binary.AppendUvarint(dst, uint64(len(e.CustomMetadata)))
		if e.Digest != 0 {
			// The digest as 8 bytes and where its chain begins as a
			// varint back from the first offset: only for the
			// workloads with digests, so the others' baseline stays
			// what it was.
			dst = binary.LittleEndian.AppendUint64(dst, e.Digest)
			dst = binary.AppendUvarint(dst, uint64(e.FirstOffset-e.DigestFrom))
		}
	}
	return dst
}

// sizeCase is one workload for BenchmarkMessageSize. Sizes are averaged
// over many messages drawn with a fixed seed, so the metrics are exact and
// repeatable rather than sampled.
type sizeCase struct {
	name string
	gen  func(r *rand.Rand) *Message
}

// BenchmarkMessageSize reports the encoded size per entry (bytes/entry) of
// each workload, next to the naive baseline (naive-bytes/entry) and JSON
// (json-bytes/entry). The ns/op is that of encoding one message.
func BenchmarkMessageSize(b *testing.B) {
	sizeCases := []sizeCase{
		{"typical/100-partitions-none", func(r *rand.Rand) *Message { return typicalMessage(r, 100, 0) }},
		{"typical/100-partitions-half-zstd", func(r *rand.Rand) *Message { return typicalMessage(r, 100, 0.5) }},
		{"typical/100-partitions-zstd", func(r *rand.Rand) *Message { return typicalMessage(r, 100, 1) }},
		{"small/8-partitions-half-zstd", func(r *rand.Rand) *Message { return typicalMessage(r, 8, 0.5) }},
		{"small/1-partition", func(r *rand.Rand) *Message { return typicalMessage(r, 1, 0) }},
		{"worst/10-topics-scattered", func(r *rand.Rand) *Message { return scatteredMessage(r, 10, 100) }},
		// The same workloads with every entry carrying a random nonzero
		// digest (version 5), and with a fifth of them starting a chain.
		{"digests/typical/100-partitions-half-zstd", func(r *rand.Rand) *Message { return withDigests(r, typicalMessage(r, 100, 0.5), 0) }},
		{"digests/typical/100-partitions-half-zstd-starts", func(r *rand.Rand) *Message { return withDigests(r, typicalMessage(r, 100, 0.5), 0.2) }},
		{"digests/small/8-partitions-half-zstd", func(r *rand.Rand) *Message { return withDigests(r, typicalMessage(r, 8, 0.5), 0) }},
		{"digests/small/1-partition", func(r *rand.Rand) *Message { return withDigests(r, typicalMessage(r, 1, 0), 0) }},
		{"digests/worst/10-topics-scattered", func(r *rand.Rand) *Message { return withDigests(r, scatteredMessage(r, 10, 100), 0.2) }},
	}
	for _, sc := range sizeCases {
		b.Run(sc.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(42, 42))
			msgs := make([]*Message, 64)
			var entries, size, naive, js int
			for i := range msgs {
				msgs[i] = sc.gen(r)
				enc, err := AppendMessage(nil, msgs[i])
				if err != nil {
					b.Fatal(err)
				}
				j, err := json.Marshal(msgs[i])
				if err != nil {
					b.Fatal(err)
				}
				entries += len(msgs[i].Entries)
				size += len(enc)
				naive += len(appendNaive(nil, msgs[i]))
				js += len(j)
			}
			b.ReportAllocs()
			buf := make([]byte, 0, 64<<10)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := AppendMessage(buf[:0], msgs[i%len(msgs)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size)/float64(entries), "bytes/entry")
			b.ReportMetric(float64(naive)/float64(entries), "naive-bytes/entry")
			b.ReportMetric(float64(js)/float64(entries), "json-bytes/entry")
		})
	}
}

// throughputMessage is the message the throughput benchmarks encode and
// decode: one flush of 100 partitions, half of them zstd.
func throughputMessage() *Message { return typicalMessage(rand.New(rand.NewPCG(7, 7)), 100, 0.5) }

func BenchmarkAppendMessage(b *testing.B) {
	m := throughputMessage()
	enc, err := AppendMessage(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 2*len(enc))
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = AppendMessage(buf[:0], m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(m.Entries)), "ns/entry")
}

func BenchmarkDecodeMessage(b *testing.B) {
	m := throughputMessage()
	enc, err := AppendMessage(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMessage(enc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(m.Entries)), "ns/entry")
}

// BenchmarkJSONMarshal and BenchmarkJSONUnmarshal are the throughput
// baselines: encoding/json on the same message. SetBytes is the size of our
// encoding in every benchmark, so MB/s compare messages per second.
func BenchmarkJSONMarshal(b *testing.B) {
	m := throughputMessage()
	enc, err := AppendMessage(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(m.Entries)), "ns/entry")
}

func BenchmarkJSONUnmarshal(b *testing.B) {
	m := throughputMessage()
	enc, err := AppendMessage(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	js, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		var out Message
		if err := json.Unmarshal(js, &out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(m.Entries)), "ns/entry")
}
