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
// and calls Seek. A leader deletes an object as soon as every follower
// applied it, the same moment its records become committed, so a Reader
// that trails the followers needs the leaders to keep objects a little
// longer: walstore.LeaderConfig.RetainFor (a few seconds is enough for a
// Reader that keeps up).
//
// # Limits
//
// Metadata is routed to the metadata partitions of each partition's
// followers (metadata.Partitioner): a partition without followers has no
// metadata and cannot be read directly. A Reader reads every metadata
// partition unless Config.MetadataPartitions narrows it down.
package directread
