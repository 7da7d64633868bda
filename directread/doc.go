// Package directread serves consumers the newest records of a partition
// straight from the combined objects in object storage, instead of
// fetching them across availability zones from the partition's leader:
// one job, reading committed records for consumers.
//
// The KIP-1176 discussion names this as the step after active-segment
// tiering: once the newest batches sit in an object in the leader's AZ,
// a consumer in any AZ can read them there. (KIP-1248 and KIP-1254
// propose direct consumer reads of closed, tiered segments only.)
//
// A Reader reads the metadata log the leaders publish to, learns each
// partition's leader epoch lineage from the epoch-start markers, and
// decides what to take with the same function a follower applies
// (fencing.Decide), so a deposed leader's entries are never yielded. It
// fetches only its partitions' byte ranges, coalesced per object as the
// follower does (walstore.Manager.Fetch), verified, through a Cache that
// several Readers of one process share so that none fetches a range
// another already holds.
//
// Sections are read with storage.ObjectStore.GetRange, never into
// buffers of the Reader's own (storage.RangeReader), and nothing it
// read into is reused: what it verified, caches and yields is the store's
// answer, which GetRange's contract makes the caller's. So the late
// write storage.RangeReader warns of (a request abandoned and left
// writing into a buffer since reused) cannot reach a Reader's batches.
// A store that kept a GetRange answer and changed it afterwards would
// change batches already verified, cached and yielded, undetected:
// catching that takes a copy of every byte served, which cost the
// follower some 14% more CPU per byte (storage.RangeReader) and which
// no store we ship needs.
//
// # Only committed records
//
// A consumer must never see a record that a later leader truncates. The
// leader publishes its high watermark, the offset below which every
// in-sync follower has applied the log, as a metadata.Commit; a Reader
// yields records below it and never beyond. A commit of leader epoch E is
// trusted for an offset only once the Reader's lineage at that offset
// comes from a publication of E or later, so records of an epoch that a
// newer leader cut short are never taken on an older leader's word.
// Config.Durable serves instead everything published (acks-on-upload):
// lower latency, but a failover before the followers applied the records
// can truncate what was yielded, which Poll then reports as a
// *TruncatedError.
//
// # When the data is gone
//
// A Reader never skips offsets. When the records at a partition's next
// offset are no longer in object storage (collected after the followers
// applied them, or tiered) or no longer described by the retained
// metadata, Poll reports a *GoneError (errors.Is ErrGone) naming the
// partition, the offset, and the offset to resume from here; the caller
// reads the records in between from the broker or from tiered storage
// and calls Seek.
//
// The Reader judges records gone when a commit past them is known but no
// entry it read describes them, and only once it has read every metadata
// partition to a high watermark taken after it learned that commit (or
// found the partition at its end), so that every entry describing them
// was read: a follower applies only what an entry told it of, so such an
// entry was in the metadata log before the commit that covers it was.
// That holds however busy the metadata log is. The high watermarks are
// taken only while a partition waits for this judgement, at the start of
// a round of reading, and only of the metadata partitions that need one:
// not found at their end by the last read, and with no high watermark
// taken before that the Reader's cursor has yet to reach. Each is one
// metadata.Log.Watermarks call, on a Kafka-backed log (metadata/kafkalog)
// two ListOffsets requests to the partition's leader, and typically one
// or two rounds' worth per judgement; none at all while no partition's
// records are missing (Stats.MetadataWatermarks counts them). A Watermarks
// call that fails is retried; an answer that breaks the log's contract (a
// high watermark negative or below what was read) is never trusted: Poll
// returns it as a *walstore.DependencyError. With
// Config.MetadataPartitions, read every metadata partition of the
// followers of the Reader's partitions, or the entries the judgement
// needs may be in one not read.
//
// A leader deletes an object as soon as every follower
// applied it, the same moment its records become committed, so a Reader
// that trails the followers needs the leaders to keep objects a little
// longer: walstore.NodeConfig.RetainFor (a few seconds is enough for a
// Reader that keeps up).
//
// # Memory, and reading again
//
// A Reader holds the entries it learned and has not yielded yet, at most
// Config.MaxHeld of them over all its partitions. A partition whose
// commit stalls (until the broker shrinks the in-sync set) learns entries
// it cannot yield: at the bound the Reader forgets those furthest ahead
// of their partition's position and leaves out those it learns past
// them. It notes where in each metadata partition each partition's
// entries are (at most 32 places per partition and metadata partition,
// dense for the newest records), so once the partition reaches what it
// forgot it reads the metadata again from the first record that may
// describe it, and serves it then: it forgets and reads again, never
// skips a record, and judges nothing gone that it forgot. A Seek back to
// records it yielded, whose entries it forgot, reads them again the same
// way. Stats counts what it holds (Held), forgot (Evicted) and read again
// (MetadataRewinds).
//
// # Limits
//
// Metadata is routed to the metadata partitions of each partition's
// followers (metadata.Partitioner): a partition without followers has no
// metadata and cannot be read directly. A Reader reads every metadata
// partition unless Config.MetadataPartitions narrows it down.
package directread
