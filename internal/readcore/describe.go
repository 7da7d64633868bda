package readcore

import (
	"fmt"
	"strings"
)

// DescribePlan renders what Plan returned as text, one line per section
// to fetch (its partition, object key and offsets, the partition's next
// offset and the limit below which its batches may be yielded) and per
// partition paused (where, why, and where it may resume), in Plan's
// order. It is what the package's scripts under testdata expect, and what
// a driver may log to see what its core decided: the same plan gives the
// same text.
func DescribePlan(wants []Want, pauses []Pause) string {
	var b strings.Builder
	for _, w := range wants {
		e := w.Entry
		fmt.Fprintf(&b, "fetch %s %s %d-%d e%d/p%d from %d limit %d\n", e.Partition, e.Object.Key, e.FirstOffset, e.LastOffset,
			e.RecordEpoch, e.PublisherEpoch, w.From, w.Limit)
	}
	for _, p := range pauses {
		if p.Truncated {
			fmt.Fprintf(&b, "truncated %s at %d", p.Partition, p.Offset)
		} else {
			fmt.Fprintf(&b, "gone %s at %d resume %d", p.Partition, p.Offset, p.ResumeHint)
		}
		if p.Cause != nil {
			fmt.Fprintf(&b, ": %v", p.Cause)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
