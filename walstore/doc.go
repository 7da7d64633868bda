// Package walstore is the storage contract and the replication engines of
// activetier: the ObjectStore interface with its typed errors, the Manager
// (KIP-1176's RemoteWalStorageManager: copy, fetch and delete combined
// objects), the Leader and Follower engines, and garbage collection.
// Package walstoretest checks any ObjectStore against the contract.
//
// # The broker's side
//
// The engines reach the broker only through small interfaces defined here:
// LocalLog (end offset, epochs, append, truncate, read), a Placement naming
// each partition's followers, and an EpochView saying at which epoch the
// broker leads a partition. A broker runs one Leader and one Follower; each
// has a Run(ctx) that owns its goroutines.
//
// # Leader
//
// Append queues a batch and returns at once while the buffer has room
// (BufferBytes); past it, Append blocks or fails with ErrBufferFull, as
// the Overflow policy says, so memory never grows without bound. The
// combiner's Builder cuts objects at Interval, ObjectBytes or
// MaxPartitions; up to MaxInflight uploads run at once, each retried with
// jittered backoff until it succeeds: an upload failure loses nothing, and
// after DegradedAfter of failures Health reports the engine degraded so the
// broker can fall back to ordinary replication. An object's entries are
// published once it is stored and no earlier object with data of the same
// partitions is still unpublished, so every partition's entries reach the
// metadata log in offset order even when uploads finish out of order, and
// unrelated partitions never wait for each other. WaitDurable and
// DurableOffset expose the point below which a partition's data is stored
// and published: the acks-on-upload mode.
//
// BecomeLeader publishes the partition's epoch lineage as epoch-start
// markers and, after an AZ outage or for a new replica, Republish copies the
// local log from a given offset into this broker's bucket. Markers are
// published again every MarkerRefresh, so trimming the metadata log never
// leaves a restarted follower without them. Before each publish the engine
// asks the broker's EpochView, so a deposed leader stops publishing as soon
// as its broker knows; followers never rely on that, since fencing decides.
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
// up to FetchConcurrency; verifies every section; decides again at append
// time, since a marker may have arrived meanwhile; and appends in offset
// order, skipping batches below its log end. An unreachable bucket backs
// off every entry in it, and so does one that leaves a fetch unanswered for
// HedgeAfter (an AZ that drops traffic silently), so the follower uses
// republished copies elsewhere or waits for them; it never stops. Entries
// held for a gap or a marker are bounded by MaxHeld: past it the follower
// forgets those furthest ahead and reads the retained metadata again later.
// A new replica with an empty log starts where the leader lineage starts.
//
// Brokers relay each follower's progress (OnApplied) to the partition's
// leader (ReportApplied) for garbage collection. Reports carry no epoch
// yet, so relay them only once the follower's last record has the
// leader's current epoch: before that, the follower may still truncate.
//
// # Garbage collection
//
// Each leader tracks the objects it published. An object is deleted once
// every section in it is below what all the partition's followers applied
// (ReportApplied, relayed by the broker as Kafka's fetch protocol does) and
// below the broker's tiered mark (ReportTiered). Deletes are idempotent.
// MetadataLowMarks and TrimMetadata trim the metadata log behind what every
// leader still needs; Sweep removes objects nobody tracks any more.
//
// # Time
//
// Engines take a Clock and a Seed; on a simulated clock a run replays
// exactly.
package walstore
