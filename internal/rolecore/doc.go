// Package rolecore is the one definition of a Node's role transitions:
// BecomeLeader, BecomeFollower and StopReplica as rules over a partition's
// leader core and follower core. A rule validates its arguments, prepares
// (reads the local log's end for a leadership to begin at), and changes
// the cores only once nothing left can fail, so that a refused transition
// leaves the role in effect as it was; it returns the RoleState the
// partition then has. The one step that cannot be undone, the leader
// core resigning, comes last.
//
// It has no goroutines, locks, clock or I/O. Its callers (walstore's Node
// and the simulation's node) implement Cores: how they reach their two
// cores and their local log, with whatever locks, contexts and deadlines
// they need; the rules only say in which order which step is taken and
// which result stops the transition.
//
// Weakening undoes, one flag at a time, fixes the rules once lacked, so
// that the simulation can show its model catches each; a broker never
// sets it.
package rolecore
