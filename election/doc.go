// Package election is the rule a broker's controller elects a partition's
// leader by: which replicas may lead, which of them does, and at which
// leader epoch. activetier runs no elections itself (the broker's
// controller decides, and tells the Nodes with BecomeLeader and
// BecomeFollower); this package is the decision such a controller makes,
// written once, for the demo's cluster (internal/cluster, which
// cmd/activetier runs), the simulation's controller (internal/harness/sim)
// and the example broker's (examples/kafkabroker/broker).
//
// Like fencing and the protocol cores, it does no I/O, starts no
// goroutines, reads no clock and draws no random numbers: Elect and
// Eligible are pure functions of what the caller says it knows. How the
// controller learns which brokers are alive and in sync, and how it tells
// them what it decided, is the caller's: the example broker's HTTP control
// protocol, the demo's and the simulation's calls in one process.
//
// # The rule
//
// The caller describes the partition: its replicas, each once, in its order
// of preference, and for each whether its broker is live, whether it is in
// sync, and where its log ends; and the current leader and leader epoch.
//
//  1. Eligible, in a clean election: a replica that is live (its broker is
//     registered and its session has not expired; a deposed leader that
//     has not learned it, a zombie, is not), in sync (in the in-sync set
//     the controller committed, so it holds every record acknowledged with
//     acks=all: everything below the high watermark), and not excluded by
//     Options.Exclude (the leader being moved away from, as Kafka excludes
//     the brokers shutting down).
//  2. If no replica is eligible and Options.Unclean is set, every live
//     replica not excluded is: Kafka's unclean election, which may lose
//     acknowledged records (Decision.Unclean says it happened). Without it
//     the partition is left without a leader (NoLeader) until an in-sync
//     replica returns.
//  3. The leader is the first eligible replica in the caller's order, or,
//     with Options.Longest, the eligible replica whose log ends last, ties
//     going to the first in that order.
//  4. The epoch is the next one after the current, Options.Skip more:
//     whenever the leadership changes, to a new leader, to the same one
//     re-elected, or to none, so that nothing done at the old epoch is
//     taken again. A partition that had no leader and still has none keeps
//     its epoch (Decision.Changed is false). An epoch past math.MaxInt32 is
//     ErrEpochExhausted: leader epochs are int32, as in Kafka's protocol,
//     and one that wrapped would fence the live leader instead of the old.
//  5. A partition without replicas, with a replica listed twice, with a
//     current epoch below -1 (none yet) or a negative Skip is ErrInvalid.
//
// # What Kafka does
//
// Kafka's controller (KRaft's PartitionChangeBuilder; before it,
// PartitionLeaderElectionAlgorithms) elects, when a partition's leader
// fails, the first replica of the assignment that is alive and in the ISR;
// only if there is none and unclean.leader.election.enable is set, the
// first live replica outside it. A controlled shutdown excludes the brokers
// shutting down; a preferred-replica election elects the assignment's
// first replica, if it is alive and in the ISR. Every change of leader
// bumps the leader epoch by one. Points 1 to 4 are that rule; KRaft's
// eligible leader replicas (KIP-966), which may lead when the ISR is empty,
// have no counterpart here.
//
// # How the three controllers use it, and what differs on purpose
//
//   - The example broker's Controller keeps Kafka's in-sync set (it commits
//     the leaders' AlterPartition proposals) and elects from it cleanly. Its
//     order starts at the replica at the partition's number, wrapping, so
//     that leaderships spread across brokers; a partition whose in-sync
//     replicas are all down is left without a leader, at the next epoch,
//     until one registers again.
//   - The demo's cluster (internal/cluster) keeps no in-sync set of its own:
//     every follower is in its Node's in-sync set until it crashes, so every
//     live replica holds the high watermark. It elects with Longest,
//     because its producers use acks=1 and the logs are prefixes of the
//     crashed leader's: the longest loses the fewest records (which it
//     counts), as Kafka's ISR election would not try to.
//   - The simulation's controller knows each replica's log, so it calls a
//     replica in sync when its log is a prefix of the leader's and reaches
//     the committed offset (what Kafka's ISR guarantees), and never elects
//     one without the committed records. To explore every leader the rule
//     allows, not only Kafka's first, it draws one of Eligible's replicas
//     from its seeded source and puts it first, draws whether to prefer
//     the longest log, and draws a Skip of 0 or 1 (epochs need not be
//     consecutive); the draws stay in the simulation, in the order they
//     always had, so its seeds replay as before. Its zombies are not an
//     election at all: the simulation elects by this rule and then, on
//     purpose, does not tell the old leader, which keeps producing at its
//     old epoch until it learns. That adversary stays in the simulation; to
//     the rule a zombie is a replica that is not live.
//
// No controller uses Unclean: the example never elects outside the in-sync
// set, the demo has none to be outside of, and the simulation's contract is
// that nothing acknowledged is lost. It is here because it is Kafka's rule,
// and a broker author may configure it knowing what it costs.
package election
