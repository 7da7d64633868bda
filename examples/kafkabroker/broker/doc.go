// Package broker is a small Kafka-protocol broker whose replication is
// entirely activetier's: the example a broker author reads to see where a
// walstore.Node meets a real broker.
//
// One Broker runs per process, in one availability zone. It serves the
// Kafka requests producers, assign-mode consumers and admin clients need
// (ApiVersions, Metadata with racks, Produce with acks 0, 1 and all and
// the idempotent producer's sequence checks, InitProducerId, Fetch with
// KIP-392's preferred read replica, ListOffsets by record timestamp,
// OffsetForLeaderEpoch, CreateTopics through the controller). It refuses
// FindCoordinator at once (there is no group or transaction coordinator)
// and answers every other request with UNSUPPORTED_VERSION, never with a
// hang or a dropped connection; the example's README lists what each
// client can do, as its tests measure it.
//
// Its log is a disklog.Log; records reach followers only through the
// Node: the leader appends a produced batch to its log and to the Node,
// which uploads it to this AZ's bucket and publishes its metadata; each
// follower's Node fetches the byte ranges and appends them to its own log.
// There is no broker-to-broker data path.
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
//     BecomeLeader and BecomeFollower calls. The controller (Controller, run
//     by the tests, or an operator's) assigns leaders at start and moves a
//     partition to a surviving broker at a higher epoch after its leader
//     dies; the view names the controller's address.
//   - POST /v1/topics, on the controller: a CreateTopics request a broker
//     forwards; the controller places the new topic's replicas across the
//     racks and posts the new view to every broker before it answers.
//   - GET /v1/status: the broker's view of each partition, for tests.
package broker
