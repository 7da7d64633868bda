// Package fencing decides, for a follower of active-segment tiering
// (KIP-1176), what to do with each metadata entry it reads: apply it, skip it
// as a duplicate, drop it as stale, hold it for later, or truncate the local
// log first. It is Kafka's leader-epoch fencing (KIP-101, KIP-279, KIP-320)
// recast for a follower that learns the leader's epochs from published
// markers instead of asking the leader.
//
// The package does no I/O, starts no goroutines and keeps no state but the
// two lineage values its caller owns. Decide and Divergence are pure
// functions. As in etcd's raft, the core is driven by its caller: the
// follower engine (walstore) reads the metadata log, merges markers, calls
// Decide, fetches and verifies, appends, and tells the local lineage what it
// appended. That is what makes every failure scenario of docs/design.md a
// deterministic test here.
//
// # Guarantees
//
//   - A follower never appends an offset whose epoch disagrees with the
//     leader lineage it knows: Apply covers only offsets where the lineage
//     has the entry's record epoch, starts at the log end, and stops at the
//     end of that epoch.
//   - Entries are applied in offset order whatever order they arrive in; a
//     gap is held, never skipped.
//   - The same offsets announced twice (from two buckets, or republished)
//     are applied once.
//   - A local log that disagrees with a lineage at least as new as its
//     records is truncated at the first disagreement (KIP-320).
//   - Drop is final and safe: it is said only of entries that no later
//     knowledge can make needed (given the marker contract below).
//   - Decisions depend on the set of markers learned, never on their order.
//   - With the marker contract kept and everything eventually delivered, the
//     follower's log converges to the leader's: nothing outside the true
//     lineage remains, nothing is missing. TestConvergence checks this on
//     thousands of random histories with fast failovers, lost uncommitted
//     records, zombies, duplicates and arbitrary delivery order.
//
// # Two lineages
//
// A lineage is the epoch history of a log: (epoch, start offset) pairs, each
// epoch covering the offsets from its start to the next one's.
//
// The local lineage ([Lineage]) describes the follower's own log. It is
// Kafka's LeaderEpochFileCache with the same semantics (Assign,
// EndOffsetFor, EpochFor, TruncateFromEnd, TruncateFromStart); the broker
// keeps it in step with its log, calling Assign on every append and
// TruncateFromEnd on every truncation, and persists it as Kafka persists its
// leader-epoch-checkpoint.
//
// The leader lineage ([LeaderLineage]) is the follower's view of the lineage
// of the log that won, built from epoch-start markers (metadata.EpochStart).
// It is not built by Assign: markers arrive late, duplicated, out of order
// and from leaders since deposed, and Assign's answer depends on order.
//
// # Publications, and who may judge
//
// A leader publishes markers in groups: the markers one message carries for
// one partition are one publication, that leader's lineage from some offset
// on. Merge takes one publication per call; its publisher is its highest
// epoch. Each offset is described by the newest publication covering it,
// because a newer leader's log is the truth for what it covers; this is
// Kafka's rule that the current leader decides, applied offset by offset.
// A single marker is a publication of one entry, so merging markers one by
// one gives the plain union in which an epoch is superseded by any later
// epoch starting at or before it.
//
// The union alone is not enough. After a fast failover (the KIP-279 case)
// epoch 6 can start at 150, write there and die, and epoch 7 be elected on a
// replica that still holds epoch 5's record at 150. The markers (5, 100),
// (6, 150), (7, 151) place epoch 6 at 150, which is false; epoch 7's
// publication [(5, 100) (7, 151)] places epoch 5 there, and it is newer.
// (TestConvergence fails within a few seeds if publications are merged
// marker by marker.)
//
// The same rule decides who may call an entry stale. The publisher of an
// entry (Entry.PublisherEpoch) vouches for its records as of its own
// lineage, so only a publication at least as new as the publisher may
// overrule it: an older one may be the very history the publisher's failover
// replaced. Likewise the local log is truncated only where the publication
// covering an offset is at least as new as the local record's epoch: a
// broker that led epoch 8 and is now a follower does not throw its records
// away because the markers it has seen stop at epoch 7.
//
// # The marker contract
//
// The guarantees hold when leaders (walstore's leader side) do this:
//
//  1. On taking over at epoch E with log end S, publish one publication per
//     partition: the leader's lineage from an offset F up to and including
//     (E, S), with F at or below its high watermark and at or below the
//     lowest log end offset of the followers it serves. Its whole lineage
//     (a handful of entries) is simplest and always right.
//  2. Republish its log from F to S to its own AZ's bucket, with
//     PublisherEpoch E.
//  3. Keep markers readable as long as entries they judge are (or let every
//     new leader's publication, rule 1, carry them forward).
//
// Rule 1's bound on F is what makes the view exact once all publications
// are in: every offset below a publication's start was committed when its
// leader took over, so the newest older publication that covers it is right
// about it. Rule 2 is what
// makes Drop safe: if later knowledge reverses a drop, it is because a newer
// leader's log holds that record, and that leader republished it.
//
// # The decision
//
// Let LEO be the follower's log end offset and j the first offset of the
// entry that the local log does not already hold with the entry's record
// epoch: the first offset below LEO where the local lineage gives another
// epoch, else max(FirstOffset, LEO). "Lineage at o" is the leader lineage's
// epoch at o, and "newer" means its publisher there is at least as new as the
// entry's publisher. Decide takes the first row that matches:
//
//	condition                                               action    reason
//	------------------------------------------------------  --------  ---------------
//	negative offset, LastOffset < FirstOffset, overflow     Drop      invalid-range
//	negative RecordEpoch, PublisherEpoch < RecordEpoch      Drop      invalid-epoch
//	negative LEO                                            Hold      invalid-leo
//	the local log diverges from the leader lineage          Truncate  diverged
//	wholly below LEO and the local log agrees               Skip      duplicate
//	newer lineage at j has an earlier epoch than the entry  Drop      not-in-lineage
//	newer lineage at j = FirstOffset has a later epoch      Drop      fenced
//	newer lineage at j > FirstOffset has a later epoch      Skip      superseded-tail
//	FirstOffset > LEO                                       Hold      gap
//	disagrees with the local log below LEO                  Hold      conflicts-local
//	no marker learned yet                                   Hold      not-covered
//	RecordEpoch newer than any known epoch                  Hold      epoch-ahead
//	PublisherEpoch newer than any known epoch               Hold      publisher-ahead
//	LEO below the leader lineage's earliest start           Hold      not-covered
//	lineage at LEO has another epoch, on older authority    Hold      unresolved
//	local log's latest epoch newer than RecordEpoch         Hold      local-ahead
//	otherwise                                               Apply     next
//
// Apply covers [LEO, min(LastOffset+1, start of the epoch after
// RecordEpoch)): batches below LEO are duplicates, batches from the next
// epoch's start on were fenced. Whoever published the entry, a record is
// named by its (epoch, offset), Kafka's invariant, so a republished copy and
// the original are the same records.
//
// # Why hold beats drop
//
// Hold is always safe: a held entry whose records are not in the true log
// can never be the only source of the next offset, because the true records
// for that offset exist and are published too; holding costs memory, not
// correctness. Drop is forever. So an entry is dropped only when a
// publication at least as new as its publisher contradicts it, and held
// whenever the answer may still change: an epoch or publisher newer than
// the lineage knows (its markers are on the way and may end the record epoch
// earlier), an epoch between known ones when only older publications cover
// the offset, an offset below everything the lineage covers, a disagreement
// with the local log that the lineage cannot settle yet. An engine bounds
// what it holds by forgetting entries that lie wholly below the offset up to
// which its log is known to match the leader's (committed offsets are never
// truncated, so the high watermark is that offset once the local log has
// been checked against the current leader's publication).
//
// # Driving it
//
// Per partition, a follower engine does:
//
//	on a metadata message:
//		leader.Merge(the message's markers for the partition...)   // one publication
//		if to, ok := fencing.Divergence(leo, &local, &leader); ok {
//			truncate the log to to; local.TruncateFromEnd(to); leo = to
//		}
//		add the message's entries for the partition to pending
//	repeat until nothing changes, lowest FirstOffset first:
//		d := fencing.Decide(leo, &local, &leader, e)
//		Apply:    fetch and verify e's section; append its batches in
//		          [d.From, d.Limit); local.Assign(e.RecordEpoch, d.From);
//		          leo = end of the last batch appended; set e aside
//		Skip:     set e aside
//		Drop:     forget e
//		Hold:     keep e pending
//		Truncate: truncate the log to d.TruncateTo; local.TruncateFromEnd;
//		          leo = d.TruncateTo; bring back the set-aside entries with
//		          LastOffset >= d.TruncateTo
//
// Entries set aside (applied or skipped) are needed again after a
// truncation below them; an engine may keep them until they fall below the
// high watermark, or re-read them from the metadata log, which keeps them
// until every follower has applied them.
//
// A batch that straddles From or Limit cannot come from the log the
// lineage describes (epochs change only at batch boundaries); the engine
// treats it like a failed verification.
//
// # Failed fetches and corrupted ranges
//
// Deciding records nothing. An Apply whose fetch fails, or whose section
// fails its checksum, is simply not carried out: the engine appends nothing,
// calls neither Assign nor TruncateFromEnd, reports which object and
// partition failed, and keeps the entry pending; the same entry, or another
// copy of the same offsets (a republish to another AZ's bucket), is decided
// the same way again. Nothing in this package can mark an offset applied;
// only the engine's append followed by Assign does.
//
// # Mapping to Kafka
//
//   - [Lineage] is LeaderEpochFileCache: Assign is assign (including its
//     removal of entries a lower start or epoch conflicts with), EndOffsetFor
//     is endOffsetFor (the OffsetsForLeaderEpoch answer, KIP-101, with
//     KIP-279's answer for an epoch below the earliest), EpochFor is
//     epochForOffset, TruncateFromEnd and TruncateFromStart are the same
//     operations.
//   - [Divergence] is the follower's truncation after a leader change:
//     KIP-101 truncates by leader epoch instead of high watermark, KIP-279
//     makes it exact across fast leader changes by answering the largest
//     epoch at or below the one asked and iterating, and KIP-320 has every
//     fetcher detect truncation whenever the leader changes. Instead of
//     asking the leader for the end of each of its epochs in turn, the
//     follower compares its lineage with the leader lineage range by range
//     and truncates at the first difference, which is where Kafka's iterated
//     OffsetsForLeaderEpoch exchange ends up.
//   - The epoch check a Kafka broker makes on every fetch since KIP-320 (a
//     request carrying a stale leader epoch gets FENCED_LEADER_EPOCH)
//     becomes [Decide]'s fenced and not-in-lineage drops: here the stale
//     party is a deposed leader whose entries are still arriving.
//   - The empty epoch cache of a reassigned replica (docs/design.md,
//     "Failure scenarios", scenario 2) is the empty local lineage: such a
//     follower starts at the republished range with the new leader's
//     publication, and Decide needs nothing else.
//
// Those scenarios, and a table of decisions covering every action and
// reason, are scripts, testdata/*.txt, in the format of
// github.com/cockroachdb/datadriven, as etcd-io/raft's interaction tests
// are: decide and divergence take a log end, a local lineage (local=(5@100,
// 6@151)) and the leader's publications as input lines, one a line, and
// below the "----" is the decision ([Decision.String]) or the truncation
// point; the scenarios play entries (R/P:F-L, record and publisher epoch
// and offsets) on a follower with offer, peek and merge, and state shows
// its log and lineages. The commands are listed on scriptEnv.handle in
// script_test.go. To change a script, edit its commands and run
// "go test ./fencing -run TestScripts -rewrite", which writes what the
// package decides now below each command; read the diff before you commit
// it.
package fencing
