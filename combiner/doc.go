// Package combiner is the combined-object format and the builder that
// decides what goes into each object. It does no I/O and starts no
// goroutines: the leader's engine hands it batches and gets bytes back, the
// follower's engine hands it bytes and gets batches back.
//
// # Job and guarantees
//
// A leader combines the newest record batches of many partitions into one
// object, so that one PUT carries them all; each follower fetches only its
// partitions' byte ranges. The format exists to make that safe:
//
//   - Every section (whole batches of one partition and one record epoch)
//     is fetchable, verifiable and decodable from its own byte range plus
//     its index entry, which a metadata.Entry carries. Nothing else of the
//     object is needed, so a follower makes one range GET.
//   - The section's xxhash64 is its last 8 bytes and covers everything
//     before it and the section's identity: topic, partition, record
//     epoch, first and last offset. DecodeSection computes it with the
//     identity the entry claims and checks it against both the stored value
//     and the entry before parsing or decompressing anything, so a section
//     fetched under another section's entry fails as a damaged one does.
//     Every other byte of an object is covered by the footer checksum or
//     checked by value (magic, version, flags, sizes), so Verify (and
//     DecodeSection, within its range) detects any changed byte and any
//     truncation, but for the 2^-64 chance of a checksum collision. The
//     tests flip every bit of sample objects to show it, and that no
//     damaged section decodes under any identity.
//   - Any byte string, given to any reader (DecodeSection, ReadFooter,
//     Verify), gives a typed error (*CorruptError, *ShortTailError,
//     ErrTooLarge) or a correct result; never a panic, and never an
//     allocation beyond what the input's length justifies, except the
//     decompression buffer, which is exactly the entry's uncompressed size
//     and capped by DecoderOptions.MaxUncompressedSize.
//   - Batch boundaries survive: a decoded section is its batches, with
//     epoch, offsets and max timestamp each, so a follower skips batches
//     below its log end offset and appends the rest unchanged.
//   - The footer index and a fixed-size trailer make objects
//     self-describing: a reader that fetched only an object's tail
//     (DefaultTailSize bytes is usually enough) lists its sections, and
//     metadata lost from the log can be rebuilt by listing and reading the
//     tails of the objects in a bucket.
//   - Encoding is deterministic: the same sections and options give the
//     same bytes (with the same compressor library), and a Builder given the same batches cuts the same
//     objects whatever the order partitions arrived in.
//
// # Byte layout, format version 2
//
// Integers are little-endian. uvarint and varint are encoding/binary's
// unsigned and zigzag-signed varints. In the tables below, the first column
// is a field's byte offset where it is fixed (negative: from the end), the
// second its size in bytes, "v" for a varint. An object is:
//
//	Header (8 bytes)
//	  0   4  magic "ATCO"
//	  4   2  format version, 2
//	  6   2  flags, 0 (any other value is rejected)
//	Sections, back to back from byte 8, in footer order
//	Footer
//	Trailer (32 bytes, the object's last)
//
// A section, for one partition and one record epoch:
//
//	 0   1  section version, 2 (a reader of a lone range learns it here)
//	 1   1  codec: 0 none, 1 zstd, 2 s2 (metadata.Codec)
//	     v  epoch, varint
//	     v  batch count n >= 1, uvarint
//	        n batch descriptors, each:
//	     v    first offset, uvarint: absolute for the first batch; for the
//	          others the gap after the previous batch's last offset
//	          (first - previous last - 1), usually 0
//	     v    last offset - first offset, uvarint
//	     v    max timestamp, varint: absolute for the first batch; for the
//	          others the difference from the previous batch's (mod 2^64)
//	     v    data length >= 1, uvarint
//	        payload: the n batches' data, concatenated, then stored
//	          as is (codec none), as one zstd frame with its content size
//	          and no frame checksum, or as one s2 block
//	-8   8  xxhash64 of all the section's preceding bytes, seeded with
//	        the xxhash64 (seed 0) of the section's identity:
//
//	 0  16  topic ID (zeros if the partition has none)
//	16   4  partition
//	20   4  record epoch
//	24   8  first offset
//	32   8  last offset
//	40      topic name, the rest
//
// Why the identity is in the checksum: a section is fetched and verified
// by its byte range, under whatever entry names it. A checksum of the
// bytes alone proves the bytes are the ones written, not that they are the
// records the entry says: an entry republished with the wrong partition, or
// one whose partition or topic index was damaged in a way the metadata
// codec did not catch, would make a follower append one partition's
// records to another partition's log, and then skip the real ones as
// duplicates. Epoch and offsets are also in the section's own batch table;
// topic and partition are nowhere in it, and storing them would cost the
// topic name per section. Seeding the hash costs no byte and one hash of
// about 40 bytes per section.
//
// The descriptors stay outside the compressed payload: they are a few
// bytes per batch, and a reader validates them against the entry before
// decompressing. The section's uncompressed size is the sum of the data
// lengths.
//
// The footer, covered by the trailer's checksum:
//
//	 v  topic count t >= 1, uvarint
//	    t topics, each:
//	 1    flags: bit 0 set if a topic ID follows; other bits 0
//	16    topic ID (only if bit 0 is set)
//	 v    topic name length, uvarint, then the name's bytes
//	    one entry per section, in byte order:
//	 v    topic index into the table, uvarint
//	 v    partition number, uvarint (<= 2^31-1)
//	 v    epoch, varint
//	 v    first offset, uvarint
//	 v    last offset - first offset, uvarint
//	 v    max timestamp, varint
//	 v    batch count, uvarint
//	 v    section length, uvarint; a section's position is 8 plus
//	      the lengths of the sections before it
//	 1    codec
//	 v    uncompressed size, uvarint
//	 8    the section's xxhash64 (its last 8 bytes)
//
// The trailer:
//
//	 0   8  footer position
//	 8   4  footer length
//	12   4  section count
//	16   8  xxhash64 of the footer followed by trailer bytes 0-15
//	24   2  format version, 2
//	26   2  flags, 0
//	28   4  magic "ATCO"
//
// Position and length are redundant with the object's size (footer
// position + footer length + 32 = object size), which ReadFooter checks;
// the section count and the footer checksum make a changed trailer byte
// detectable like any other.
//
// # Versions
//
// Encoders write version 2. Readers also read version 1, which is the same
// layout but for the section checksum, a plain xxhash64 of the section's
// bytes: objects written before an upgrade stay readable until garbage
// collection removes them, and a follower upgraded before its leader keeps
// replicating. For version 1 sections only the epoch and offsets are
// checked against the entry. Verify requires header, trailer and every
// section to carry the same version; any other version is an error
// matching ErrUnsupportedVersion (and ErrCorrupt, since a version field is
// as likely damaged as new). A section's version byte is read before its
// checksum, to know which checksum to compute; a damaged one selects a
// checksum that does not match. A reader of version 1 rejects version 2
// objects, and their sections by checksum.
//
// # Section lifecycle
//
// A broker appends a batch; the engine calls Builder.Add with the
// partition, the batch (kept without copying until cut) and now. Batches of
// a partition accumulate into a section until the epoch changes, which
// starts a new section. When Builder.Due says so, Builder.Cut lays the
// pending partitions out and encodes one or more objects, each with its
// SectionInfo list and each section's followers. The engine PUTs the object
// and publishes SectionInfo.Entry for every section. A follower turns the
// entry back into a SectionInfo with SectionOf, fetches Position..Length,
// and calls Decoder.DecodeSection, which verifies before it decodes; the
// batches it returns alias the fetched bytes (or a fresh buffer for a
// compressed section) and are the follower's to append.
//
// # Codecs
//
// Each section records the codec it was actually stored with. The Encoder
// tries its codec on every section of at least MinCompressBytes of data
// and keeps the result only if it saves MinSavingRatio (10% by default):
// batches that producers already compressed, and small sections, stay raw,
// and a follower does not pay decompression for a few saved bytes.
// Compressors and their buffers are reused from object to object. zstd is
// used only through EncodeAll and DecodeAll, which run in the caller's
// goroutine and start none (the tests check with goleak); the Decoder's
// Concurrency option only sets how many decodes may run at once.
//
// # Layout and cut policy
//
// The Builder enforces BuilderConfig's limits itself: a cut is due when
// the oldest pending batch has waited Interval, or TargetBytes of data or
// MaxPartitions partitions are pending, and no object holds more than
// MaxPartitions partitions or (unless one partition alone is larger)
// TargetBytes of data. A CutPolicy may ask for earlier cuts and decides the
// layout: which partitions share an object, in what order.
//
// Pending partitions are grouped by their follower set (from
// BuilderConfig.Followers) and groups are sorted by follower set, so
// partitions with the same followers are adjacent and a follower that
// follows several of them reads them with one range GET. DefaultPolicy then
// follows the trade-off of small and large flushes (docs/design.md, "Worked
// cost examples from the KIP-1176 discussion"): a flush smaller than
// SmallFlushBytes (by default where S3 Express's PUT price equals its upload
// price, about 353 KB) is split into one object per follower set, at most
// MaxSmallFlushObjects of them, so each object has as few readers as
// possible; a larger flush, where transfer dominates the cost, goes into
// as few objects as the limits allow. DefaultPolicy's documentation gives
// the reasoning and its limits. The byte format never depends on the
// layout: every object is read the same way.
package combiner
