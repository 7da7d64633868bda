package readcore

import (
	"fmt"
	"strings"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Ready is what the Core asks of its driver and has to tell it, gathered
// from the events (Round, Plan, Fetched) since the last Advance: taken
// with Core.Ready, acknowledged with Core.Advance. Its slices are the
// driver's once taken: the Core never touches them again.
type Ready struct {
	// Round is the number of the metadata round Round began, 0 if none
	// began: the driver hands Learn and MetadataRead what it reads in it.
	Round uint64
	// Rewinds are the metadata partitions to read again before reading
	// on, and from where.
	Rewinds []Rewind
	// Watermarks are the metadata partitions whose high watermark to take
	// in the round Round began, before reading them, and hand over with
	// MetadataRead.
	Watermarks []int32
	// Fetches are the sections to fetch, as Plan decided: answer each
	// with Fetched.
	Fetches []Want
	// Pauses are the partitions Plan found paused since it last did, each
	// reported once.
	Pauses []Pause
	// Yields are the batches the fetches answered let the driver yield,
	// in order.
	Yields []Yield
	// GivenUp are the sections whose fetch failed and that the Core will
	// not fetch again, for the driver's log.
	GivenUp []GivenUp
	// Mismatches are the digests of what was yielded that differed from
	// the ones leaders published (package digest): what the reader
	// yielded in each one's range differs from the leader's log.
	Mismatches []digest.Mismatch
	// Retry: a fetch failed and its section will be fetched again: the
	// driver backs off before it reads on.
	Retry bool
}

// Yield is a batch to yield to the driver's caller.
type Yield struct {
	Partition metadata.TopicPartition
	Batch     storage.Batch
}

// GivenUp is a section the Core gave up on, and the fetch error why.
type GivenUp struct {
	Entry metadata.Entry
	Err   error
}

// Ready returns what the events since the last Advance gathered. It
// changes nothing: two calls give the same Ready.
func (c *Core) Ready() Ready { return c.rd }

// HasReady reports whether Ready holds anything.
func (c *Core) HasReady() bool {
	rd := &c.rd
	return rd.Round != 0 || len(rd.Rewinds)+len(rd.Watermarks)+len(rd.Fetches)+len(rd.Pauses)+len(rd.Yields)+len(rd.GivenUp)+len(rd.Mismatches) > 0 || rd.Retry
}

// Advance acknowledges the Ready last returned: the next holds only what
// the events after it bring. The driver takes no event between Ready and
// Advance: what such an event added would be acknowledged unseen.
func (c *Core) Advance() { c.rd = Ready{} }

// DescribeReady renders rd as text, one line per item in a fixed order:
// the round begun, its rewinds and the high watermarks it wants (or
// none), the sections to fetch (partition, object key and offsets, the
// partition's next offset and the limit below which its batches may be
// yielded), the partitions paused (where, why, and where they may
// resume), the batches to yield, the sections given up, the digest
// mismatches, and whether to retry. It is what the package's scripts under testdata expect, and what
// a driver may log to see what its core decided: the same Ready gives the
// same text.
func DescribeReady(rd Ready) string {
	var b strings.Builder
	if rd.Round != 0 {
		fmt.Fprintf(&b, "round %d\n", rd.Round)
	}
	for _, rw := range rd.Rewinds {
		fmt.Fprintf(&b, "rewind %d from %d\n", rw.Partition, rw.From)
	}
	switch {
	case len(rd.Watermarks) > 0:
		fmt.Fprintf(&b, "watermarks %v\n", rd.Watermarks)
	case rd.Round != 0:
		b.WriteString("watermarks none\n")
	}
	for _, w := range rd.Fetches {
		e := w.Entry
		fmt.Fprintf(&b, "fetch %s %s %d-%d e%d/p%d from %d limit %d\n", e.Partition, e.Object.Key, e.FirstOffset, e.LastOffset,
			e.RecordEpoch, e.PublisherEpoch, w.From, w.Limit)
	}
	for _, p := range rd.Pauses {
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
	for _, y := range rd.Yields {
		fmt.Fprintf(&b, "yield %s %d:%d-%d\n", y.Partition, y.Batch.Epoch, y.Batch.FirstOffset, y.Batch.LastOffset)
	}
	for _, g := range rd.GivenUp {
		e := g.Entry
		fmt.Fprintf(&b, "given up %s %s %d-%d", e.Partition, e.Object.Key, e.FirstOffset, e.LastOffset)
		if g.Err != nil {
			fmt.Fprintf(&b, ": %v", g.Err)
		}
		b.WriteByte('\n')
	}
	for _, m := range rd.Mismatches {
		fmt.Fprintf(&b, "mismatch %s %s %d-%d epoch %d\n", m.Partition, m.What, m.From, m.To, m.Epoch)
	}
	if rd.Retry {
		b.WriteString("retry\n")
	}
	return b.String()
}
