// Package disklog is a broker's log on local disk, implementing
// walstore.LocalLog for the example Kafka broker in examples/kafkabroker.
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
//	data     []byte  the batch exactly as appended
//
// The frames are the truth; the checkpoint keeps only what frames cannot:
// the start offset of a log that holds no records (Kafka's
// truncateFullyAndStartAt) and an epoch assigned at the end of the log
// before any record of it (as Kafka's makeLeader leaves the epoch cache).
// It is replaced atomically (write, fsync, rename, fsync of the directory).
//
// Recovery, on Open, reads every frame and checks its checksum and that it
// continues the one before. At the first frame that does not (a write torn
// by a crash, or bytes damaged since) it truncates the segment there and
// removes the segments after it, as Kafka's log recovery does: the records
// lost were never acknowledged by this log's Append, or, if the damage is
// older, are fetched again by replication. Reads check every frame's
// checksum too, so damaged bytes are an error naming the file, never data.
//
// Appends are written with one pwrite per call and are not fsynced unless
// Options.Sync is set, like Kafka's default (durability comes from
// replication); Close syncs. The index of batches is kept in memory, one
// small entry per batch: fine for an example and for tests, not for a log of
// billions of batches, which would want Kafka's sparse offset index.
package disklog
