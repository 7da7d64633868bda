package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/activetier/activetier/examples/kafkabroker/disklog"
	"github.com/activetier/activetier/metadata"
)

// BrokerInfo is one broker as the cluster knows it.
type BrokerInfo struct {
	ID      int32  `json:"id"`
	AZ      string `json:"az"`
	Kafka   string `json:"kafka"`   // host:port Kafka clients connect to
	Control string `json:"control"` // host:port of the control protocol
}

// Cluster is the controller's view: the live brokers and, for every
// partition, its leader, leader epoch and in-sync replicas. A broker
// applies the whole view at once (POST /v1/cluster).
type Cluster struct {
	// Controller is the host:port of the controller's HTTP API
	// (Controller.Handler), where brokers forward CreateTopics; empty
	// when there is none, and topics cannot be created.
	Controller string       `json:"controller,omitempty"`
	Brokers    []BrokerInfo `json:"brokers"`
	Topics     []Topic      `json:"topics"`
}

// Topic is one topic's partitions.
type Topic struct {
	Name       string      `json:"name"`
	Partitions []Placement `json:"partitions"`
}

// Placement is one partition's leadership. Replicas are the in-sync
// replicas, the leader among them; a broker removed from them no longer
// holds acks=all back.
type Placement struct {
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Epoch     int32   `json:"epoch"`
	Replicas  []int32 `json:"replicas"`
}

// validate checks what the broker relies on.
func (c *Cluster) validate() error {
	ids := make(map[int32]bool)
	for _, b := range c.Brokers {
		if ids[b.ID] {
			return fmt.Errorf("broker %d listed twice", b.ID)
		}
		ids[b.ID] = true
	}
	for _, t := range c.Topics {
		seen := make(map[int32]bool)
		for i, p := range t.Partitions {
			tp := metadata.TopicPartition{Topic: t.Name, Partition: p.Partition}
			switch {
			case p.Partition != int32(i):
				return fmt.Errorf("topic %q: partitions must be listed 0 to n-1, found %d at %d", t.Name, p.Partition, i)
			case seen[p.Partition]:
				return fmt.Errorf("%s listed twice", tp)
			case p.Epoch < 0:
				return fmt.Errorf("%s: negative epoch %d", tp, p.Epoch)
			case !slices.Contains(p.Replicas, p.Leader):
				return fmt.Errorf("%s: leader %d is not among the replicas %v", tp, p.Leader, p.Replicas)
			}
			for _, r := range p.Replicas {
				if !ids[r] {
					return fmt.Errorf("%s: replica %d is not a listed broker", tp, r)
				}
			}
			seen[p.Partition] = true
		}
		if err := disklog.ValidPartition(metadata.TopicPartition{Topic: t.Name}); err != nil {
			return err
		}
	}
	return nil
}

// applyCluster makes the broker's roles what c says, partition by
// partition: BecomeLeader where it now leads at a new epoch (or with new
// followers), BecomeFollower where it follows at a new epoch,
// StopReplica where it no longer is a replica. A placement at an epoch
// below the one the broker knows is stale and ignored.
func (b *Broker) applyCluster(ctx context.Context, c Cluster) error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("broker: cluster: %w", err)
	}
	b.transitions.Lock()
	defer b.transitions.Unlock()

	b.mu.Lock()
	b.controller = c.Controller
	b.brokers = make(map[int32]BrokerInfo)
	for _, bi := range c.Brokers {
		b.brokers[bi.ID] = bi
	}
	for _, t := range c.Topics {
		b.topics[t.Name] = int32(len(t.Partitions))
	}
	b.mu.Unlock()

	var errs []error
	for _, t := range c.Topics {
		for _, pl := range t.Partitions {
			tp := metadata.TopicPartition{Topic: t.Name, Partition: pl.Partition}
			if err := b.place(ctx, tp, pl); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", tp, err))
			}
		}
	}
	b.notify()
	b.reporter.wake()
	return errors.Join(errs...)
}

// place applies one partition's placement.
func (b *Broker) place(ctx context.Context, tp metadata.TopicPartition, pl Placement) error {
	b.mu.Lock()
	p := b.parts[tp]
	if p == nil {
		p = &partition{tp: tp, epoch: -1}
		b.parts[tp] = p
	}
	b.mu.Unlock()

	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	s := p.snapshot()
	if pl.Epoch < s.epoch {
		b.lg.Warn("ignoring a stale placement", "partition", tp.String(), "epoch", pl.Epoch, "known", s.epoch)
		return nil
	}
	mine := slices.Contains(pl.Replicas, b.cfg.ID)
	switch {
	case !mine:
		// Not a replica: only the placement, for Metadata answers.
		if s.role != roleNone {
			if err := b.node.StopReplica(ctx, tp); err != nil {
				return err
			}
		}
		p.producers = nil
		b.setRole(p, roleNone, pl)
		return nil

	case pl.Leader == b.cfg.ID:
		if s.role == roleLeader && pl.Epoch == s.epoch && slices.Equal(pl.Replicas, s.replicas) {
			return nil
		}
		followers := slices.DeleteFunc(slices.Clone(pl.Replicas), func(r int32) bool { return r == b.cfg.ID })
		// The lowest offset a follower may lack: every in-sync replica
		// held the log below the high watermark this broker knew, so a
		// new leader republishes from there (into its own bucket, for
		// followers that cannot reach the old leader's). A first
		// leadership of an empty log has nothing to republish.
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
		b.advanceHW(p)
		b.lg.Info("leading", "partition", tp.String(), "epoch", pl.Epoch, "followers", followers, "republishFrom", republishFrom)
		return nil

	default:
		if s.role == roleFollower && pl.Epoch == s.epoch && pl.Leader == s.leader {
			b.setRole(p, roleFollower, pl) // the in-sync replicas may have changed
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

func (b *Broker) setRole(p *partition, r role, pl Placement) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r == roleLeader && (p.role != roleLeader || p.epoch != pl.Epoch) {
		p.credit = make(map[int32]int64)
	}
	p.role, p.leader, p.epoch, p.replicas = r, pl.Leader, pl.Epoch, slices.Clone(pl.Replicas)
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
