// Package digest defines the rolling digest of a partition's log: one
// 64-bit value at every batch boundary, chained over the batches before
// it, that a leader publishes with each metadata entry and every replica
// recomputes over what it applied.
//
// The value after a batch is xxhash64 of the value before it, the batch's
// first and last offsets and epoch, and its bytes ([Next]). It depends on
// the log alone, not on who published it or how the records were cut into
// sections and objects: two replicas whose logs hold the same batches from
// the point their chains share hold the same values, whichever leader,
// republish or restart brought the batches there. A chain begins at some
// offset with [Origin] (a leader that knew no earlier value starts one
// there); it is not a digest of the whole log from offset 0, which no
// replica could afford to recompute after a restart.
//
// What a matching value proves: the batches between the point where the
// two chains were last known equal and the point compared are the same
// batches, byte for byte, at the same offsets and epochs, up to xxhash64's
// collision probability (about 2^-64 per comparison for data no one chose
// to collide: it is not a cryptographic hash, and does not defend against
// someone who can write the log and wants to hide it). What it does not
// prove: anything before the chain began, or bytes that changed on a disk
// after they were digested and were not read again; a replica that adopts
// the leader's value because it has none of its own (after a restart or
// a truncation past what it remembers) checks from there on, not before.
//
// A [Tracker] is one replica's chain for one partition: the follower
// engine and the direct reader feed it what they apply and what they skip
// as already held, and it checks each value a leader published against
// the replica's own, reporting a difference as a [Mismatch].
//
// Zero is never a chain value: the metadata format uses it for "no digest
// published", so [Next] and [Origin] map the one input that would give
// zero to one.
package digest
