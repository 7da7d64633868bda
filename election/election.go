package election

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// NoLeader is the leader of a partition that has none, as in Kafka's
// metadata.
const NoLeader int32 = -1

// ErrInvalid is returned for a partition or options the rule cannot
// judge: no replicas, a replica listed twice, a current epoch below -1 or
// a negative Skip. The caller's view is wrong; nothing is elected.
var ErrInvalid = errors.New("election: invalid partition or options")

// ErrEpochExhausted is returned when the next leader epoch would pass
// math.MaxInt32: the partition cannot take a new leadership.
var ErrEpochExhausted = errors.New("election: no leader epoch left")

// Replica is one replica of a partition, as the controller knows it.
type Replica struct {
	// ID is the replica's broker.
	ID int32
	// Live is whether the controller counts the broker alive: registered,
	// its session not expired, not a deposed leader left unaware.
	Live bool
	// InSync is whether the replica is in the in-sync set the controller
	// committed: it holds every record acknowledged, up to the high
	// watermark.
	InSync bool
	// End is the replica's log end offset; only Options.Longest reads it.
	End int64
}

// Partition is what the controller knows of a partition when it elects.
type Partition struct {
	// Replicas are the partition's replicas, each once, in the order the
	// controller prefers them: Kafka's is the assignment's, whose first
	// replica is the preferred one.
	Replicas []Replica
	// Leader is the current leader, NoLeader for none.
	Leader int32
	// Epoch is the current leader epoch, -1 if there has been none.
	Epoch int32
}

// Options are the controller's choices within the rule.
type Options struct {
	// Exclude names brokers not to elect though they may lead: the leader
	// being moved away from, or a broker shutting down.
	Exclude []int32
	// Unclean allows, when no live in-sync replica may lead, a live
	// replica outside the in-sync set, as Kafka's
	// unclean.leader.election.enable does; records acknowledged may be
	// lost.
	Unclean bool
	// Longest elects the eligible replica whose log ends last, ties going
	// to the first in Replicas' order, instead of the first.
	Longest bool
	// Skip is how many epochs to leave out past the next: 0 elects at the
	// current epoch plus one.
	Skip int32
}

// Decision is an election's outcome.
type Decision struct {
	// Leader is the broker elected, or NoLeader when none may lead.
	Leader int32
	// Epoch is the partition's leader epoch from now on.
	Epoch int32
	// Changed is false only when a partition without a leader still has
	// none: its epoch stays, and nobody needs telling.
	Changed bool
	// Unclean reports that the leader is not in sync (Options.Unclean):
	// it may lack records that were acknowledged.
	Unclean bool
}

// Eligible returns the replicas of p that may become its leader, in p's
// order: the live, in-sync ones not excluded, or, if there are none and
// o.Unclean is set, the live ones not excluded. A caller that chooses
// among them itself (the simulation draws one) puts its choice first in
// p.Replicas and calls Elect.
func Eligible(p Partition, o Options) ([]Replica, error) {
	if err := validate(p, o); err != nil {
		return nil, err
	}
	return eligible(p, o), nil
}

// Elect elects p's leader by the rule the package documents: the first
// (with o.Longest, the longest) of Eligible's replicas, at the next epoch
// (o.Skip more), or no leader when none is eligible.
func Elect(p Partition, o Options) (Decision, error) {
	if err := validate(p, o); err != nil {
		return Decision{}, err
	}
	cands := eligible(p, o)
	if len(cands) == 0 && p.Leader == NoLeader {
		return Decision{Leader: NoLeader, Epoch: p.Epoch}, nil
	}
	if int64(p.Epoch)+1+int64(o.Skip) > math.MaxInt32 {
		return Decision{}, fmt.Errorf("%w: after epoch %d (skipping %d)", ErrEpochExhausted, p.Epoch, o.Skip)
	}
	d := Decision{Leader: NoLeader, Epoch: p.Epoch + 1 + o.Skip, Changed: true}
	if len(cands) == 0 {
		return d, nil
	}
	best := cands[0]
	if o.Longest {
		for _, c := range cands[1:] {
			if c.End > best.End {
				best = c
			}
		}
	}
	d.Leader, d.Unclean = best.ID, !best.InSync
	return d, nil
}

// validate returns an ErrInvalid error saying what is wrong with p or o.
func validate(p Partition, o Options) error {
	switch {
	case len(p.Replicas) == 0:
		return fmt.Errorf("%w: no replicas", ErrInvalid)
	case p.Epoch < -1:
		return fmt.Errorf("%w: current epoch %d", ErrInvalid, p.Epoch)
	case o.Skip < 0:
		return fmt.Errorf("%w: skip %d", ErrInvalid, o.Skip)
	}
	for i, r := range p.Replicas {
		if slices.ContainsFunc(p.Replicas[:i], func(q Replica) bool { return q.ID == r.ID }) {
			return fmt.Errorf("%w: broker %d listed twice", ErrInvalid, r.ID)
		}
	}
	return nil
}

// eligible is Eligible on a valid p.
func eligible(p Partition, o Options) []Replica {
	var clean, unclean []Replica
	for _, r := range p.Replicas {
		switch {
		case !r.Live || slices.Contains(o.Exclude, r.ID):
		case r.InSync:
			clean = append(clean, r)
		case o.Unclean:
			unclean = append(unclean, r)
		}
	}
	if len(clean) > 0 {
		return clean
	}
	return unclean
}
