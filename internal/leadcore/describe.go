package leadcore

import (
	"fmt"
	"strings"
	"time"

	"github.com/activetier/activetier/metadata"
)

// DescribeReady renders rd as text, one line per request or notice, in a
// fixed order (encodes, uploads, publishes with their decoded messages,
// local-log reads, deletes, hedges, retries, cancels, tasks done, the
// changes of durable offsets, buffer space, commits, failures and health,
// and the wake time), with times as offsets from now. It is what the
// package's scripts under testdata expect, and what a driver may log to see
// what its core asked for: the same Ready gives the same text. It leaves
// out the latency samples, which are for metrics, and the health itself,
// which Core.Health tells.
func DescribeReady(rd Ready, now time.Time) string {
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	for _, e := range rd.Encodes {
		line("encode %d", e.ID)
	}
	for _, u := range rd.Uploads {
		line("%s %d", u.What, u.ID)
	}
	for _, p := range rd.Publishes {
		line("publish %d: %s", p.ID, describeData(p.Data))
	}
	for _, r := range rd.Reads {
		line("read %d %s %s from %d", r.ID, readName(r.What), r.Partition, r.From)
	}
	for _, d := range rd.Deletes {
		if d.Call != 0 {
			line("delete %d %d objects for call %d", d.ID, len(d.Refs), d.Call)
		} else {
			line("delete %d %d objects", d.ID, len(d.Refs))
		}
	}
	for _, h := range rd.Hedges {
		line("hedge %s %d", h.What, h.ID)
	}
	for _, r := range rd.Retries {
		line("retry %d at %s", r.ID, relTime(r.At, now))
	}
	for _, id := range rd.Cancels {
		line("cancel %d", id)
	}
	for _, d := range rd.Done {
		line("done %d: %v", d.ID, d.Err)
	}
	for _, d := range rd.Calls {
		line("call %d done: %d deleted, err %v", d.Call, d.Deleted, d.Err)
	}
	if rd.DurableChanged {
		line("durable changed")
	}
	if rd.SpaceFreed {
		line("space freed")
	}
	if rd.CommitChanged {
		line("commit changed")
	}
	for _, f := range rd.Failures {
		if f.Err == nil {
			line("recovers %s", f.Partition)
		} else {
			line("failing %s since %s: %v", f.Partition, relTime(f.Since, now), f.Err)
		}
	}
	if rd.HealthChanged {
		line("health changed")
	}
	if !rd.WakeAt.IsZero() {
		line("wake at %s", relTime(rd.WakeAt, now))
	}
	return b.String()
}

// relTime is t as a signed offset from now: +5s, -100ms.
func relTime(t, now time.Time) string {
	d := t.Sub(now)
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

// readName names what a LocalRead asks for.
func readName(w ReadWhat) string {
	switch w {
	case ReadLineage:
		return "lineage"
	case ReadEnd:
		return "end"
	case ReadBatches:
		return "batches"
	}
	return fmt.Sprintf("ReadWhat(%d)", int(w))
}

// describeData describes a metadata message: its markers, entries and
// commits, in that order.
func describeData(data []byte) string {
	m, err := metadata.DecodeMessage(data)
	if err != nil {
		return fmt.Sprintf("undecodable: %v", err)
	}
	var parts []string
	for _, mk := range m.Markers {
		parts = append(parts, fmt.Sprintf("marker %s e%d@%d", mk.Partition, mk.Epoch, mk.StartOffset))
	}
	for _, e := range m.Entries {
		parts = append(parts, fmt.Sprintf("entry %s %d-%d e%d/p%d", e.Partition, e.FirstOffset, e.LastOffset, e.RecordEpoch, e.PublisherEpoch))
	}
	for _, cm := range m.Commits {
		parts = append(parts, fmt.Sprintf("commit %s e%d@%d", cm.Partition, cm.Epoch, cm.Offset))
	}
	return strings.Join(parts, ", ")
}
