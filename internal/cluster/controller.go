package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/activetier/activetier/election"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// Crash takes down every broker in az, as an AZ failure does: the
// partitions they led go offline (Leader returns nil for them) until
// Elect moves them, and then their Nodes stop. It returns the brokers it
// crashed and the partitions that lost their leader. A Node's error on
// stopping is in Failed's and Close's.
func (c *Cluster) Crash(az string) (crashed []*Broker, moved []metadata.TopicPartition) {
	c.mu.Lock()
	for _, b := range c.brokers {
		if b.AZ == az && !b.down {
			b.down = true
			crashed = append(crashed, b)
		}
	}
	for _, tp := range c.tps {
		if l, ok := c.leaders[tp]; ok && c.byID[l.Broker] != nil && c.byID[l.Broker].down {
			c.offline[tp] = true
			moved = append(moved, tp)
		}
	}
	c.mu.Unlock()
	for _, b := range crashed {
		_ = b.Stop() // its error is in c.errs
	}
	return crashed, moved
}

// Election is what Elect decided and did for one partition.
type Election struct {
	TP        metadata.TopicPartition
	Leader    *Broker // the new leader
	Epoch     int32   // the new leader epoch
	OldLeader *Broker
	// Start is the new leader's log end when it took over: where the new
	// epoch starts.
	Start int64
	// RepublishFrom is where the new leader republishes from (the
	// shortest surviving follower's log end below Start), or -1 if every
	// surviving follower has its whole log.
	RepublishFrom int64
	// OldEnd is where the crashed leader's log ends; the records from
	// Start to OldEnd are lost.
	OldEnd int64
}

// Lost returns how many of the old leader's records the new leader does
// not have: taken with acks=1, they were still buffered for upload, or in
// the failed AZ's bucket and applied by no follower.
func (e Election) Lost() int64 { return max(0, e.OldEnd-e.Start) }

// Elect moves tp, whose leader crashed, to a surviving replica by package
// election's rule, preferring the longest log (all logs are prefixes of
// the old leader's, so it has every record any survivor has; every
// survivor counts as in sync), at the next epoch. The survivors stop
// following first, so their logs stay as the election saw them; if Elect
// fails after that, tp stays offline and Elect may be called again. The
// new leader republishes from the shortest surviving follower's log end,
// since what lies beyond it is in the failed AZ's bucket; Node.WaitDurable
// tells when that is done. The surviving followers follow the new leader,
// and tp is online again.
func (c *Cluster) Elect(ctx context.Context, tp metadata.TopicPartition) (Election, error) {
	c.mu.Lock()
	old, led := c.leaders[tp]
	replicas := c.replicasLocked(tp)
	part := election.Partition{Leader: old.Broker, Epoch: old.Epoch}
	for _, r := range replicas {
		part.Replicas = append(part.Replicas, election.Replica{ID: r.ID, Live: !r.down, InSync: true})
	}
	e := Election{TP: tp, OldLeader: c.byID[old.Broker], RepublishFrom: -1}
	c.mu.Unlock()
	if !led || e.OldLeader == nil {
		return Election{}, fmt.Errorf("cluster: electing %s: no leader to replace (none set, or its broker never added)", tp)
	}
	var survivors []*Broker
	nodes := make(map[*Broker]*walstore.Node)
	for i, r := range replicas {
		if part.Replicas[i].Live {
			survivors = append(survivors, r)
			n, err := r.node()
			if err != nil {
				return Election{}, fmt.Errorf("cluster: electing %s: %w", tp, err)
			}
			nodes[r] = n
		}
	}
	if len(survivors) == 0 {
		return Election{}, fmt.Errorf("cluster: electing %s: every replica is in the failed AZ", tp)
	}
	// Every survivor stops following before its log is read: one still
	// applying what the old leader published could pass the log end the
	// election chose by, and hold records the new leader lacks, which it
	// would then have to truncate away. The end offset read next is where
	// the new epoch starts.
	for _, r := range survivors {
		if err := nodes[r].StopReplica(ctx, tp); err != nil {
			return Election{}, fmt.Errorf("broker %d stopping %s: %w", r.ID, tp, err)
		}
	}
	for i, r := range replicas {
		if part.Replicas[i].Live {
			var err error
			if part.Replicas[i].End, err = endOffset(r, tp); err != nil {
				return Election{}, err
			}
		}
	}
	d, err := election.Elect(part, election.Options{Longest: true})
	if err != nil {
		return Election{}, fmt.Errorf("cluster: electing %s: %w", tp, err)
	}
	bi := slices.IndexFunc(replicas, func(r *Broker) bool { return r.ID == d.Leader })
	if bi < 0 {
		return Election{}, fmt.Errorf("cluster: electing %s: the election chose broker %d, not a replica", tp, d.Leader)
	}
	best := replicas[bi]
	// The survivors no longer replicate: the ends just read are final.
	e.Leader, e.Epoch, e.Start = best, d.Epoch, part.Replicas[bi].End
	var followers []int32
	for i, r := range replicas {
		if i == bi {
			continue
		}
		followers = append(followers, r.ID)
		if !part.Replicas[i].Live {
			continue
		}
		if fend := part.Replicas[i].End; fend < e.Start && (e.RepublishFrom < 0 || fend < e.RepublishFrom) {
			e.RepublishFrom = fend
		}
	}
	if err := best.Local.AssignEpoch(tp, e.Epoch, e.Start); err != nil {
		return Election{}, fmt.Errorf("broker %d assigning epoch %d of %s: %w", best.ID, e.Epoch, tp, err)
	}
	c.SetLeader(tp, best.ID, e.Epoch)
	if err := nodes[best].BecomeLeader(ctx, tp, e.Epoch, followers, e.RepublishFrom); err != nil {
		return Election{}, fmt.Errorf("broker %d leading %s at epoch %d: %w", best.ID, tp, e.Epoch, err)
	}
	for _, r := range survivors {
		if r != best {
			if err := nodes[r].BecomeFollower(ctx, tp, e.Epoch, best.ID); err != nil {
				return Election{}, fmt.Errorf("broker %d following %s at epoch %d: %w", r.ID, tp, e.Epoch, err)
			}
		}
	}
	c.mu.Lock()
	delete(c.offline, tp)
	c.mu.Unlock()
	if e.OldEnd, err = endOffset(e.OldLeader, tp); err != nil {
		return Election{}, err
	}
	return e, nil
}

// endOffset returns b's log end of tp, or an error naming both.
func endOffset(b *Broker, tp metadata.TopicPartition) (int64, error) {
	end, err := b.Local.EndOffset(tp)
	if err != nil {
		return 0, fmt.Errorf("broker %d: log end of %s: %w", b.ID, tp, err)
	}
	return end, nil
}

// ShrinkInSync drops the crashed brokers from the in-sync set of every
// partition they replicate, as Kafka's controller shrinks the ISR when a
// broker's session expires: the high watermark (what acks=all producers
// and direct readers wait for) then moves on without them.
func (c *Cluster) ShrinkInSync() error {
	for _, tp := range c.Partitions() {
		c.mu.Lock()
		lead, led := c.leaders[tp]
		l := c.byID[lead.Broker]
		if !led || l == nil {
			// No leader yet: no in-sync set to shrink.
			c.mu.Unlock()
			continue
		}
		var inSync []int32
		shrunk := false
		for _, r := range c.replicasLocked(tp) {
			switch {
			case r.down:
				shrunk = true
			case r != l:
				inSync = append(inSync, r.ID)
			}
		}
		c.mu.Unlock()
		if shrunk {
			n, err := l.node()
			if err != nil {
				return fmt.Errorf("shrinking the in-sync set of %s: %w", tp, err)
			}
			if err := n.SetInSync(tp, inSync); err != nil {
				return fmt.Errorf("broker %d shrinking the in-sync set of %s: %w", l.ID, tp, err)
			}
		}
	}
	return nil
}
