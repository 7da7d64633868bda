package followcore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

func TestPlanReads(t *testing.T) {
	a := metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: "a"}
	b := metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: "b"}
	other := metadata.ObjectRef{AZ: "az2", Bucket: "b2", Key: "a"}
	at := func(o metadata.ObjectRef, pos, n int64) metadata.Entry {
		return metadata.Entry{Object: o, Position: pos, Length: n}
	}
	// In input order: sections of three objects, interleaved; two of
	// them start at the same position.
	entries := []metadata.Entry{
		at(b, 100, 10), at(a, 0, 10), at(a, 20, 10), at(other, 0, 5),
		at(a, 10, 10), at(b, 0, 50), at(a, 45, 5), at(a, 20, 5),
	}
	for _, tc := range []struct {
		name string
		idx  []int
		gap  int64
		want []Read
	}{
		{"none", nil, 0, nil},
		{"one", []int{6}, 0, []Read{{a, 45, 50, []int{6}}}},
		{"adjacent and overlapping sections merge", []int{2, 1, 4, 7}, -1,
			[]Read{{a, 0, 30, []int{1, 4, 7, 2}}}},
		{"a hole wider than the gap splits", []int{0, 1, 2, 3, 4, 5, 6, 7}, 14, []Read{
			{a, 0, 30, []int{1, 4, 7, 2}}, {a, 45, 50, []int{6}},
			{b, 0, 50, []int{5}}, {b, 100, 110, []int{0}},
			{other, 0, 5, []int{3}},
		}},
		{"a hole within the gap is read through", []int{0, 1, 2, 3, 4, 5, 6, 7}, 50, []Read{
			{a, 0, 50, []int{1, 4, 7, 2, 6}},
			{b, 0, 110, []int{5, 0}},
			{other, 0, 5, []int{3}},
		}},
		{"a subset", []int{6, 1}, 15, []Read{{a, 0, 10, []int{1}}, {a, 45, 50, []int{6}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx := append([]int(nil), tc.idx...)
			got := PlanReads(entries, idx, tc.gap)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.idx, idx, "idx is not modified")
			// Idx slices may share an array; appending to one must not
			// reach the next.
			for i := range got {
				if i+1 < len(got) {
					next := append([]int(nil), got[i+1].Idx...)
					_ = append(got[i].Idx, -1)
					require.Equal(t, next, got[i+1].Idx)
				}
			}
		})
	}
}
