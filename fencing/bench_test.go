package fencing

import (
	"testing"

	"github.com/activetier/activetier/metadata"
)

// benchLineages is a partition after a few leader changes: the local log
// holds epochs 3–6 and the leader lineage knows them from three
// publications.
func benchLineages(b *testing.B) (*Lineage, *LeaderLineage) {
	local := mustLineage(b, ee(3, 0), ee(4, 1_000), ee(5, 2_000), ee(6, 3_000))
	leader := mustLeader(b,
		pub(mk(3, 0), mk(4, 1_000)),
		pub(mk(4, 1_500), mk(5, 2_000)),
		pub(mk(5, 2_500), mk(6, 3_000)),
	)
	return local, leader
}

// BenchmarkBaselineEpochFor is the baseline: one lookup in a four-entry
// lineage, the smallest unit of work Decide is made of.
func BenchmarkBaselineEpochFor(b *testing.B) {
	local, _ := benchLineages(b)
	b.ReportAllocs()
	var sink int32
	for i := 0; b.Loop(); i++ {
		e, _ := local.EpochFor(int64(2_500 + i%1_000))
		sink += e
	}
	_ = sink
}

// BenchmarkDecideApply is the common case: the next entry of the latest
// epoch.
func BenchmarkDecideApply(b *testing.B) {
	local, leader := benchLineages(b)
	e := entry(6, 6, 4_000, 4_099)
	b.ReportAllocs()
	for b.Loop() {
		if d := Decide(4_000, local, leader, e); d.Action != Apply {
			b.Fatal(d)
		}
	}
}

// BenchmarkDecideFenced is a zombie's entry after the fence.
func BenchmarkDecideFenced(b *testing.B) {
	local, leader := benchLineages(b)
	e := entry(5, 5, 4_000, 4_099)
	b.ReportAllocs()
	for b.Loop() {
		if d := Decide(4_000, local, leader, e); d.Action != Drop {
			b.Fatal(d)
		}
	}
}

// BenchmarkDivergence is the check a follower runs after every publication.
func BenchmarkDivergence(b *testing.B) {
	local, leader := benchLineages(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Divergence(4_000, local, leader); ok {
			b.Fatal("diverged")
		}
	}
}

// BenchmarkLeaderLineageMerge merges a new leader's publication into a
// view that already has it: the cost of reading a duplicate.
func BenchmarkLeaderLineageMerge(b *testing.B) {
	_, leader := benchLineages(b)
	p := []metadata.EpochStart{mk(5, 2_500), mk(6, 3_000)}
	b.ReportAllocs()
	for b.Loop() {
		if err := leader.Merge(p...); err != nil {
			b.Fatal(err)
		}
	}
}
