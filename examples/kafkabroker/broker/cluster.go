package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/activetier/activetier/examples/kafkabroker/disklog"
	"github.com/activetier/activetier/metadata"
)

// BrokerInfo is one broker as the cluster knows it.
type BrokerInfo struct {
	ID      int32  `json:"id"`
	AZ      string `json:"az"`
	Kafka   string `json:"kafka"`   // host:port Kafka clients connect to
	Control string `json:"control"` // host:port of the control protocol
	// Incarnation names one run of the broker's process, new at every
	// start (Kafka's incarnation id): a broker leads only in a view that
	// lists its own incarnation, so a restarted broker never acts on
	// the leaderships of the run before it. A later run's incarnation
	// sorts after an earlier one's (see newIncarnation), which is how
	// the controller tells a restart from a stale registration.
	Incarnation string `json:"incarnation,omitempty"`
}

// newIncarnation names a run started at now: the start time in
// nanoseconds as 16 hex digits, so that a later run's sorts after an
// earlier one's as a string (as long as the machine's clock does not go
// back across a restart by more than the time between the runs), then
// 16 random hex digits, so that two runs never share one.
func newIncarnation(now time.Time) string {
	return fmt.Sprintf("%016x%016x", uint64(now.UnixNano()), rand.Uint64())
}

// Cluster is the controller's view: the live brokers and, for every
// partition, its replicas, leader, leader epoch and in-sync replicas. A
// broker applies the whole view at once (POST /v1/cluster).
type Cluster struct {
	// Controller is the host:port of the controller's HTTP API
	// (Controller.Handler), where brokers register, forward CreateTopics
	// and propose in-sync sets; empty when there is none.
	Controller string `json:"controller,omitempty"`
	// Brokers are the live brokers, each at its current incarnation.
	Brokers []BrokerInfo `json:"brokers"`
	Topics  []Topic      `json:"topics"`
}

// Topic is one topic's partitions.
type Topic struct {
	Name       string      `json:"name"`
	Partitions []Placement `json:"partitions"`
}

// Placement is one partition's state, as Kafka's controller keeps it.
// Replicas are the brokers assigned to hold it, live or not; ISR, the
// in-sync replicas, are those that hold every record the high watermark
// has passed, and the only ones a leader is elected from (no unclean
// election). A broker that dies leaves the ISR, unless it is the last
// member: then the partition has no leader (-1) until that broker
// returns. The leader epoch changes with every new leader; the partition
// epoch with every change of leader or ISR, and a leader's proposal of a
// new ISR names the one it saw (Kafka's AlterPartition).
type Placement struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	Epoch          int32   `json:"epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	PartitionEpoch int32   `json:"partitionEpoch"`
}

// validate checks what the broker relies on.
func (c *Cluster) validate() error {
	live := make(map[int32]bool)
	for _, b := range c.Brokers {
		if live[b.ID] {
			return fmt.Errorf("broker %d listed twice", b.ID)
		}
		live[b.ID] = true
	}
	topics := make(map[string]bool)
	for _, t := range c.Topics {
		if topics[t.Name] {
			// Each listing would place the same partitions.
			return fmt.Errorf("topic %q listed twice", t.Name)
		}
		topics[t.Name] = true
		seen := make(map[int32]bool)
		for i, p := range t.Partitions {
			tp := metadata.TopicPartition{Topic: t.Name, Partition: p.Partition}
			switch {
			case p.Partition != int32(i):
				return fmt.Errorf("topic %q: partitions must be listed 0 to n-1, found %d at %d", t.Name, p.Partition, i)
			case seen[p.Partition]:
				return fmt.Errorf("%s listed twice", tp)
			case p.Epoch < 0 || p.PartitionEpoch < 0:
				return fmt.Errorf("%s: negative epoch %d or partition epoch %d", tp, p.Epoch, p.PartitionEpoch)
			case len(p.Replicas) == 0 || hasDuplicates(p.Replicas):
				return fmt.Errorf("%s: replicas %v: want at least one, each once", tp, p.Replicas)
			case len(p.ISR) == 0 || hasDuplicates(p.ISR) || !subset(p.ISR, p.Replicas):
				return fmt.Errorf("%s: in-sync replicas %v: want at least one of the replicas %v, each once", tp, p.ISR, p.Replicas)
			case p.Leader >= 0 && !slices.Contains(p.ISR, p.Leader):
				return fmt.Errorf("%s: leader %d is not among the in-sync replicas %v", tp, p.Leader, p.ISR)
			case p.Leader >= 0 && !live[p.Leader]:
				return fmt.Errorf("%s: leader %d is not a live broker", tp, p.Leader)
			case p.Leader < -1:
				return fmt.Errorf("%s: leader %d: want a broker id, or -1 for none", tp, p.Leader)
			}
			seen[p.Partition] = true
		}
		if err := disklog.ValidPartition(metadata.TopicPartition{Topic: t.Name}); err != nil {
			return err
		}
	}
	return nil
}

func hasDuplicates(ids []int32) bool {
	return len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids)
}

// subset reports whether every id of a is in b.
func subset(a, b []int32) bool {
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}

// registered reports whether c lists this run of the broker.
func (b *Broker) registered(c Cluster) bool {
	return slices.ContainsFunc(c.Brokers, func(bi BrokerInfo) bool {
		return bi.ID == b.cfg.ID && bi.Incarnation == b.incarnation
	})
}

// applyCluster makes the broker's roles what c says, partition by
// partition: BecomeLeader where it now leads at a new epoch,
// BecomeFollower where it follows at a new epoch, StopReplica where it no
// longer is a replica or the partition has no leader, and the leader's
// in-sync set where only that changed. A placement at an epoch below the
// one the broker knows is stale and ignored. A view that does not list
// this run of the broker (its incarnation) makes it lead nothing: it
// follows where others lead and registers again.
func (b *Broker) applyCluster(ctx context.Context, c Cluster) error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("broker: cluster: %w", err)
	}
	b.transitions.Lock()
	defer b.transitions.Unlock()

	registered := b.registered(c)
	b.mu.Lock()
	b.isRegistered, b.hasView = registered, true
	b.controller = c.Controller
	b.brokers = make(map[int32]BrokerInfo)
	for _, bi := range c.Brokers {
		b.brokers[bi.ID] = bi
	}
	for _, t := range c.Topics {
		b.topics[t.Name] = int32(len(t.Partitions))
	}
	b.mu.Unlock()
	if !registered {
		b.registrar.wake()
	}

	var errs []error
	for _, t := range c.Topics {
		for _, pl := range t.Partitions {
			tp := metadata.TopicPartition{Topic: t.Name, Partition: pl.Partition}
			if err := b.place(ctx, tp, pl, registered); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", tp, err))
			}
		}
	}
	b.notify()
	b.reporter.wake()
	b.isr.wake()
	return errors.Join(errs...)
}

// place applies one partition's placement; registered says whether the
// view lists this run of the broker.
func (b *Broker) place(ctx context.Context, tp metadata.TopicPartition, pl Placement, registered bool) error {
	b.mu.Lock()
	p := b.parts[tp]
	if p == nil {
		p = &partition{tp: tp, epoch: -1, partitionEpoch: -1}
		b.parts[tp] = p
	}
	b.mu.Unlock()

	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	s := p.snapshot()
	if pl.Epoch < s.epoch || pl.Epoch == s.epoch && pl.PartitionEpoch < s.partitionEpoch {
		b.lg.Warn("ignoring a stale placement", "partition", tp.String(), "epoch", pl.Epoch, "partitionEpoch", pl.PartitionEpoch,
			"known", s.epoch, "knownPartitionEpoch", s.partitionEpoch)
		return nil
	}
	switch {
	case !slices.Contains(pl.Replicas, b.cfg.ID) || pl.Leader < 0 || pl.Leader == b.cfg.ID && !registered:
		// Not a replica, or nobody may lead: only the placement, for
		// Metadata answers. A run the view does not list leads nothing
		// it names this broker the leader of: those leaderships were
		// its previous run's, and the controller moves them.
		if s.role != roleNone {
			if err := b.node.StopReplica(ctx, tp); err != nil {
				return err
			}
		}
		p.producers = nil
		b.setRole(p, roleNone, pl)
		return nil

	case pl.Leader == b.cfg.ID:
		if s.role == roleLeader && pl.Epoch == s.epoch {
			b.setRole(p, roleLeader, pl) // the in-sync replicas changed
			return b.syncInSync(p)
		}
		// Every replica but this one follows, in sync or not: the Node
		// keeps objects until all of them applied them.
		followers := slices.DeleteFunc(slices.Clone(pl.Replicas), func(r int32) bool { return r == b.cfg.ID })
		// The lowest offset an in-sync follower may lack: every in-sync
		// replica held the log below the high watermark this broker
		// knew, so a new leader republishes from there (into its own
		// bucket, for followers that cannot reach the old leader's). A
		// first leadership of an empty log has nothing to republish.
		republishFrom := int64(-1)
		end, err := b.log.EndOffset(tp)
		if err != nil {
			return err
		}
		if s.role != roleLeader && end > 0 {
			republishFrom = s.hw
			if s.epoch < 0 { // the broker restarted: it knows no high watermark
				republishFrom, err = b.log.StartOffset(tp)
				if err != nil {
					return err
				}
			}
		}
		if err := b.log.AssignEpoch(tp, pl.Epoch); err != nil {
			return err
		}
		if err := b.node.BecomeLeader(ctx, tp, pl.Epoch, followers, republishFrom); err != nil {
			return err
		}
		// The producers' state, from the log as it is now that the
		// follower side has stopped appending, unless the broker leads
		// on at the same epoch (its log unchanged). Produce waits for it
		// on appendMu.
		if s.role != roleLeader || s.epoch != pl.Epoch || p.producers == nil {
			if p.producers, err = b.rebuildProducers(ctx, tp); err != nil {
				return err
			}
		}
		b.setRole(p, roleLeader, pl)
		if err := b.syncInSync(p); err != nil {
			return err
		}
		b.watchHW(p, pl.Epoch)
		b.lg.Info("leading", "partition", tp.String(), "epoch", pl.Epoch, "isr", pl.ISR, "followers", followers, "republishFrom", republishFrom)
		return nil

	default:
		if s.role == roleFollower && pl.Epoch == s.epoch && pl.Leader == s.leader {
			b.setRole(p, roleFollower, pl) // the in-sync replicas changed
			return nil
		}
		if err := b.node.BecomeFollower(ctx, tp, pl.Epoch, pl.Leader); err != nil {
			return err
		}
		p.producers = nil
		b.setRole(p, roleFollower, pl)
		b.lg.Info("following", "partition", tp.String(), "epoch", pl.Epoch, "leader", pl.Leader)
		return nil
	}
}

// setRole records the role and placement. A new leadership starts the
// followers' tracking afresh, none lagging before ReplicaLagTime has
// passed (Kafka's makeLeader); a placement at a later partition epoch settles
// any proposal of an in-sync set made from an earlier one.
func (b *Broker) setRole(p *partition, r role, pl Placement) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r == p.role && pl.Epoch == p.epoch && pl.PartitionEpoch < p.partitionEpoch {
		return // the controller's answer to a proposal came first
	}
	if r == roleLeader && (p.role != roleLeader || p.epoch != pl.Epoch) {
		now := time.Now()
		p.followers = make(map[int32]*follower)
		for _, f := range pl.Replicas {
			if f != b.cfg.ID {
				p.followers[f] = &follower{since: now}
			}
		}
		p.pending = nil
	}
	if r != roleLeader || pl.PartitionEpoch > p.partitionEpoch {
		p.pending = nil
	}
	p.role, p.leader, p.epoch, p.partitionEpoch = r, pl.Leader, pl.Epoch, pl.PartitionEpoch
	p.replicas, p.isr = slices.Clone(pl.Replicas), slices.Clone(pl.ISR)
}

// clusterView returns the brokers and partitions for a Metadata answer.
func (b *Broker) clusterView() (map[int32]BrokerInfo, map[string]int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	brokers := make(map[int32]BrokerInfo, len(b.brokers))
	for id, bi := range b.brokers {
		brokers[id] = bi
	}
	topics := make(map[string]int32, len(b.topics))
	for t, n := range b.topics {
		topics[t] = n
	}
	return brokers, topics
}
