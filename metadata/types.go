package metadata

import (
	"cmp"
	"context"
	"errors"
	"fmt"
)

// TopicPartition names one partition of the replicated log. TopicID is the
// topic's 16-byte UUID where the broker has one (Kafka does); Topic is the
// topic's name. At least one of the two must be set; when both are, both are
// part of the identity.
type TopicPartition struct {
	TopicID   [16]byte
	Topic     string
	Partition int32
}

// String formats the partition as "topic-partition", the form Kafka logs use.
func (tp TopicPartition) String() string {
	if tp.Topic == "" && tp.TopicID != ([16]byte{}) {
		return fmt.Sprintf("%x-%d", tp.TopicID, tp.Partition)
	}
	return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
}

// Compare orders partitions by topic name, then topic ID (bytewise), then
// partition number, returning -1, 0 or +1 as tp sorts before, with or
// after o; 0 only for equal partitions. It is the order of the metadata
// format's markers and commits, and the one every list of partitions the
// library hands out or works through follows, so that two runs over the
// same partitions take them in the same order: pass it to slices.SortFunc
// as metadata.TopicPartition.Compare.
func (tp TopicPartition) Compare(o TopicPartition) int {
	return cmp.Or(keyOf(tp).compare(keyOf(o)), cmp.Compare(tp.Partition, o.Partition))
}

// Codec identifies how a section's bytes are compressed in a combined object.
type Codec uint8

// The codecs a section may use. The numeric values are part of the object and
// metadata formats and never change.
const (
	CodecNone Codec = 0
	CodecZstd Codec = 1
	CodecS2   Codec = 2
)

// String returns the codec's name as used in flags and configuration.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecZstd:
		return "zstd"
	case CodecS2:
		return "s2"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// Valid reports whether c is one of the defined codecs.
func (c Codec) Valid() bool { return c <= CodecS2 }

// ParseCodec maps a codec name ("none", "zstd", "s2") to its Codec.
func ParseCodec(name string) (Codec, error) {
	switch name {
	case "none":
		return CodecNone, nil
	case "zstd":
		return CodecZstd, nil
	case "s2":
		return CodecS2, nil
	}
	return 0, fmt.Errorf("metadata: unknown codec %q (want none, zstd or s2)", name)
}

// ObjectRef locates a combined object: the availability zone whose bucket
// holds it, the bucket, and the key within the bucket.
type ObjectRef struct {
	AZ     string
	Bucket string
	Key    string
}

// String formats the reference as "bucket/key".
func (r ObjectRef) String() string { return r.Bucket + "/" + r.Key }

// Entry describes one partition's section of a combined object: which
// records it holds, where they are, and who published them. It corresponds to
// KIP-1176's RemoteWalLogSegmentMetadata.
type Entry struct {
	Partition TopicPartition
	// RecordEpoch is the leader epoch the records were written in.
	RecordEpoch int32
	// PublisherEpoch is the leader epoch of the leader that published this
	// entry. It is greater than RecordEpoch when a new leader republishes
	// records written under an earlier epoch.
	PublisherEpoch int32
	// FirstOffset and LastOffset bound the records in the section, inclusive.
	FirstOffset int64
	LastOffset  int64
	// MaxTimestamp is the largest record timestamp in the section, in
	// milliseconds since the Unix epoch.
	MaxTimestamp int64
	// Object is where the section is stored; Position and Length are its byte
	// range within the object.
	Object   ObjectRef
	Position int64
	Length   int64
	// Codec is the section's compression; UncompressedSize its payload size
	// after decompression.
	Codec            Codec
	UncompressedSize int64
	// Checksum is the xxhash64 checksum stored with the section.
	Checksum uint64
	// WriterBrokerID is the broker that uploaded the object.
	WriterBrokerID int32
	// Digest is the partition log's rolling digest (package digest) after
	// the section's last record, as the publisher computed it; zero when
	// the publisher kept none. Replicas compare it with the digest of what
	// they applied. A message with a digest is encoded as version 5, which
	// releases before digests reject (see the package doc's wire format).
	Digest uint64
	// DigestFrom is where the publisher's chain begins: the offset at
	// which digest.Origin is its value, at or below FirstOffset; zero when
	// there is no Digest. A leader that knew no value for its log's end
	// begins a chain there. Values of chains that begin at the same offset
	// are comparable, of others not: a replica compares its digest with
	// an entry's only where both chains begin at the same offset.
	DigestFrom int64
	// CustomMetadata is opaque to activetier, as in KIP-405's
	// RemoteLogSegmentMetadata.CustomMetadata.
	CustomMetadata []byte
}

// EpochStart records that a leader took over a partition at Epoch, writing
// its first record at StartOffset. Followers build their view of the leader's
// epoch lineage from these markers.
type EpochStart struct {
	Partition   TopicPartition
	Epoch       int32
	StartOffset int64
	// LeaderBrokerID is the broker that became leader.
	LeaderBrokerID int32
}

// Message is the unit written to one metadata partition: every entry of one
// combined object that the readers of that partition need, and any epoch-start
// markers and commits. A message may hold only markers and commits, in which
// case Object is empty.
type Message struct {
	// Object is the combined object every entry of the message refers to.
	Object ObjectRef
	// WriterBrokerID is the broker that published the message.
	WriterBrokerID int32
	Entries        []Entry
	Markers        []EpochStart
	// Commits are the committed offsets the writer publishes as leader:
	// what direct readers may serve. A message with commits is encoded as
	// version 3; one without, as version 2, which earlier releases read.
	Commits []Commit
}

// Commit says that the records of Partition below Offset are committed, as
// published by the leader of Epoch: every in-sync follower of that leader
// has applied them (Kafka's high watermark). A committed record is never
// truncated by a later leader elected from the in-sync set, so a direct
// reader (package directread) may hand it to consumers.
type Commit struct {
	Partition TopicPartition
	Epoch     int32
	Offset    int64
}

// Record is one message as stored in a Log partition.
type Record struct {
	Partition int32
	Offset    int64
	Value     []byte
}

// Log is a partitioned, append-only log of metadata messages, like Kafka's
// __remote_wal_log_metadata topic. Implementations are safe for concurrent
// use. Offsets start at 0 and are dense within a partition until trimmed.
type Log interface {
	// Partitions returns the number of partitions, fixed for the log's life.
	Partitions() int32
	// Append adds value to the end of partition and returns its offset.
	Append(ctx context.Context, partition int32, value []byte) (int64, error)
	// Read returns up to max records of partition starting at offset from,
	// in offset order. If none is available yet it may wait (a long poll)
	// until one is, ctx is done, or an implementation-defined wait elapses,
	// and then returns an empty slice and a nil error. Reading below the
	// trim point returns ErrOffsetOutOfRange.
	Read(ctx context.Context, partition int32, from int64, max int) ([]Record, error)
	// Watermarks returns the partition's low watermark (first offset still
	// stored) and high watermark (offset the next Append will get).
	Watermarks(ctx context.Context, partition int32) (low, high int64, err error)
	// Trim removes the records of partition below offset before. Trimming at
	// or below the low watermark does nothing; trimming past the high
	// watermark is an error.
	Trim(ctx context.Context, partition int32, before int64) error
	// Close releases the log's resources. Calls after Close return ErrClosed.
	Close() error
}

// Errors returned by Log implementations, to be tested with errors.Is.
var (
	// ErrClosed is returned by a Log after Close.
	ErrClosed = errors.New("metadata: log closed")
	// ErrOffsetOutOfRange is returned when reading below the low watermark,
	// or trimming past the high watermark.
	ErrOffsetOutOfRange = errors.New("metadata: offset out of range")
	// ErrUnknownPartition is returned for a partition outside [0, Partitions()).
	ErrUnknownPartition = errors.New("metadata: unknown partition")
)
