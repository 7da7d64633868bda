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
// come in object and position order; their Idx share one array, each
// ending at its capacity. The core makes each of its fetches
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
	// A Read's entries are a run of order.
	var reads []Read
	from := 0
	for k, i := range order {
		e := &entries[i]
		end := e.Position + e.Length
		if n := len(reads); n > 0 {
			last := &reads[n-1]
			if last.Object == e.Object && e.Position-last.End <= gap {
				last.End = max(last.End, end)
				continue
			}
			last.Idx = order[from:k:k]
		}
		from = k
		reads = append(reads, Read{Object: e.Object, Start: e.Position, End: end})
	}
	if n := len(reads); n > 0 {
		reads[n-1].Idx = order[from:len(order):len(order)]
	}
	return reads
}
