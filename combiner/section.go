package combiner

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// SectionInput is one section to encode: whole batches of one partition,
// all of one epoch, in offset order.
type SectionInput struct {
	Partition metadata.TopicPartition
	Batches   []storage.Batch
}

// SectionInfo describes one section of an encoded object: what the footer
// index says about it, and what a reader needs to fetch, verify and decode
// it on its own.
type SectionInfo struct {
	Partition metadata.TopicPartition
	// Epoch is the record leader epoch of every batch in the section.
	Epoch int32
	// FirstOffset and LastOffset bound the section's records, inclusive.
	FirstOffset int64
	LastOffset  int64
	// MaxTimestamp is the largest MaxTimestamp of the section's batches.
	MaxTimestamp int64
	// Position and Length are the section's byte range in the object.
	Position int64
	Length   int64
	// Codec is the codec the section's payload was stored with, which is
	// CodecNone when compression did not pay.
	Codec metadata.Codec
	// UncompressedSize is the total length of the section's batch data.
	UncompressedSize int64
	// Checksum is the xxhash64 stored in the section's last 8 bytes. It
	// covers the section's identity (Partition, Epoch, FirstOffset,
	// LastOffset) as well as its bytes, so a section verifies only under
	// the entry it was written for.
	Checksum uint64
	// Batches is the number of batches in the section. Zero means unknown,
	// as in a SectionInfo rebuilt from a metadata entry by SectionOf.
	Batches int
}

// Entry returns the metadata entry that announces the section, stored in
// obj, published by a leader at publisherEpoch running on writerBrokerID.
// Its Digest and DigestStarts are zero: they describe the partition's log
// up to the section, which the section does not know, and are the
// publisher's to set.
func (s SectionInfo) Entry(obj metadata.ObjectRef, publisherEpoch, writerBrokerID int32) metadata.Entry {
	return metadata.Entry{
		Partition:        s.Partition,
		RecordEpoch:      s.Epoch,
		PublisherEpoch:   publisherEpoch,
		FirstOffset:      s.FirstOffset,
		LastOffset:       s.LastOffset,
		MaxTimestamp:     s.MaxTimestamp,
		Object:           obj,
		Position:         s.Position,
		Length:           s.Length,
		Codec:            s.Codec,
		UncompressedSize: s.UncompressedSize,
		Checksum:         s.Checksum,
		WriterBrokerID:   writerBrokerID,
	}
}

// SectionOf returns what a metadata entry says about its section: all a
// follower needs to fetch e.Position..e.Position+e.Length of e.Object and
// pass the bytes to Decoder.DecodeSection. Batches is zero (unknown),
// since entries do not carry the batch count. What an entry says beyond
// its section (publisher, writer, digest, custom metadata) is not part of
// the result.
func SectionOf(e metadata.Entry) SectionInfo {
	return SectionInfo{
		Partition:        e.Partition,
		Epoch:            e.RecordEpoch,
		FirstOffset:      e.FirstOffset,
		LastOffset:       e.LastOffset,
		MaxTimestamp:     e.MaxTimestamp,
		Position:         e.Position,
		Length:           e.Length,
		Codec:            e.Codec,
		UncompressedSize: e.UncompressedSize,
		Checksum:         e.Checksum,
	}
}

// validPartition reports why tp cannot name a section, or "" if it can.
func validPartition(tp metadata.TopicPartition) string {
	if tp.Topic == "" && tp.TopicID == ([16]byte{}) {
		return "has neither topic name nor topic ID"
	}
	if tp.Partition < 0 {
		return "has a negative partition number"
	}
	return ""
}

// identitySize is the fixed part of a section's identity: topic ID,
// partition, epoch, first and last offset. The topic name follows it.
const identitySize = 16 + 4 + 4 + 8 + 8

// identitySeed returns the xxhash64 of the identity of the section s
// describes, the seed of its checksum (doc.go gives the layout).
func identitySeed(s *SectionInfo) uint64 {
	var b [identitySize]byte
	copy(b[:16], s.Partition.TopicID[:])
	binary.LittleEndian.PutUint32(b[16:], uint32(s.Partition.Partition))
	binary.LittleEndian.PutUint32(b[20:], uint32(s.Epoch))
	binary.LittleEndian.PutUint64(b[24:], uint64(s.FirstOffset))
	binary.LittleEndian.PutUint64(b[32:], uint64(s.LastOffset))
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(b[:])
	_, _ = d.WriteString(s.Partition.Topic)
	return d.Sum64()
}

// sectionChecksum returns the checksum that a section of the given version
// whose bytes before the checksum are body must carry to verify as the
// section s describes. From version 2 it is the xxhash64 of body seeded
// with the identity's hash; version 1 hashed body alone.
func sectionChecksum(version byte, body []byte, s *SectionInfo) uint64 {
	if version == formatVersion1 {
		return xxhash.Sum64(body)
	}
	var d xxhash.Digest
	d.ResetWithSeed(identitySeed(s))
	_, _ = d.Write(body)
	return d.Sum64()
}
