// Package activetier is an embeddable library for active-segment tiering:
// replicating the newest records of a partitioned log (Kafka, or any broker
// built like it) through object storage in the leader's own availability
// zone, instead of copying them broker to broker across zones. It implements
// the RemoteWalStorageManager contract of Kafka's KIP-1176.
//
// This package holds no code; it is the map. Read it first. The design
// behind it, the seven failure scenarios it is tested against, and the
// reference prices and latencies with their sources are in docs/design.md
// in the repository; the README lists every package and the other guides.
//
// # Why
//
// A replicated log keeps each partition on a leader and followers in
// different availability zones (AZs). Followers copy the leader's newest
// data over the network, and cloud providers bill that traffic: on AWS
// $0.01/GB out and $0.01/GB in, often half of a cluster's bill. KIP-405
// tiered storage moves only closed segments to object storage; the active
// segment still crosses AZs.
//
// With activetier the leader uploads its newest batches to an S3 Express
// One Zone directory bucket in its own AZ (single-digit-ms latency, no
// cross-AZ fee, billed per request and per GB), combining many partitions
// into one object to keep PUTs cheap. It publishes small metadata entries
// (which object, which byte range, which offsets, which leader epoch), and
// each follower reads only its partitions' byte ranges. A worked example
// from the public KIP-1176 discussion: 0.3 MB over 100 partitions in one
// object, read 100 times,
// costs $2.09e-6 to write and $3.18e-6 to read, against $6e-6 for
// broker-to-broker replication at RF=2 (package costmodel reproduces it).
// Producers are untouched; stale leaders are fenced by leader epoch, so a
// follower never keeps data a newer leader superseded.
//
// # Data flow
//
// One path each way:
//
//	broker appends batch -> walstore.Node (leader side) -> combiner.Builder cuts an object
//	  -> ObjectStore.Put (local AZ) -> metadata.Log append (one message per
//	  follower metadata partition)
//
//	metadata.Log read -> fencing.Decide -> ObjectStore range GET (coalesced)
//	  -> verify, decode -> broker's LocalLog append
//
// The leader computes each partition's high watermark from the progress
// its followers report and publishes it as a commit; a direct reader
// (package directread) follows the second path for a consumer, yielding
// only records below it.
//
// # Packages
//
//   - metadata: the vocabulary (partitions, entries, epoch-start markers,
//     commits), its compact binary codec, the Log interface that carries
//     it, and the follower-affinity partitioner (an entry goes to metadata
//     partition follower_id % N, so each broker reads one partition).
//     metadata/metadatatest holds the conformance suite for Log
//     implementations.
//   - storage: the contracts a backend or a broker implements and their
//     errors: ObjectStore (with RangeReader and ObjectInfo), LocalLog, and
//     the Batch and EpochEntry a LocalLog holds. It imports only metadata,
//     so a backend or a broker's log depends on nothing else of activetier.
//     storage/storagetest holds the conformance suites for ObjectStore and
//     LocalLog implementations.
//   - fencing: leader-epoch lineage with Kafka's leader-epoch-cache
//     semantics, and the pure decision a follower makes for each entry:
//     apply, skip, drop, hold or truncate. No I/O.
//   - digest: the rolling digest of a partition's log, chained over its
//     batches, that a leader publishes with each entry and followers and
//     direct readers compare with their own (digest.Tracker), and what a
//     match proves and what it does not. No I/O.
//   - combiner: the combined-object format (sections per partition, footer
//     index, trailer, xxhash64, none/zstd/s2) and the builder that decides
//     which partitions go into which object and when to cut. No I/O.
//   - election: the rule a broker's controller elects a partition's leader
//     by (live and in sync, first or longest, at the next epoch; unclean
//     only when asked), which the demo, the simulation and the example
//     broker share. No I/O.
//   - walstore: the Node (a broker's one entry point: its leader and
//     follower sides, the high watermark with HighWatermark, SetInSync and
//     WaitReplicated, and garbage collection) and the Manager (copy, fetch,
//     delete combined objects).
//   - directread: a consumer's Reader of committed records straight from
//     the objects, fenced as a follower is, never skipping an offset.
//   - internal/leadcore, internal/followcore and internal/readcore: the
//     leader's, the follower's and the direct reader's protocol as state
//     machines without goroutines, clock or I/O (each takes events and
//     hands out work through a Ready, acknowledged with Advance, as
//     etcd-io/raft's RawNode); walstore's Leader and Follower and
//     directread's Reader are their drivers.
//   - internal/rolecore: a Node's role transitions as rules over its two
//     cores (validate, prepare, change only once nothing can fail), which
//     walstore's Node and the simulation both drive.
//   - memstore: in-memory ObjectStore, metadata.Log and LocalLog, with
//     latency profiles, fault injection and request accounting: the default
//     for tests, examples and the demo.
//   - s3express: the production ObjectStore on aws-sdk-go-v2, one directory
//     bucket per AZ; standard S3 buckets and S3-compatible servers work too.
//   - fsstore and gcsstore: ObjectStores on a POSIX filesystem (local disk,
//     NFS, EFS, FSx) and on Google Cloud Storage.
//   - metering and promexport: ObjectStore and metadata.Log wrappers that
//     count requests, bytes, errors and latency and attribute their cost to
//     partitions, and a Prometheus collector over them and the Nodes.
//   - metadata/kafkalog: metadata.Log on a Kafka topic through franz-go.
//   - costmodel: prices and the arithmetic of a workload, and a planner.
//   - cmd/activetier: the demo, bench, inspect and cost commands.
//   - internal/cluster: the cluster of brokers and its controller that
//     the demo runs and the test clusters build on.
//   - internal/harness/clustertest and internal/harness/sim: the seven
//     failure scenarios over any backend, and the seeded simulation of a
//     whole cluster.
//   - examples/quickstart (three Nodes on memstore), examples/s3express
//     (the same on an AWS account) and examples/kafkabroker: a small
//     Kafka-protocol broker whose replication is activetier alone, with
//     its log on disk: the wiring a broker author writes.
//
// Lower packages never import higher ones: storage imports only metadata;
// metadata, fencing, digest and combiner do no I/O; walstore knows object storage
// and the broker only through storage.ObjectStore, metadata.Log and
// storage.LocalLog; backends implement those without importing walstore.
// The internal packages at the top of internal/ are the library's own and
// import only metadata, storage, fencing, combiner, digest and each other; those
// under internal/harness are imported by tests alone and may import
// anything (layout_test.go checks both).
//
// # Guarantees
//
//   - A follower appends a record only if its (epoch, offset) matches the
//     leader lineage it has learned from epoch-start markers; it applies in
//     offset order whatever order metadata arrives in, applies duplicates
//     once, holds gaps rather than skipping them, and truncates where its log
//     diverged (KIP-320).
//   - Every section is verified (xxhash64) before it is appended; a corrupt
//     range is never appended and the error names the object and partition.
//   - The leader never blocks the produce path beyond a bounded buffer, never
//     drops data on upload failure (it retries, and reports when the broker
//     should fall back to ordinary replication), and publishes each
//     partition's entries in offset order.
//   - After an AZ loss the new leader republishes what followers may lack to
//     its own AZ's bucket; followers wait for it rather than stopping.
//   - An object is deleted only once every section in it is below what all
//     the partition's followers applied and below the broker's tiered mark.
//   - A partition's high watermark never goes back within a leadership. A
//     direct reader yields only records below a commit it can trust (unless
//     configured to read everything published, Config.Durable) and never
//     skips an offset: records it can no longer find are reported
//     (directread.GoneError) with where to resume.
//   - Time and randomness are injected: the protocol cores give the same
//     work for the same events, byte for byte, and their tests are tables
//     of events and expected output.
package activetier
