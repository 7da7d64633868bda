package fencing

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// follower is the smallest follower that uses only Decide and Divergence: a
// log modelled as the epoch of each offset (a record is identified by its
// epoch and offset, Kafka's invariant), its local lineage, and its view of
// the leader lineage. The scenario scripts and the property tests drive it.
type follower struct {
	t      testing.TB
	start  int64   // log start offset
	log    []int32 // log[i] is the epoch of offset start+i
	local  Lineage
	leader LeaderLineage
}

func newFollower(t testing.TB, start int64) *follower {
	return &follower{t: t, start: start}
}

func (f *follower) leo() int64 { return f.start + int64(len(f.log)) }

// append adds records of epoch at the log end, as a local write would, and
// keeps the local lineage in step (Kafka assigns on every append).
func (f *follower) append(epoch int32, n int) {
	f.t.Helper()
	require.NoError(f.t, f.local.Assign(epoch, f.leo()))
	for range n {
		f.log = append(f.log, epoch)
	}
}

// merge learns one publication and truncates at once if the local log now
// diverges, as a follower does after reading markers.
func (f *follower) merge(markers ...metadata.EpochStart) {
	f.t.Helper()
	require.NoError(f.t, f.leader.Merge(markers...))
	if to, ok := Divergence(f.leo(), &f.local, &f.leader); ok {
		f.truncate(to)
	}
}

// offer decides e and carries the decision out, with the fetch succeeding.
func (f *follower) offer(e metadata.Entry) Decision {
	f.t.Helper()
	d := Decide(f.leo(), &f.local, &f.leader, e)
	f.carryOut(e, d)
	return d
}

func (f *follower) carryOut(e metadata.Entry, d Decision) {
	f.t.Helper()
	switch d.Action {
	case Apply:
		f.checkApply(e, d)
		f.append(e.RecordEpoch, int(d.Limit-d.From))
	case Truncate:
		require.Less(f.t, d.TruncateTo, f.leo(), "truncate must shorten the log")
		f.truncate(d.TruncateTo)
	}
}

// checkApply checks the promises of an Apply decision.
func (f *follower) checkApply(e metadata.Entry, d Decision) {
	f.t.Helper()
	require.Equal(f.t, f.leo(), d.From, "apply starts at the log end: %v for %+v", d, e)
	require.GreaterOrEqual(f.t, d.From, e.FirstOffset, "apply within the entry")
	require.Less(f.t, d.From, d.Limit, "apply something")
	require.LessOrEqual(f.t, d.Limit, e.LastOffset+1, "apply within the entry")
	for _, o := range []int64{d.From, d.Limit - 1} {
		epoch, _, ok := f.leader.At(o)
		require.True(f.t, ok && epoch == e.RecordEpoch, "apply at %d where the leader lineage has epoch %d: %v for %+v", o, epoch, d, e)
	}
	if end, ok := f.leader.Lineage().endAfterOffset(d.From); ok {
		require.LessOrEqual(f.t, d.Limit, end, "apply stops at the end of the epoch")
	}
}

func (f *follower) truncate(to int64) {
	f.t.Helper()
	require.GreaterOrEqual(f.t, to, f.start, "truncate below the log start")
	f.log = f.log[:to-f.start]
	f.local.TruncateFromEnd(to)
}

// epochs returns a copy of the log: the epoch of each offset from the start.
func (f *follower) epochs() []int32 { return append([]int32(nil), f.log...) }

// endAfterOffset returns the start of the epoch after the one covering
// offset, if there is one.
func (l *Lineage) endAfterOffset(offset int64) (int64, bool) {
	i := l.indexFor(offset)
	if i < 0 {
		return 0, false
	}
	return l.endAfter(i)
}

// entry is a metadata entry with only the fields fencing reads.
func entry(recordEpoch, publisherEpoch int32, first, last int64) metadata.Entry {
	return metadata.Entry{
		Partition:      testTP,
		RecordEpoch:    recordEpoch,
		PublisherEpoch: publisherEpoch,
		FirstOffset:    first,
		LastOffset:     last,
	}
}

// run returns n copies of epoch, a run of records in an expected log.
func run(epoch int32, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = epoch
	}
	return out
}
