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
// (control.go), carrying offsets and decisions only:
//
//   - POST /v1/progress: a follower's Progress (its log end and last epoch,
//     and its incarnation), as Kafka's fetch request carries them, to the
//     partition's leader, which answers with the high watermark, as
//     Kafka's fetch response does. The leader passes the progress to
//     Node.RecordProgress, whose high watermark (over the in-sync
//     followers the broker gives Node.SetInSync) acks=all waits for with
//     Node.WaitReplicated and fetches are served up to, and whose
//     Node.Replicas says which followers have caught up.
//   - POST /v1/cluster: the controller's decisions, the live brokers and
//     each partition's replicas, leader, epochs and in-sync replicas,
//     which the broker turns into the Node's BecomeLeader, BecomeFollower,
//     StopReplica and SetInSync calls.
//   - On the controller (Controller.Handler): POST /v1/brokers, a
//     broker's registration at start (409 Conflict for a run older than
//     the live one, see Controller.Register); POST /v1/isr, a leader's proposal
//     of a partition's in-sync set (Kafka's AlterPartition, see isr.go:
//     a follower joins once caught up, leaves once it lags for
//     Config.ReplicaLagTime); POST /v1/topics, a CreateTopics request a
//     broker forwards. The controller elects leaders only from the in-sync
//     replicas, when a broker fails (Controller.BrokerFailed) or returns.
//   - GET /v1/status: the broker's view of each partition and its Node's
//     counters, for tests and operators: among them the follower side's
//     digest checks and mismatches (a replica whose log differs from its
//     leader's, which the broker also logs at Error; see package digest).
//
// Each POST takes exactly one JSON value of at most 16 MiB, with no field
// its type lacks, and answers 400 (413 past the bound) to a body it
// cannot take, 409 with the reason to a request refused, 204 to a change
// taken that has no answer, and its answer as JSON otherwise.
//
// A broker restarted on its data is a new incarnation: it leads nothing
// until a view lists that incarnation, registers, and follows every
// partition, outside every in-sync set until its leaders find it caught
// up; the controller never elects it before, unless it is the last
// in-sync replica of a partition left without a leader.
package broker
