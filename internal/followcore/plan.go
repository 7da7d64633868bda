package followcore

import (
	"cmp"
	"slices"
	"strings"

	"github.com/activetier/activetier/metadata"
)

// Read is one ranged GET: bytes [Start, End) of Object, serving the
// entries at Idx.
type Read struct {
	Object     metadata.ObjectRef
	Start, End int64
	Idx        []int
}

// PlanReads groups the entries at idx, whose ranges must be valid, by
// object, and merges ranges that touch or lie at most gap bytes apart
// (a negative gap merges only those that touch): one GET then serves
// several sections. Each entry is read by exactly one Read; the Reads
// come in object and position order. The core makes each of its fetches
// one Read, so that a slow GET can be hedged alone; the driver plans the
// same way and so makes one GET per fetch.
func PlanReads(entries []metadata.Entry, idx []int, gap int64) []Read {
	order := slices.Clone(idx)
	slices.SortFunc(order, func(a, b int) int {
		ea, eb := &entries[a], &entries[b]
		return cmp.Or(strings.Compare(ea.Object.Bucket, eb.Object.Bucket), strings.Compare(ea.Object.Key, eb.Object.Key),
			cmp.Compare(ea.Position, eb.Position), cmp.Compare(ea.Length, eb.Length))
	})
	gap = max(gap, 0)
	var reads []Read
	for _, i := range order {
		e := &entries[i]
		end := e.Position + e.Length
		if n := len(reads); n > 0 {
			last := &reads[n-1]
			if last.Object == e.Object && e.Position-last.End <= gap {
				last.End = max(last.End, end)
				last.Idx = append(last.Idx, i)
				continue
			}
		}
		reads = append(reads, Read{Object: e.Object, Start: e.Position, End: end, Idx: []int{i}})
	}
	return reads
}
