package combiner

import (
	"time"

	"github.com/activetier/activetier/metadata"
)

// PendingStats summarises what a Builder holds that has not been cut yet.
type PendingStats struct {
	// Bytes is the total batch data pending.
	Bytes int
	// Batches, Partitions and Sections count what is pending; a partition
	// has one section per record epoch.
	Batches    int
	Partitions int
	Sections   int
	// Oldest is when the oldest pending batch was added.
	Oldest time.Time
}

// Group is the pending partitions that share one follower set. The Builder
// hands groups to CutPolicy.Layout sorted by follower set (element by
// element, a shorter set before its extensions), with Partitions sorted
// by topic name, topic ID and partition number; laying groups out in that
// order puts sets that share their lowest followers next to each other.
type Group struct {
	// Followers are the brokers that follow every partition of the group,
	// sorted and distinct. They must not be modified.
	Followers []int32
	// Partitions are the group's pending partitions.
	Partitions []metadata.TopicPartition
	// Bytes is the group's pending batch data.
	Bytes int
}

// CutPolicy decides when a Builder's pending data is cut, beyond the hard
// limits of BuilderConfig, and how the groups of a cut are laid out in
// objects. It sees only summaries, never data, and must be deterministic
// for a given input so that cuts are reproducible. The byte format does
// not depend on it: any layout gives objects any reader can read.
type CutPolicy interface {
	// Due reports whether the pending data should be cut now, although no
	// BuilderConfig limit has been reached. It is called only with
	// something pending.
	Due(pending PendingStats, now time.Time) bool
	// Layout assigns the groups of a cut to objects: each inner slice is
	// one object, its groups' sections written in the order given. Every
	// pending partition must appear exactly once; a policy may move
	// partitions between groups, but the followers the Builder reports
	// for a section are always its partition's own. The Builder then
	// splits any object beyond MaxPartitions or TargetBytes, keeping the
	// order.
	Layout(groups []Group) [][]Group
}

// Defaults of DefaultPolicy and BuilderConfig.SmallFlushBytes.
const (
	// DefaultSmallFlushBytes is where S3 Express One Zone's price of one
	// PUT ($0.00113 per 1000) equals its upload price for the bytes
	// ($0.0032 per GB): about 353 KB. Below it a flush's cost is mostly
	// requests, above it mostly transfer, which is the boundary between
	// the small and large flushes of docs/design.md, "Worked cost examples
	// from the KIP-1176 discussion".
	DefaultSmallFlushBytes = 353_125
	// DefaultMaxSmallFlushObjects caps how many objects a small flush is
	// split into, and so how many PUTs beyond one it may cost.
	DefaultMaxSmallFlushObjects = 4
)

// DefaultPolicy is the layout proposed in the KIP-1176 discussion (small
// flushes split by follower set, large flushes in one object; see
// docs/design.md, "Worked cost examples from the KIP-1176 discussion"), with
// the request cost of splitting bounded.
//
// A flush of at least SmallFlushBytes goes into one object (the Builder
// splits it at TargetBytes and MaxPartitions), sections ordered by
// follower set, so each follower reads its partitions with one range GET
// when its sets are adjacent. Transfer dominates the cost here, and one
// PUT per object is the least the writer can pay.
//
// A smaller flush is split into one object per follower set, so each
// object has as few readers as possible: each reader fetches one whole
// object, an object can be deleted as soon as its own followers have
// applied it (a slow or failed broker pins only its own partitions'
// objects), and a damaged or lost object concerns fewer brokers. This
// costs one PUT per extra object, which is why there are at most
// MaxSmallFlushObjects of them: with more follower sets than that,
// neighbouring sets (in Group order, so sharing their lowest followers)
// are merged, balancing bytes. Note that with follower-affinity metadata
// routing, splitting no longer reduces the metadata fan-out the discussion
// wanted to reduce; MaxSmallFlushObjects = 1 turns splitting off.
//
// DefaultPolicy adds no early cuts: Due is always false, so cuts happen at
// the Builder's Interval, TargetBytes and MaxPartitions.
type DefaultPolicy struct {
	// SmallFlushBytes is the flush size below which a flush is split by
	// follower set; zero means DefaultSmallFlushBytes.
	SmallFlushBytes int
	// MaxSmallFlushObjects caps the objects of a small flush; zero means
	// DefaultMaxSmallFlushObjects.
	MaxSmallFlushObjects int
}

// Due returns false: the Builder's limits are the only cut triggers.
func (DefaultPolicy) Due(PendingStats, time.Time) bool { return false }

// Layout implements CutPolicy as documented on DefaultPolicy.
func (p DefaultPolicy) Layout(groups []Group) [][]Group {
	small := p.SmallFlushBytes
	if small <= 0 {
		small = DefaultSmallFlushBytes
	}
	k := p.MaxSmallFlushObjects
	if k <= 0 {
		k = DefaultMaxSmallFlushObjects
	}
	total := 0
	for _, g := range groups {
		total += g.Bytes
	}
	if total >= small || len(groups) <= 1 || k == 1 {
		return [][]Group{groups}
	}
	if len(groups) <= k {
		objects := make([][]Group, len(groups))
		for i := range groups {
			objects[i] = groups[i : i+1 : i+1]
		}
		return objects
	}
	// Assign each group to the object its middle byte falls in when the
	// flush is cut into k equal byte ranges: contiguous, in order, and
	// balanced as far as group sizes allow.
	objects := make([][]Group, 0, k)
	cum, cur := 0, -1
	for i, g := range groups {
		obj := int((int64(cum) + int64(g.Bytes)/2) * int64(k) / int64(max(total, 1)))
		if obj != cur || len(objects) == 0 {
			objects = append(objects, nil)
			cur = obj
		}
		objects[len(objects)-1] = append(objects[len(objects)-1], groups[i])
		cum += g.Bytes
	}
	return objects
}
