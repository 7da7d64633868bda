// Package kafkalog stores activetier's WAL metadata in a Kafka topic: it is a
// [metadata.Log] on github.com/twmb/franz-go, for brokers that already run
// Kafka and want KIP-1176's __remote_wal_log_metadata topic rather than a new
// system.
//
// # Guarantees
//
//   - An acknowledged Append survives the loss of the partition leader: the
//     producer requires acks from all in-sync replicas and is idempotent, so a
//     retried produce is stored once. These are franz-go's defaults; New
//     refuses client options that change them, a transactional ID, or topic
//     auto-creation.
//   - Offsets are Kafka's: dense per partition, because the log never uses
//     transactions and refuses a compacted topic.
//   - The partition count is checked, never assumed: the follower-affinity
//     partitioner routes an entry to partition follower_id % N, so a topic
//     with another N would send entries where nobody reads them. New returns
//     a *PartitionCountError instead.
//   - Nothing is swallowed. A missing topic (ErrTopicNotFound), a wrong
//     partition count (ErrPartitionCount), a missing ACL (ErrNotAuthorized,
//     wrapping the broker's kerr error), an unreachable cluster (the dial
//     error with the seed brokers tried) and records trimmed away
//     ([metadata.ErrOffsetOutOfRange], with the watermarks) each come back as
//     an error that names the topic, partition and offset involved.
//   - Every call returns in bounded time: Append within Config.DeliveryTimeout,
//     Read within Config.ReadWait plus Config.RequestTimeout, Watermarks and
//     Trim within Config.RequestTimeout (or the caller's deadline, if sooner).
//     A cluster that refuses or cannot take the request gives ErrUnavailable;
//     see Outages below.
//   - Close ends every goroutine and connection the log started, and wakes
//     reads that are waiting.
//
// # Wiring it into a broker
//
// Each broker opens one Log at startup with the same Topic and Partitions, and
// hands it to the engines: the leader side appends one message per metadata
// partition per flush, the follower side reads the one partition
// broker_id % Partitions from the offset it last applied, and garbage
// collection trims what every follower applied. See Example for the calls.
//
//	log, err := kafkalog.New(ctx, kafkalog.Config{
//		SeedBrokers:       []string{"kafka-1:9092", "kafka-2:9092"},
//		ClientOpts:        []kgo.Opt{kgo.SASL(mechanism), kgo.DialTLSConfig(tlsConfig)},
//		Partitions:        50, // the partitioner's N; the same on every broker
//		CreateTopic:       true,
//		ReplicationFactor: 3,
//		TopicConfigs:      map[string]string{"min.insync.replicas": "2"},
//		Logger:            logger,
//	})
//
// The principal needs, on the topic: Describe, Write and Read; Delete for
// Trim; DescribeConfigs to let New check the cleanup policy (without it the
// check is skipped with a warning); Create only with CreateTopic. Kafka before
// 3.0 also wants IdempotentWrite on the cluster.
//
// # Reading without a consumer group
//
// Like KIP-405's topic-based metadata manager, the log reads assigned
// partitions directly: no group, no committed offsets. The follower engine
// owns its position (the offset after the last entry it applied) and passes
// it to every Read; after a restart or a truncation it simply reads from
// elsewhere.
//
// Read maps onto one Kafka FetchRequest sent to the partition's leader, with
// no fetch session: MaxWaitMillis is Config.ReadWait (or less, to meet ctx's
// deadline) and MinBytes is 1, so the broker itself implements the long
// poll and answers the moment a record arrives. The alternative, a franz-go
// consumer per partition (ConsumePartitions, SetOffsets, PauseFetchPartitions),
// was rejected: it fetches in the background whether or not anyone reads,
// re-positioning means discarding buffered fetches that may still arrive, and
// an out-of-range offset becomes an automatic reset rather than the error the
// Log contract requires. A direct fetch is stateless and exact, and
// franz-go's ProcessFetchPartition still does the batch decoding, CRC check
// and decompression.
//
// Two details keep it efficient. Each partition read gets a franz-go client
// of its own, because Kafka answers one connection's requests in order: a
// long poll on an idle partition would otherwise delay every other
// partition's fetch. With follower-affinity routing (docs/design.md, "Data
// flow") each broker reads one metadata partition, so that is one extra
// client per broker. And a fetch returns whatever fits
// in Config.ReadMaxBytes; records beyond the Read's limit are kept, and the
// next Read from the offset that follows is answered from them once the
// partition's leader confirms it still has them: they came before the
// call, and since then the topic may have been replaced, or the partition
// trimmed, by another process. The confirmation is a fetch by topic ID at
// the high watermark the last fetch saw, without a long poll and for one
// byte, so it costs a round trip but no record bytes (one batch, dropped,
// if records were appended meanwhile); it fails for a topic the leader no
// longer has, and its log start offset shows a trim. So no Read returns a
// record that its partition did not hold, in the topic the log reads, at
// some moment during the call, read ahead or not: the read-ahead saves
// fetching a response again, not the round trip. It is one fetch response
// at most, dropped when a Read asks for another offset, this log trims
// past it, or the confirmation fails.
//
// # Outages
//
// franz-go retries a record that Kafka refuses with a retriable error
// (NOT_ENOUGH_REPLICAS while too few replicas are in sync, a leader
// election, a storage error) or whose connection drops, and by default it
// does so forever: an Append with no deadline of its own would never
// return, and the leader engine would never learn the metadata log is down.
// So every call is bounded (DefaultDeliveryTimeout and DefaultRequestTimeout,
// five seconds each), and on expiry returns an error wrapping
// ErrUnavailable that says what Kafka did not do in time, distinct from the
// caller's own context ending (which gives the context's error). Retriable
// broker errors and network failures that outlast the log's retries are
// ErrUnavailable too. The metadata package has no sentinel for this; the
// error is this package's.
//
// The log needs no repair afterwards: the same Log works again as soon as
// Kafka does. To make that prompt, the log's franz-go clients refresh
// metadata at most every 250ms rather than every 5s (franz-go waits for
// fresh metadata before retrying a refused produce), cap retry backoff at
// one second, drop a connection whose answer is overdue by RequestTimeout,
// and ask brokers to answer a produce within DeliveryTimeout. ClientOpts can
// override each.
//
// An Append that timed out may still be stored. franz-go keeps a record
// whose request reached a broker unanswered, because failing it could
// break the idempotent producer's sequence numbers, and sends it again when
// the broker is back; the caller has been told the outcome is unknown.
// Records of a partition are failed together, so an Append that arrives
// while an abandoned one is still buffered is produced again (it was
// certainly not stored) until its own bound.
//
// # A replaced topic
//
// Deleting the metadata topic and creating it again gives it a new topic
// ID and offsets from zero. franz-go never adopts a new ID: an open
// producer would fail every record with UNKNOWN_TOPIC_ID until purged,
// while a reader's read-ahead still held records of the old topic. The log
// compares the ID in every metadata answer it asks for (after a produce or
// fetch was refused for an unknown topic, before a Trim, and when a reader
// looks up its partition's leader) with the one it works with. On a change
// it adopts the new ID, purges the producer's state for the topic, and
// returns ErrTopicReplaced; the next Append goes to the new topic. Each
// partition read before then returns, on its next Read, an error wrapping
// ErrTopicReplaced and metadata.ErrOffsetOutOfRange with the new
// watermarks, having dropped its read-ahead, so a reader goes back to the
// low watermark as after a trim. Trim checks the ID before deleting, so an
// offset of the old topic cannot delete unread records of the new one.
// Metadata from a broker that still shows a retired ID is retried, not
// taken for another replacement. Fetches go by topic ID (from Kafka 3.1,
// fetch v13), so the leader refuses one for a replaced topic, and the ID
// in every fetch response is checked too; a broker that has topic IDs but
// fetches by name (Kafka 2.8 to 3.0) would serve the new topic's records at
// the old offsets, so there a fetch that returns records is followed by a
// metadata request for the ID. The check needs topic IDs (Kafka 2.8 and
// later).
//
// # Retention
//
// New creates the topic with cleanup.policy=delete, retention.ms of one hour
// (DefaultRetention) and segment.ms of ten minutes (DefaultSegmentRoll),
// unless Config.TopicConfigs says otherwise.
//
// The worry of the public KIP-1176 discussion is size: KIP-405 writes one entry per closed
// segment, so its metadata topic keeps everything (retention.ms=-1), while
// WAL metadata gets an entry per partition per flush — with 1 GB segments
// and 10 KB uploads, 100,000 times as many. A broker leading 1,000
// partitions with RF=3 and a 250 ms flush publishes about 4,000 entries a
// second, each to up to two metadata partitions; at some 40 bytes an entry
// that is over 1 GB an hour per broker, and Kafka's default seven-day
// retention would keep about 200 GB of it per broker, times the replication
// factor.
//
// Short retention is safe because nothing depends on old entries. An entry
// is needed until every follower applied it (seconds) and the records are in
// the followers' logs; garbage collection trims the log at that point, and
// retention is only the backstop when that does not happen. A follower that
// comes back after its entries expired gets ErrOffsetOutOfRange and catches
// up by ordinary replication from the leader's local log, which still has the
// records. A new leader republishes what followers lack under its own epoch,
// so failover never reads old entries either. One hour covers a broker
// restart or a rolling upgrade on the cheap path. segment.ms is set because
// Kafka deletes whole closed segments only: with its seven-day default, a
// quiet partition would keep a week of entries whatever retention.ms says.
//
// # How many partitions
//
// Broker b reads partition b % N, and an entry is written once to the
// partition of each of its followers (once per partition when followers
// share one). With N at least the number of brokers, and broker ids that do
// not collide modulo N, every broker reads only entries for partitions it
// follows: the least metadata traffic, which matters because a metadata read
// crosses AZs whenever the metadata partition's leader is elsewhere (see
// docs/design.md, "Worked cost examples from the KIP-1176 discussion": the
// 3 KB metadata broadcast). With fewer partitions, about B/N brokers share each
// one and each broker reads, then discards, the entries of the others, so
// read traffic grows by that factor while writes shrink a little (followers
// that share a partition share a copy). TestFollowerAffinity shows it with 12
// brokers, N=4 and RF=3: each broker receives exactly the entries of the
// partitions that it or the two brokers sharing its metadata partition
// follow, about three times what it needs, and each entry is written 1.84
// times.
//
// Choose N for the largest cluster you expect: Kafka cannot remove
// partitions, and adding some changes every broker's b % N, which all
// brokers and the partitioner must switch to together (New's partition count
// check stops a broker that has not). KIP-1176's default of 50 suits clusters
// up to 50 brokers; idle partitions cost Kafka little.
//
// # Fencing is not the transport's job
//
// The log stores and returns bytes; it knows nothing of leader epochs. The
// leader engine asks the broker's view of its current epoch before
// publishing and stops when it is no longer leader, and the follower decides
// what to apply with package fencing from the epoch-start markers and the
// publisher epochs inside the messages. A zombie leader can still append to
// this topic (Kafka's idempotent producer does not fence across processes,
// and a transactional one would fence per producer ID, not per partition
// epoch); followers drop what it wrote because fencing says so, not because
// the topic refused it, as TestEngineZombieLeaderOverKafka shows with the
// walstore engines running over this log. So the log provides nothing
// epoch-specific.
package kafkalog
