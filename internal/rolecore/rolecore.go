package rolecore

import (
	"fmt"

	"github.com/activetier/activetier/metadata"
)

// Role is what a Node does for a partition.
type Role int

const (
	// NoRole: the Node neither leads nor follows the partition.
	NoRole Role = iota
	// Leading: the Node leads the partition.
	Leading
	// Following: the Node follows the partition.
	Following
)

// String returns "none", "leading" or "following".
func (r Role) String() string {
	switch r {
	case Leading:
		return "leading"
	case Following:
		return "following"
	}
	return "none"
}

// RoleState is a partition's role at a Node, as the last transition that
// took effect left it.
type RoleState struct {
	Role Role
	// Epoch is the leader epoch the role is at; -1 for NoRole.
	Epoch int32
	// Leader is the partition's leader broker as the role knows it: this
	// broker while leading; -1 for NoRole.
	Leader int32
}

// String says the role in a few words, as a refused transition's
// message does.
func (s RoleState) String() string {
	switch s.Role {
	case Leading:
		return fmt.Sprintf("leading at epoch %d", s.Epoch)
	case Following:
		return fmt.Sprintf("following broker %d at epoch %d", s.Leader, s.Epoch)
	}
	return "neither leading nor following"
}

// None is the RoleState of a partition the Node neither leads nor
// follows.
var None = RoleState{Role: NoRole, Epoch: -1, Leader: -1}

// Roles is the roles in effect at a Node, by partition; NoRole is
// absent. The zero value is not usable: make it with make.
type Roles map[metadata.TopicPartition]RoleState

// Of returns tp's role.
func (r Roles) Of(tp metadata.TopicPartition) RoleState {
	if s, ok := r[tp]; ok {
		return s
	}
	return None
}

// Set makes s tp's role, as a transition that took effect left it.
func (r Roles) Set(tp metadata.TopicPartition, s RoleState) {
	if s.Role == NoRole {
		delete(r, tp)
		return
	}
	r[tp] = s
}
