package rolecore

import (
	"fmt"

	"github.com/activetier/activetier/metadata"
)

// Cores is how a driver's transition reaches its leader core, its
// follower core and its local log. A method that returns an error has
// changed nothing; Unfollow and Resign cannot fail.
type Cores interface {
	// CheckLeader validates BecomeLeader's arguments with the leader
	// core, changing nothing.
	CheckLeader(tp metadata.TopicPartition, epoch int32, followers []int32) error
	// EndOffset reads tp's local log end, for a leadership to begin at.
	// It is called holding neither core, so that only tp waits for it.
	EndOffset(tp metadata.TopicPartition) (int64, error)
	// Hold runs change holding both cores, so that what change did is in
	// effect when Hold returns, and returns change's error. It may fail
	// instead, without running change: the driver gave up waiting for
	// the cores, or they no longer run.
	Hold(change func() error) error
	// Lead makes the leader core tp's leader at epoch, its log ending at
	// leo, or refuses. Called within Hold.
	Lead(tp metadata.TopicPartition, epoch int32, followers []int32, republishFrom, leo int64) error
	// Follow makes the follower core follow tp, whose leader at epoch is
	// broker leader, or refuses. Called within Hold.
	Follow(tp metadata.TopicPartition, epoch, leader int32) error
	// Unfollow makes the follower core stop following tp. Called within
	// Hold.
	Unfollow(tp metadata.TopicPartition)
	// Resign ends the leader core's leadership of tp, for good: its
	// unpublished data is withheld.
	Resign(tp metadata.TopicPartition)
}

// Rules are the transitions of one broker's Node.
type Rules struct {
	// BrokerID is the broker's id: the leader a leadership's RoleState
	// names.
	BrokerID int32
	// StaleEpoch is the error a BecomeLeader at an epoch not above the
	// one followed wraps, for its callers' errors.Is.
	StaleEpoch error
	// Weaken undoes fixes of the rules, for a simulation only.
	Weaken Weakening
}

// Weakening selects fixes of the rules to undo, each re-creating a bug a
// Node once had, so that a simulation can show its model catches it.
type Weakening struct {
	// UnfollowFirst: BecomeLeader stops following before it can be
	// refused, so that a refusal leaves the partition neither led nor
	// followed.
	UnfollowFirst bool
	// AnyEpoch: BecomeLeader takes an epoch not above the one followed.
	AnyEpoch bool
	// ResignFirst: BecomeFollower resigns before it holds the cores, so
	// that giving up there leaves the partition neither led nor
	// followed.
	ResignFirst bool
}

// BecomeLeader makes the broker tp's leader at epoch, with followers as
// its follower brokers, and returns the role that is then in effect; or
// it returns in, the role in effect, and why not, having changed
// nothing. It refuses an epoch not above the one in followed or below
// the one in leads at, then invalid arguments (CheckLeader), reads the
// log end, and holding the cores begins the leadership and only then
// stops following, which cannot fail.
func (r Rules) BecomeLeader(c Cores, in RoleState, tp metadata.TopicPartition, epoch int32, followers []int32, republishFrom int64) (RoleState, error) {
	if r.Weaken.UnfollowFirst {
		_ = c.Hold(func() error { c.Unfollow(tp); return nil })
	}
	// Leading, the same epoch updates the followers and a later one goes
	// on; only an earlier one is stale.
	stale := in.Role == Following && epoch <= in.Epoch || in.Role == Leading && epoch < in.Epoch
	if stale && !r.Weaken.AnyEpoch {
		return in, fmt.Errorf("%w: epoch %d is not above epoch %d, which broker %d leads", r.StaleEpoch, epoch, in.Epoch, in.Leader)
	}
	if err := c.CheckLeader(tp, epoch, followers); err != nil {
		return in, err
	}
	leo, err := c.EndOffset(tp)
	if err != nil {
		return in, err
	}
	err = c.Hold(func() error {
		if err := c.Lead(tp, epoch, followers, republishFrom, leo); err != nil {
			return err
		}
		c.Unfollow(tp)
		return nil
	})
	if err != nil {
		return in, err
	}
	return RoleState{Role: Leading, Epoch: epoch, Leader: r.BrokerID}, nil
}

// BecomeFollower makes the broker a follower of tp, whose leader at epoch
// is broker leader, and returns the role that is then in effect; or it
// returns in and why not, having changed nothing. It refuses an epoch
// below the one in leads or follows at, so that a stale transition never
// ends a later role. Holding the cores, the follower core follows (it
// refuses invalid arguments, and an epoch below the one it follows at
// too), and the leader core resigns last.
func (r Rules) BecomeFollower(c Cores, in RoleState, tp metadata.TopicPartition, epoch, leader int32) (RoleState, error) {
	if r.Weaken.ResignFirst {
		c.Resign(tp)
	}
	if in.Role != NoRole && epoch < in.Epoch {
		return in, fmt.Errorf("%w: epoch %d is below epoch %d, which broker %d leads", r.StaleEpoch, epoch, in.Epoch, in.Leader)
	}
	err := c.Hold(func() error {
		if err := c.Follow(tp, epoch, leader); err != nil {
			return err
		}
		c.Resign(tp)
		return nil
	})
	if err != nil {
		return in, err
	}
	return RoleState{Role: Following, Epoch: epoch, Leader: leader}, nil
}

// StopReplica makes the broker neither lead nor follow tp, and returns
// None; or it returns in and why not, having changed nothing. It refuses
// a partition no transition could have given a role
// (metadata.TopicPartition.Validate); holding the cores, nothing can fail:
// it stops following and resigns.
func (r Rules) StopReplica(c Cores, in RoleState, tp metadata.TopicPartition) (RoleState, error) {
	if err := tp.Validate(); err != nil {
		return in, err
	}
	err := c.Hold(func() error {
		c.Unfollow(tp)
		c.Resign(tp)
		return nil
	})
	if err != nil {
		return in, err
	}
	return None, nil
}
