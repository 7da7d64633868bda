// Package walstore is the replication engine of activetier: the Node, the
// one type a broker constructs, which runs one broker's replication (a
// leader side and a follower side, the high watermark and garbage
// collection), and the Manager (KIP-1176's RemoteWalStorageManager: copy,
// fetch and delete combined objects), which the Node's sides and direct
// readers are built on. They reach the object
// store and the broker's log only through the contracts of package storage
// (storage.ObjectStore, storage.LocalLog), whose conformance suites are in
// package storagetest.
//
// # The broker's side: one Node
//
// A broker runs one Node and tells it of every role change its controller
// decides, in order, one partition at a time:
//
//   - BecomeLeader(tp, epoch, followers, republishFrom) when the broker
//     leads tp (Kafka's makeLeader): the follower side stops replicating
//     tp first, so no append of its own is in flight, then the leader side
//     accepts appends. If the broker led tp without a break, the leadership
//     goes on at the new epoch and its unpublished data with it.
//   - BecomeFollower(tp, epoch, leader) when it follows tp (makeFollower),
//     and again at each later epoch it learns of: the leader side resigns
//     and its unpublished data of tp is withheld (WaitDurable calls for it
//     fail with ErrNotLeader, so nothing withheld is acknowledged), and the
//     follower side replicates tp. It acts on epoch-start markers only up
//     to the epoch the broker knows, so a marker of a later epoch, forged
//     or early, waits instead of truncating the log.
//   - StopReplica(tp) when the broker no longer holds tp: after it returns
//     no append to tp is in flight.
//
// Each transition is all or nothing: it validates its arguments and
// prepares (waits for the engines to finish the local-log call of its
// partition they are making, reads the log end) before it changes
// anything, and one that is refused or whose context ends while it waits
// returns a *TransitionError saying which role is still in effect
// (Node.Role). Transitions of different partitions never wait for each
// other, nor for each other's local-log calls: a call that hangs costs
// its own partition only (see storage.LocalLog). The
// step that cannot be undone, resigning, comes last, when nothing that can
// fail or wait is left.
// The order of those steps is internal/rolecore's rules, which the
// simulation drives too; the Node supplies its engines, locks and
// contexts to them.
//
// Between them the broker appends produced batches (Append, WaitDurable,
// WaitReplicated, DurableOffset), delivers its followers' progress to the
// leader's broker (NodeConfig.OnProgress to RecordProgress, carrying the
// follower's log end and last epoch as Kafka's fetch request does, so the
// leader judges stale reports itself), keeps the in-sync replicas by
// Kafka's rules with what Replicas says of each follower (SetInSync), and
// reports its tiered-storage mark (ReportTiered). An Append blocked on a
// full buffer, and every wait, end with the leadership they were made in
// (ErrNotLeader) or with Run (ErrStopped). The Node reaches the broker
// only through storage.LocalLog, its own log, whose contract
// storagetest.RunLocalLog checks.
//
// Health tells the broker when to replicate the ordinary way: Degraded
// for the uploads and publishes of every partition, and Partitions for
// the ones a failure has stopped on either side (a leadership whose epoch
// markers or republish keep failing, a followed partition whose local log
// keeps failing), each a *PartitionError naming the failing dependency;
// Node.PartitionError answers for one partition, and OnHealth tells of
// every change.
//
// # Leader
//
// Append validates each batch (storage.ErrInvalidBatch for one that does not
// continue the leadership's log at its epoch) and queues it, returning at
// once while the buffer has room (BufferBytes); past it, Append blocks or
// fails with ErrBufferFull, as the Overflow policy says, so memory never
// grows without bound. The combiner's Builder cuts objects at Interval,
// ObjectBytes or MaxPartitions, and within WaitCutDelay, if set, of a
// WaitDurable or WaitReplicated call waiting on records not yet cut (the
// waits of one WaitCutDelay share the cut); up to MaxInflight uploads run at once, each
// attempt bounded by RequestTimeout and retried with jittered backoff until
// it succeeds: an upload failure loses nothing. An attempt that overstays
// the learned p95 of PUT latency is attempted again alongside it, once per
// object and within a budget (UploadHedge); every attempt writes a fresh key
// only if it is free, and only the first to succeed is published. An
// upload or publish that
// has not succeeded for DegradedAfter, whether its attempts fail or never
// return, makes Health report the engine degraded, so the broker can fall
// back to ordinary replication. An object's entries are published once it
// is stored and no earlier object with data of the same partitions is still
// unpublished, so every partition's entries reach the metadata log in
// offset order even when uploads finish out of order, and unrelated
// partitions never wait for each other. The durable offset of a leadership
// advances only over offsets that are stored and published (or that every
// follower held when it began): WaitDurable is the acks-on-upload mode.
//
// A new leadership publishes the partition's epoch lineage as epoch-start
// markers and, for followers that cannot read the previous leader's
// objects (an AZ outage) or that start empty (a reassignment), republishes
// the local log from republishFrom into this broker's bucket, in the
// background; the durable offset does not pass the republish. Markers are
// published again every MarkerRefresh, so trimming the metadata log never
// leaves a restarted follower without them.
//
// A follower whose reported log end is below what the leadership's
// entries still reach (a restarted broker put back into the replicas,
// whose objects were collected meanwhile or published to other followers'
// metadata partitions; one that lost its log) is republished for, from its
// log end, without the broker asking: one republish per partition at a
// time, from the lowest such follower, its copies kept until they applied
// them. Followers report at least every ProgressInterval, so a leader that
// missed a report learns where they are.
//
// # Follower
//
// The follower reads one metadata partition (BrokerID % N), keeps per
// partition the lineage of its local log and the leader lineage learned
// from markers, and lets fencing.Decide classify every entry: apply, skip
// (duplicate), drop (stale epoch), hold (gap, unknown epoch) or truncate
// (divergence). It fetches the entries that continue its log, up to
// Readahead per partition, coalescing sections of one object into one
// ranged GET (adjacent, or separated by less than CoalesceGap), in parallel
// up to FetchConcurrency; sends a GET again when it has not answered by its
// bucket's learned p95 latency (FetchHedge: the first answer wins, the other is
// cancelled, and the extra GETs stay within a budget); verifies every
// section; decides again at append
// time, since a marker may have arrived meanwhile; and appends in offset
// order, skipping batches below its log end. An unreachable bucket backs
// off every entry in it, and so does one that leaves a fetch unanswered for
// HedgeAfter (an AZ that drops traffic silently), so the follower uses
// republished copies elsewhere or waits for them; it never stops. A local
// log that fails, answers against its contract, or does not answer within
// LocalTimeout, takes only its own partition out for a backoff. Entries held for a gap or a marker are
// bounded by MaxHeld: past it the follower forgets those furthest ahead and
// reads the retained metadata again later. A new replica with an empty log
// starts where the leader lineage starts.
//
// # Digests
//
// The leader publishes with each entry its log's rolling digest after
// the section (package digest), continuing the chain the broker's
// follower side kept when it took the partition over, or beginning one at
// its log end; the follower carries the same chain over what it appends
// and compares. A follower that starts from its local log takes its
// leader's value at its log end and reads back the records of the last
// entry it holds to check them. A difference is a *digest.Mismatch, which
// the Node logs, hands to OnDigestMismatch and keeps in FollowerStats
// (DigestChecks, DigestMismatches, the latest Mismatches): the local log
// differs from the leader's in the mismatch's range, and it is the
// broker's to repair (truncate to the mismatch's From and replicate
// again, or rebuild the replica); replication goes on meanwhile. The
// package digest documentation says what a match proves and what it does
// not. NoDigests keeps the metadata in the versions of the release before
// digests, for a rolling upgrade.
//
// # Garbage collection
//
// Each leader tracks the objects it published. An object is deleted once
// every section in it is below what all the partition's followers applied
// (RecordProgress) and below the broker's tiered mark (ReportTiered); the
// followers are those recorded when the object was cut and the current
// ones, so a placement that changes, or briefly names nobody, never makes
// a section look applied. Only what a follower holds of this leader's log
// counts: progress whose last epoch ends earlier here is credited up to
// that epoch's end. Deletes are idempotent. MetadataLowMarks and
// TrimMetadata trim the metadata log behind what every leader still needs;
// Sweep removes objects nobody tracks any more, never one a leadership
// still means to publish (stored while the metadata log refuses its
// entries, or reported late by an upload still in flight).
//
// # Dependencies that misbehave
//
// Errors from the object store, the metadata log and the local log come
// back wrapped in a *DependencyError naming the call; answers their
// interfaces do not allow (a short read, a negative offset, batches that do
// not continue each other) match ErrContractViolation. Neither stops the
// engines: they retry, or set the one partition concerned aside.
//
// Some lies cannot be seen from one side. A store whose Put reports
// success but keeps nothing makes the leader count the data durable;
// its followers find the object missing (FollowerStats.NotFound), give up
// on those entries and wait at the gap, and only a Republish by the
// leader fills it. Offsets a metadata log's Append invents are what
// MetadataLowMarks reports, so TrimMetadata trusts them. Both are for the
// ObjectStore conformance suite (package storagetest) and the metadata
// log's own tests to rule out.
//
// # Time
//
// Engines take a Clock and a Seed; on a simulated clock a run replays
// exactly.
package walstore
