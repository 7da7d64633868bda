// Package broker is a small Kafka-protocol broker whose replication is
// entirely activetier's: the example a broker author reads to see where a
// walstore.Node meets a real broker.
//
// One Broker runs per process, in one availability zone. It serves the
// Kafka requests a plain producer, an assign-mode consumer and kcat need
// (ApiVersions, Metadata with racks, Produce with acks 0, 1 and all, Fetch
// with KIP-392's preferred read replica, ListOffsets, OffsetForLeaderEpoch),
// and answers every other request with UNSUPPORTED_VERSION rather than a
// hang or a dropped connection. Its log is a disklog.Log; records reach
// followers only through the Node: the leader appends a produced batch to
// its log and to the Node, which uploads it to this AZ's bucket and
// publishes its metadata; each follower's Node fetches the byte ranges and
// appends them to its own log. There is no broker-to-broker data path.
//
// What does cross between brokers is a small control protocol over HTTP
// (control.go), carrying offsets only:
//
//   - POST /v1/progress: a follower's Progress (its log end and last epoch),
//     as Kafka's fetch request carries them, to the partition's leader,
//     which answers with the high watermark, as Kafka's fetch response does.
//     The leader passes the progress to Node.RecordProgress (garbage
//     collection) and counts it for the high watermark: acks=all returns
//     once every in-sync follower's log end has passed the batch.
//   - POST /v1/cluster: the controller's decisions, the partitions' leaders,
//     epochs and replicas, which the broker turns into the Node's
//     BecomeLeader and BecomeFollower calls. The test (or an operator) is
//     the controller: it assigns leaders at start and moves a partition to a
//     surviving broker at a higher epoch after killing its leader.
//   - GET /v1/status: the broker's view of each partition, for tests.
package broker
