// Package metadata is the vocabulary of what a leader uploaded and the way
// it travels to followers: the per-partition [Entry], the [EpochStart]
// marker, the [Message] that carries both for one combined object, its
// compact binary codec ([AppendMessage], [DecodeMessage]), the [Log]
// interface of the partitioned log that stores messages, and the
// follower-affinity [Partitioner] that decides which log partition a
// message goes to.
//
// It does no I/O and decides nothing: the fencing package decides what a
// follower does with an entry, the walstore engines publish and read
// messages, and kafkalog or memstore store them.
//
// # Vocabulary, and how it maps to KIP-1176 and KIP-405
//
// An [Entry] is KIP-1176's RemoteWalLogSegmentMetadata, the active-segment
// counterpart of KIP-405's RemoteLogSegmentMetadata: one partition's section
// of a combined object. Where KIP-405 names a remote segment by a segment id
// and keeps its location in plugin-specific CustomMetadata (KIP-1176
// proposes putting the bucket name there), an Entry names its location
// directly (AZ, bucket, key, byte range), because followers in every AZ must
// reach the leader's bucket without a plugin; CustomMetadata is still carried
// for whatever else a deployment needs. KIP-405's start and end offset, max
// timestamp, size and broker id map to FirstOffset, LastOffset, MaxTimestamp,
// Length/UncompressedSize and WriterBrokerID. KIP-405's segmentLeaderEpochs
// map (epoch → start offset, for every epoch in a segment) has no field: a
// section holds records of one epoch (RecordEpoch), and epoch boundaries
// travel as markers instead. There is no state machine
// (COPY_SEGMENT_STARTED/FINISHED, DELETE_...): an entry is published only
// after its object is durable, and deletion is garbage collection's business,
// not the log's.
//
// PublisherEpoch is new in KIP-1176 terms: the epoch of the leader that
// published the entry. It equals RecordEpoch except when a new leader
// republishes records written under an earlier epoch into its own AZ, which
// is how followers recover when the old leader's AZ is gone (docs/design.md,
// "Failure scenarios", scenarios 1 and 2).
//
// An [EpochStart] is what Kafka's leader-epoch checkpoint file records (epoch,
// start offset), published by a leader when it takes over a partition.
// Followers build their epoch lineage from markers, which is how they tell,
// whatever order entries arrive in, which to apply and which to ignore.
//
// A [Message] is one record of the metadata log (KIP-1176's
// __remote_wal_log_metadata topic): the entries of one object that the
// readers of one log partition need, plus any markers.
//
// # Routing
//
// The [Partitioner] sends an entry to log partition follower_broker_id % N
// for each follower of its partition, as proposed in the KIP-1176
// discussion: a broker reads exactly one partition of the log.
// [Partitioner.Split] turns one object's message into one message per log
// partition.
//
// # Ordering
//
//   - A [Log] keeps each partition's messages in append order with dense
//     offsets. Since a follower always reads the same log partition, it sees
//     the messages of any one publisher in the order that publisher appended
//     them; the walstore leader appends a partition's entries in offset order.
//   - Across publishers (an old and a new leader, or a zombie) there is no
//     order: messages interleave as they were appended. Epochs and markers,
//     not log order, decide which entries count; that is the fencing
//     package's job.
//   - Within a message, [DecodeMessage] returns entries in the order of their
//     byte ranges in the object (the order a reader coalesces range GETs in)
//     and markers sorted by topic, partition, epoch, start offset and leader,
//     whatever order they were given in. [Partitioner.Split] keeps the order of
//     its input.
//
// # Wire format (versions 2 to 5)
//
// A message is encoded as below; varints are Go's encoding/binary varints,
// which the decoder accepts only in their shortest form. "zigzag" marks a
// signed varint.
//
//	field            encoding                               notes
//	---------------  -------------------------------------  ------------------------------------------
//	version          1 byte                                 2; 3 with commits; 4 with markers; 5 with digests
//	writer           uvarint                                Message.WriterBrokerID
//	n                uvarint                                number of entries; in version 5, n > 0
//	k                uvarint                                number of markers; n+k+c > 0
//	c                uvarint, versions 3 to 5               number of commits; in version 3, c > 0
//	t                uvarint                                number of topics, 1 ≤ t ≤ n+k+c
//	topic × t        kind byte (bit 0: name, bit 1: id),    sorted by (name, id), each used by an
//	                 [16-byte id], [uvarint length, name]   entry or a marker; no zero id; a name as
//	                                                        Kafka allows (ValidateTopicName)
//	── only if n > 0 ─────────────────────────────────────────────────────────────────────────────────
//	object           3 × (uvarint length, bytes)            AZ, bucket, key; bucket and key non-empty
//	first position   uvarint                                Position of the first entry
//	column mask      uvarint                                bit c set: column c is present (c ≤ 12;
//	                                                        13 too in version 5)
//	column × present zigzag minimum, width byte (0..64),    frame of reference: each value minus the
//	                 ⌈count × width / 8⌉ bytes              minimum in width bits, LSB first, zero-padded
//	custom metadata  bytes                                  all entries' CustomMetadata, concatenated
//	checksums        n × 8 bytes, little endian             Entry.Checksum
//	digests          n × 8 bytes, little endian, version 5  Entry.Digest; not all zero
//	── then ──────────────────────────────────────────────────────────────────────────────────────────
//	marker × k       5 uvarints, versions 2 and 3           topic index, partition, epoch, start
//	                                                        offset, leader broker id
//	── versions 4 and 5 instead (if k > 0) ───────────────────────────────────────────────────────────
//	marker mask      uvarint                                bit c set: marker column c is present
//	column × present as the entry columns                   k values each
//	partition × k    uvarint                                partition − previous marker's if of the
//	                                                        same topic, else the partition
//	── then ──────────────────────────────────────────────────────────────────────────────────────────
//	commit × c       4 uvarints, versions 3 to 5            topic index, partition, epoch, offset;
//	                                                        sorted like markers
//	── last ──────────────────────────────────────────────────────────────────────────────────────────
//	checksum         4 bytes, little endian                 CRC-32C of every byte before it
//
// Entries are encoded in Position order, one column per field; an absent
// column means every value is zero:
//
//	c   column        values (count)                          value
//	0   topic         n                                       index into the topic table
//	1   partition     n                                       partition − previous entry's (first: itself)
//	2   firstOffset   n                                       FirstOffset
//	3   span          n                                       LastOffset − FirstOffset
//	4   gap           n − 1 (entries after the first)         Position − previous entry's end
//	5   length        n                                       Length
//	6   codec         n                                       Codec
//	7   uncompressed  n                                       Length − UncompressedSize (the framing, for codec none)
//	8   recordEpoch   n                                       RecordEpoch
//	9   republish     n                                       PublisherEpoch − RecordEpoch
//	10  timestamp     n                                       MaxTimestamp
//	11  writer        n                                       WriterBrokerID − Message.WriterBrokerID
//	12  customLen     n                                       len(CustomMetadata)
//	13  digestFrom    n, version 5                            FirstOffset − DigestFrom with a Digest, else 0
//
// In versions 4 and 5 markers are encoded in canonical order (topic, partition,
// epoch, start offset, leader), one column per field but the partition:
//
//	c   column        values (count)                          value
//	0   topic         k                                       index into the topic table
//	1   epoch         k                                       Epoch
//	2   startOffset   k                                       StartOffset
//	3   leader        k                                       LeaderBrokerID − Message.WriterBrokerID
//
// The partitions are varints because their deltas are small and regular
// (a broker leads every third partition: 3, 3, 3, ...) but jump where the
// topic changes, which would widen a packed column; a byte a marker also
// bounds the markers a short input can claim. A broker announcing
// thousands of leaderships at one epoch thus writes about a byte each,
// plus its logs' start offsets, where versions 2 and 3 wrote five or more.
//
// The encoding is canonical: the minimum of a column is attained, its width
// is the smallest that holds every value, padding bits are zero, and
// DecodeMessage rejects anything else, so a message has exactly one encoding
// and decoding then encoding reproduces the input byte for byte.
//
// Why a checksum: the packed columns leave almost no redundancy, so a
// damaged message usually still decodes, into entries that name another
// partition, offsets or epochs than were published (a flip of one bit in
// the partition column moves an entry to another partition). The metadata
// log's own checks cover its transport, not a bug or a bit flip on either
// side of it, and a damaged PublisherEpoch would mislead fencing. DecodeMessage
// verifies the checksum before it parses anything and reports a mismatch
// with ErrChecksum. CRC-32C rather than a 64-bit hash: 4 bytes a message,
// it detects every error of up to 3 bits and every burst of up to 32 bits
// in messages far larger than any this package writes (which a hash only
// makes likely), and it is what Kafka checks its record batches with. The
// combiner's sections also verify which partition, epoch and offsets they
// hold, so an entry that names the wrong section still fails when fetched.
//
// Version 1 is version 2 without the checksum. DecodeMessage still reads
// it, so that messages written before an upgrade, still in the log, are
// not lost to the followers that upgraded first; AppendMessage writes
// versions 2 to 5, which a reader of version 1 rejects with
// ErrUnsupportedVersion.
//
// Version 3 is version 2 with commits (Message.Commits, the committed
// offsets direct readers serve up to): a commit count after the marker
// count and a commits section after the markers. AppendMessage writes it
// only for a message that has commits, so a broker of an earlier release
// still reads every other message during a rolling upgrade, and rejects a
// commits message with ErrUnsupportedVersion rather than misreading it.
//
// Version 4 is version 3 with the commit count always present (it may be
// zero) and the markers in columns. AppendMessage writes it only for a
// message that has markers, and version 3 or 2 for any other, as before;
// a broker of an earlier release rejects a version 4 message with
// ErrUnsupportedVersion, so upgrade the brokers that follow before the
// leaders that write markers, as with any new message version.
//
// Version 5 is version 4 with the entries' digests (Entry.Digest and
// DigestFrom, which replicas compare with the digest of what they
// applied) and markers optional again: the digestFrom column and a
// digests block after the checksums. AppendMessage writes it only for a
// message with an entry that has a Digest, and version 4, 3 or 2 for any
// other, byte for byte as before, so a broker of the earlier release
// reads every message of a leader that keeps no digests; upgrade the
// followers before the leaders, as with any new message version. It
// keeps version 4's commit count and marker columns, so digests compose
// with markers and commits in any combination. A version 5 message has
// entries and a nonzero digest; an entry without a digest has no chain
// start, and one with a digest has its chain begin at or before its
// first offset; the decoder rejects anything else, so the encoding stays
// canonical. The digests are 8 bytes each rather than a column because,
// like the checksums, they are hash values that do not compress. Where a
// chain begins is a column of distances back from the first offset: the
// chains of a leader's partitions begin where its leaderships did, so
// their distances are alike and pack into a few bits more than their
// spread, and an absent column says every chain begins at its entry.
//
// Why columns: under uniform load the partitions of a topic sit at similar
// offsets, lengths and timestamps, so each field of an entry has a few bits
// of information that a per-field varint rounds up to whole bytes (a first
// offset spread over ±5e4 is 17 bits, which costs 3 bytes as a varint and
// 17 bits packed). Position order makes positions free when sections are
// contiguous, which they are when the combiner places the sections of
// partitions that share followers next to each other. The 8-byte checksum
// is the one field that does not compress.
//
// Measured by BenchmarkMessageSize (one message per object, averaged over 64
// messages; the naive baseline writes each field as a varint and the topic
// name per entry): 100 partitions of one topic with offsets 5e6 ± 5e4,
// 10–50 records and 1–8 KiB per contiguous section and timestamps within
// 100 ms take 14.7 bytes per entry with codec none, 16.8 with half the
// sections zstd and 16.7 with all of them zstd, whose uncompressed size
// cannot be implied (naive: 42.8 to 43.1); 10 topics with offsets scattered
// below 1e9, gaps between sections and varied epochs take 26.7 (naive:
// 58.1). Small messages pay for the object reference, column headers and
// checksum: 31.2 bytes per entry at 8 entries, and a 1-entry message is 127
// bytes, most of it the object's bucket and key. The checksum adds 4 bytes
// a message: 0.04 bytes per entry at 100 entries, 0.5 at 8.
//
// Digests (version 5, the same workloads with a random nonzero Digest on
// every entry, each chain begun where the publisher's leadership did,
// 1e5 to 1.01e5 offsets back) add 8 bytes an entry for the digest, about
// 1.3 for where its chain begins (the spread of those distances, packed)
// and a byte a message for the commit count that version 2 omits: 26.1
// bytes per entry for 100 sections half zstd (16.8 without), 27.0 with a
// fifth of the chains begun at their entry (the distances then spread
// wider), 41.1 at 8 entries (31.2), 140 for a 1-entry message (127) and
// 36.9 for 10 scattered topics (26.7); naive: 54.0, 53.5, 62.8, 133 and
// 68.7.
//
// # Retention
//
// An entry matters only until every follower of its partition has applied
// it and the records are in ordinary tiered storage (or past retention); a
// marker matters until every follower has taken it into its epoch lineage;
// a message matters until all its entries and markers no longer do. Nothing
// reads metadata after that, so the log can be trimmed ([Log.Trim]) below
// the lowest offset any reader of a partition still needs. On Kafka, where
// trimming is time or size retention, choose a retention comfortably longer
// than the longest follower outage the deployment should ride out: a
// follower that finds its next offset trimmed away
// ([ErrOffsetOutOfRange]) has lost entries and markers it needed and must
// resynchronize by ordinary replication.
package metadata
