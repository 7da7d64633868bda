package metadata

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Message generators shared by the codec tests, the fuzz seeds and the
// benchmarks. Every generator takes its random source from the caller so
// that a failure can be replayed from the printed seed.

var testObject = ObjectRef{AZ: "use1-az4", Bucket: "wal--use1-az4--x-s3", Key: "wal/00000000000001f4/broker-3/000000000000a2c1.seg"}

// objectHeaderBytes is where the first section of a test object starts,
// standing in for the combined object's header.
const objectHeaderBytes = 16

// typicalMessage is one flush of one busy topic: partitions 0..n-1 of one
// topic under uniform load (offsets 5e6 ± 5e4), 10-50 records and 1-8 KiB
// per section, sections contiguous in the object, codec none or zstd with
// the given probability of zstd, timestamps within a 100 ms flush.
func typicalMessage(r *rand.Rand, n int, zstdShare float64) *Message {
	m := &Message{Object: testObject, WriterBrokerID: 3}
	pos := int64(objectHeaderBytes)
	base := int64(1_760_000_000_000) + r.Int64N(1_000_000)
	for p := range n {
		first := 5_000_000 + r.Int64N(100_001) - 50_000
		e := Entry{
			Partition:      TopicPartition{Topic: "orders", Partition: int32(p)},
			RecordEpoch:    7,
			PublisherEpoch: 7,
			FirstOffset:    first,
			LastOffset:     first + 9 + r.Int64N(41),
			MaxTimestamp:   base + r.Int64N(100),
			Object:         testObject,
			Position:       pos,
			Length:         1024 + r.Int64N(7*1024+1),
			Checksum:       r.Uint64(),
			WriterBrokerID: 3,
		}
		e.UncompressedSize = e.Length
		if r.Float64() < zstdShare {
			e.Codec = CodecZstd
			e.UncompressedSize = e.Length * (20 + r.Int64N(21)) / 10
		}
		pos += e.Length
		m.Entries = append(m.Entries, e)
	}
	return m
}

// scatteredMessage is a hard case for the codec: entries of several topics
// (some with ids, some without), partitions far apart, offsets anywhere
// below 1e9, sections with gaps between them (the message holds a subset of
// the object), all three codecs, varied epochs and some republished
// entries.
func scatteredMessage(r *rand.Rand, topics, n int) *Message {
	m := &Message{Object: testObject, WriterBrokerID: 3}
	pos := int64(objectHeaderBytes)
	base := int64(1_760_000_000_000) + r.Int64N(1_000_000)
	for range n {
		t := r.IntN(topics)
		tp := TopicPartition{Topic: fmt.Sprintf("service-%02d.events", t), Partition: int32(r.IntN(1000))}
		if t%2 == 0 {
			tp.TopicID = [16]byte{byte(t), 0x5e, 0xed}
		}
		pos += r.Int64N(8 * 1024)
		first := r.Int64N(1_000_000_000)
		e := Entry{
			Partition:      tp,
			RecordEpoch:    int32(r.IntN(50)),
			FirstOffset:    first,
			LastOffset:     first + r.Int64N(500),
			MaxTimestamp:   base + r.Int64N(100),
			Object:         testObject,
			Position:       pos,
			Length:         1 + r.Int64N(64*1024),
			Codec:          Codec(r.IntN(3)),
			Checksum:       r.Uint64(),
			WriterBrokerID: 3,
		}
		e.PublisherEpoch = e.RecordEpoch
		if r.IntN(10) == 0 {
			e.PublisherEpoch += 1 + int32(r.IntN(3))
		}
		e.UncompressedSize = e.Length
		if e.Codec != CodecNone {
			e.UncompressedSize = e.Length * (10 + r.Int64N(31)) / 10
		}
		pos += e.Length
		m.Entries = append(m.Entries, e)
	}
	return m
}

// randomMessage draws from the whole space of valid messages, with extreme
// values, so that the round-trip property covers every column, width and
// flag: markers-only messages, custom metadata, topic ids, other writers,
// entries given out of canonical order.
func randomMessage(r *rand.Rand) *Message {
	pick := func(vals ...int64) int64 { return vals[r.IntN(len(vals))] }
	small := func() int64 { return pick(0, 1, 2, 127, 128, 1<<20, 1<<31-1, 1<<62, 1<<63-1) }
	topic := func() TopicPartition {
		var tp TopicPartition
		switch r.IntN(3) {
		case 0:
			tp.Topic = fmt.Sprintf("t%d", r.IntN(4))
		case 1:
			tp.TopicID = [16]byte{1 + byte(r.IntN(3)), 0xff}
		default:
			tp.Topic = fmt.Sprintf("t%d", r.IntN(4))
			tp.TopicID = [16]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 + byte(r.IntN(2))}
		}
		tp.Partition = int32(pick(0, 1, 5, 1000, 1<<31-1, r.Int64N(64)))
		return tp
	}
	m := &Message{WriterBrokerID: int32(pick(0, 1, 3, 1<<31-1))}
	n := r.IntN(20)
	if r.IntN(10) == 0 {
		n = 0
	}
	if n > 0 {
		m.Object = ObjectRef{AZ: []string{"", "use1-az1"}[r.IntN(2)], Bucket: "b", Key: fmt.Sprintf("k/%d", r.IntN(100))}
	}
	pos := pick(0, 16, 1<<40)
	// A third of the messages carry digests (version 5), some of their
	// entries none.
	digests := r.IntN(3) == 0
	for range n {
		pos += pick(0, 0, 0, 1, r.Int64N(1<<20))
		e := Entry{
			Partition:      topic(),
			RecordEpoch:    int32(pick(0, 1, 7, 1<<31-1)),
			Object:         m.Object,
			Position:       pos,
			Length:         1 + r.Int64N(pick(1, 1<<13, 1<<30)),
			Codec:          Codec(r.IntN(3)),
			Checksum:       uint64(pick(0, -1, r.Int64())),
			MaxTimestamp:   pick(-1, 0, 1_760_000_000_000+r.Int64N(100), -1<<63, 1<<63-1),
			WriterBrokerID: m.WriterBrokerID,
		}
		e.FirstOffset = small()
		e.LastOffset = e.FirstOffset + min(pick(0, 1, 49, r.Int64N(1<<40)), 1<<63-1-e.FirstOffset)
		e.PublisherEpoch = e.RecordEpoch
		if r.IntN(4) == 0 {
			e.PublisherEpoch += int32(min(pick(1, 2, 1<<20), int64(1<<31-1-e.RecordEpoch)))
		}
		e.UncompressedSize = e.Length
		if e.Codec != CodecNone {
			e.UncompressedSize = 1 + r.Int64N(1<<30)
		}
		if r.IntN(5) == 0 {
			e.CustomMetadata = []byte(fmt.Sprintf("custom-%d", r.IntN(1000)))
		}
		if r.IntN(8) == 0 {
			e.WriterBrokerID = int32(pick(0, 2, 1<<31-1))
		}
		if digests {
			e.Digest = uint64(pick(0, 1, -1, r.Int64()))
			if e.Digest != 0 {
				// Begun at the entry, at offset 0, or between.
				e.DigestFrom = e.FirstOffset
				switch r.IntN(3) {
				case 1:
					e.DigestFrom = 0
				case 2:
					if e.FirstOffset > 0 {
						e.DigestFrom = r.Int64N(e.FirstOffset)
					}
				}
			}
		}
		pos += e.Length
		m.Entries = append(m.Entries, e)
	}
	k := r.IntN(4)
	if len(m.Entries) == 0 && k == 0 {
		k = 1 + r.IntN(3)
	}
	for range k {
		m.Markers = append(m.Markers, EpochStart{
			Partition:      topic(),
			Epoch:          int32(pick(0, 6, 1<<31-1)),
			StartOffset:    small(),
			LeaderBrokerID: int32(pick(0, 2, 1<<31-1)),
		})
	}
	r.Shuffle(len(m.Entries), func(i, j int) { m.Entries[i], m.Entries[j] = m.Entries[j], m.Entries[i] })
	return m
}

// withDigests gives every entry of m a random nonzero Digest, as a
// publisher that keeps digests does: each entry's chain begins at the
// entry with probability startsShare, and otherwise where the
// publisher's leadership began, about 1e5 offsets back (never below 0).
// It returns m.
func withDigests(r *rand.Rand, m *Message, startsShare float64) *Message {
	for i := range m.Entries {
		e := &m.Entries[i]
		e.Digest = r.Uint64() | 1
		e.DigestFrom = e.FirstOffset
		if r.Float64() >= startsShare {
			e.DigestFrom = max(0, e.FirstOffset-100000-r.Int64N(1000))
		}
	}
	return m
}

// canonical returns a copy of m as DecodeMessage returns it: entries by
// position, markers sorted, empty custom metadata and empty slices as nil.
func canonical(m *Message) *Message {
	c := *m
	c.Entries = slices.Clone(m.Entries)
	c.Markers = slices.Clone(m.Markers)
	if len(c.Entries) == 0 {
		c.Entries = nil
	}
	if len(c.Markers) == 0 {
		c.Markers = nil
	}
	for i := range c.Entries {
		if len(c.Entries[i].CustomMetadata) == 0 {
			c.Entries[i].CustomMetadata = nil
		}
	}
	slices.SortFunc(c.Entries, func(a, b Entry) int { return cmp.Compare(a.Position, b.Position) })
	slices.SortFunc(c.Markers, func(a, b EpochStart) int { return compareMarkers(&a, &b) })
	return &c
}
