// Package digest defines the rolling digest of a partition's log: one
// 64-bit value at every batch boundary, chained over the batches before
// it, that a leader publishes with each metadata entry and every replica
// recomputes over what it applied.
//
// The value after a batch is xxhash64 of the value before it, the batch's
// first and last offsets and epoch, and its bytes ([Next]). It depends on
// the log alone, not on who published it or how the records were cut into
// sections and objects: two replicas whose logs hold the same batches
// from the offset where a chain began hold the same values, whichever
// leader, republish or restart brought the batches there. A chain begins
// at some offset with [Origin]; it is not a digest of the whole log from
// offset 0, which no replica could afford to recompute after a restart.
// A new leader continues the chain its follower side kept; one that knew
// none (its process restarted, say) begins a chain at its log end. An
// entry names the offset its chain began at (metadata.Entry.DigestFrom),
// and values are compared only between chains begun at the same offset:
// two such chains over the same log are the same function of it, while
// chains begun elsewhere say nothing of each other.
//
// Who checks what, and when:
//
//   - A follower carries its chains over every batch it appends and,
//     when it appends an entry's last batch, compares its value with the
//     entry's digest ("applied").
//   - An entry whose records it already holds is compared with the value
//     it remembers at the entry's end, if it remembers one ("held"); it
//     remembers the values at the ends of its last eight entries.
//   - A follower that starts from its local log knows no value of its
//     own. It takes its leader's at its log end from the entry that ends
//     there (the metadata it reads again on start holds it), so the first
//     entries it applies are checked without reading its log again; and
//     it reads back the records of that last entry from its log and
//     checks them ("reread"), which is how a byte changed on its disk
//     since they were appended is found.
//   - A direct reader does the first two over what it yields.
//
// A difference is a [Mismatch]: the partition, the publisher's epoch and
// broker, and the range [From, To) where the logs differ, From being the
// last offset at which they were known to agree. The replica then takes
// the published value, so that what comes next is checked against the
// leader's log and the same difference is reported once.
//
// What a matching value proves: the batches from the point where the two
// chains were last known to agree to the point compared are the same
// batches, byte for byte, at the same offsets and epochs, up to xxhash64's
// collision probability (about 2^-64 per comparison for data no one chose
// to collide: it is not a cryptographic hash, and does not defend against
// someone who can write the log and wants to hide it).
//
// What it does not prove: anything before the point a replica took a
// value it could not check (after a restart, the records below its last
// entry; after a truncation past what it remembers, the records below
// it); bytes that changed on a disk after they were appended and are not
// read again (only a restart reads back, and only the last entry); or
// records published without a digest (a republished copy, or a leader
// with NoDigests), which are carried over and checked only at the next
// entry that has one.
//
// A [Tracker] is one replica's chains for one partition: the follower
// engine and the direct reader feed it what they apply and what they skip
// as already held, and it returns what it checked and any [Mismatch].
//
// Zero is never a chain value: the metadata format uses it for "no digest
// published", so [Next] and [Origin] map the one input that would give
// zero to one.
package digest
