// Package disklog is a broker's log on local disk, implementing
// storage.LocalLog for the example Kafka broker in examples/kafkabroker.
//
// Each partition is a directory "<topic>-<partition>" holding segment files
// named by the first offset they hold ("00000000000000000000.log") and a
// leader-epoch checkpoint. A segment is a run of frames, one per record
// batch:
//
//	length   uint32  bytes after this field
//	crc      uint32  CRC-32C (Castagnoli) of everything after this field
//	epoch    int32   leader epoch of the batch
//	first    int64   first offset
//	last     int64   last offset
//	maxTs    int64   newest record timestamp, Unix milliseconds
//	index    uint32  the frame's place among those of its Append call, from 0
//	count    uint32  how many frames that call wrote
//	data     []byte  the batch exactly as appended
//
// The frames are the truth; the checkpoint keeps only what frames cannot:
// the start offset of a log that holds no records (Kafka's
// truncateFullyAndStartAt), an epoch assigned at the end of the log before
// any record of it (as Kafka's makeLeader leaves the epoch cache), and
// where the latest Truncate cut the log, and whether it is under way. It is
// replaced atomically (write, fsync, rename, fsync of the directory). It is
// text, one field a line, each number in decimal:
//
//	2                   format version
//	start               the log start offset
//	state               0 records, 1 empty (frames beside it are the remains
//	                    of a truncation to start), 2 a Truncate to cut under way
//	cut                 where the latest Truncate cut the log, or -1
//	n                   how many epoch lines follow
//	epoch startOffset   n lines, one per leader epoch, oldest first
//	crc                 CRC-32C (Castagnoli) of every byte before this line,
//	                    8 lowercase hex digits
//
// Every line ends in a newline, and each field has the one spelling this
// package writes. Format version 1 is the same without the crc line, and
// with 1 as its first line; Open reads it and rewrites it as version 2.
//
// Recovery, on Open, reads every frame and checks its checksum and that it
// continues the one before. At the first frame that does not (a write torn
// by a crash, or bytes damaged since) it truncates the segment there and
// removes the segments after it, as Kafka's log recovery does: the records
// lost were never acknowledged by this log's Append, or, if the damage is
// older, are fetched again by replication. Reads check every frame's
// checksum too, so damaged bytes are an error naming the file, never data.
//
// Append is all or none across a crash as well, as storage.LocalLog
// requires, although a kill can stop its write after any page: one call's
// frames are written together, in one segment, and each says its place
// among them, so recovery knows a call whose last frame is missing and
// removes all of it. A call that a Truncate cut short at a batch boundary
// looks the same, so Truncate records in the checkpoint where it cut, and
// recovery keeps such a call up to there. A Truncate that removes frames
// takes several steps (cut one segment, remove the later ones); its
// checkpoint says it is under way before the first and done after the
// last, so recovery finishes one that a crash interrupted. A log written
// before frames carried index and count has a checkpoint of format version
// 0, which Open refuses (ErrFormat) rather than take its frames for
// damage. So does a checkpoint that fails its checksum or does not parse,
// or one that says the log is empty from an offset past its first frame,
// which no Truncate writes: what it would say decides which frames are
// the log, so Open does not guess. A damaged checkpoint is thus an error,
// never a log wiped: an empty state with frames beside it is also what a
// Truncate to the start leaves when killed before it removes the
// segments, and only the checksum tells the two apart. (A version 1
// checkpoint has no checksum; until Open rewrites it, a damaged digit in
// it that still parses is taken at its word.)
//
// Appends are written with one pwrite per call and are not fsynced unless
// Options.Sync is set, like Kafka's default (durability comes from
// replication); Close syncs. The index of batches is kept in memory, one
// small entry per batch: fine for an example and for tests, not for a log of
// billions of batches, which would want Kafka's sparse offset index.
package disklog
