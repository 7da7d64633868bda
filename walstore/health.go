package walstore

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/activetier/activetier/metadata"
)

// Partition health: besides the engine-wide judgement of uploads and
// publishes (Health.Degraded), each engine reports the partitions whose
// replication a failure has stopped, as the cores judge them
// (leadcore.Failure, followcore.Failure): a leadership that cannot take
// its partition up or can never publish what it accepted, a followed
// partition whose local log keeps failing. The broker sees them in Health
// (a bounded list, with a count) and asks for one with PartitionError.

// MaxFailingListed bounds the partitions Health lists: a broker whose
// disk fails may have every partition failing, and a Health is read
// often. Health.FailingPartitions counts them all.
const MaxFailingListed = 16

// PartitionError says why one partition's replication has stopped on this
// broker: while leading (its epoch markers, or the republish its
// followers need, cannot be published: the local log's Epochs,
// EndOffset or Read keep failing, say; or some data it accepted can never
// be published, and WaitDurable fails with the same error), or while
// following (the local log's Append, Truncate, EndOffset or Epochs keep
// failing, and the partition rests between attempts). It lasts until the
// failing step succeeds, or the role ends. Err names the failing
// dependency: errors.As finds a *DependencyError in it where there is one.
type PartitionError struct {
	Partition metadata.TopicPartition
	// Role is the side that stopped: Leading or Following.
	Role Role
	// Since is when it began failing, by the engine's clock.
	Since time.Time
	// Err is the latest failure.
	Err error

	// stuck: the Node lists the partition for a local-log call given up
	// on that has not returned (Node.Health), in place of what its
	// engine says.
	stuck bool
}

// Error names the partition, the role and the failure.
func (e *PartitionError) Error() string {
	return fmt.Sprintf("walstore: %s %s has not replicated since %s: %v", e.Role, e.Partition, e.Since.Format(time.RFC3339Nano), e.Err)
}

// Unwrap returns the failure.
func (e *PartitionError) Unwrap() error { return e.Err }

// Healthy reports whether nothing is wrong: the engine is not degraded and
// no partition is failing.
func (h Health) Healthy() bool { return !h.Degraded && h.FailingPartitions == 0 }

// sameHealth reports whether a and b say the same: degraded or not, and
// the same partitions failing, for the same kind of reason (a stuck
// local-log call, or what its engine says). A report of a changed error
// alone is no news for OnHealth.
func sameHealth(a, b Health) bool {
	return a.Degraded == b.Degraded && a.FailingPartitions == b.FailingPartitions &&
		slices.EqualFunc(a.Partitions, b.Partitions, func(x, y *PartitionError) bool {
			return x.Partition == y.Partition && x.Role == y.Role && x.stuck == y.stuck
		})
}

// failing is one engine's failing partitions, as its core reported them.
type failing struct {
	role  Role
	parts map[metadata.TopicPartition]*PartitionError
}

func newFailing(role Role) failing {
	return failing{role: role, parts: make(map[metadata.TopicPartition]*PartitionError)}
}

// update records that tp is failing since then with err, or, with a nil
// err, that it no longer is; it reports whether the set of failing
// partitions changed.
func (s *failing) update(tp metadata.TopicPartition, since time.Time, err error) bool {
	_, was := s.parts[tp]
	if err == nil {
		delete(s.parts, tp)
		return was
	}
	s.parts[tp] = &PartitionError{Partition: tp, Role: s.role, Since: since, Err: err}
	return !was
}

// get returns a copy of tp's failure, or nil.
func (s *failing) get(tp metadata.TopicPartition) *PartitionError {
	if e := s.parts[tp]; e != nil {
		c := *e
		return &c
	}
	return nil
}

// list returns copies of up to MaxFailingListed failures, in partition
// order, and how many there are, leaving out the partitions in except
// (which the Node lists for a stuck call instead).
func (s *failing) list(except map[metadata.TopicPartition]bool) ([]*PartitionError, int) {
	all := make([]*PartitionError, 0, len(s.parts))
	for tp, e := range s.parts {
		if !except[tp] {
			all = append(all, e)
		}
	}
	if len(all) == 0 {
		return nil, 0
	}
	first := firstFailing(all)
	for i, e := range first {
		c := *e
		first[i] = &c
	}
	return first, len(all)
}

// firstFailing sorts es by partition and role and keeps the first
// MaxFailingListed.
func firstFailing(es []*PartitionError) []*PartitionError {
	slices.SortFunc(es, func(a, b *PartitionError) int {
		return cmp.Or(a.Partition.Compare(b.Partition), cmp.Compare(a.Role, b.Role))
	})
	return slices.Clip(es[:min(len(es), MaxFailingListed)])
}
