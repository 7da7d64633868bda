package followcore

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
)

// The tests drive a Core through tables of events and compare what each
// Ready hands out, rendered as text, with what the table expects: the
// style of etcd-io/raft's interaction tests. Times are offsets from t0 in
// milliseconds; ids are the core's, in the order it hands them out.

var t0 = time.Unix(1_700_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func tp(p int32) metadata.TopicPartition { return metadata.TopicPartition{Topic: "t", Partition: p} }

func testConfig() Config {
	return Config{BrokerID: 1, Readahead: 4, MaxHeld: 100, FetchConcurrency: 4,
		HedgeAfter: time.Second, BackoffInitial: 10 * time.Millisecond, BackoffMax: 2 * time.Second, ReportInterval: time.Minute, Seed: 1}
}

// ent is an entry of partition p for offsets [first, last] at record and
// publisher epoch, in object key of bucket, at byte position pos.
func ent(p int32, first, last int64, epoch int32, bucket, key string, pos int64) metadata.Entry {
	return metadata.Entry{Partition: tp(p), RecordEpoch: epoch, PublisherEpoch: epoch, FirstOffset: first, LastOffset: last,
		MaxTimestamp: t0.UnixMilli(), Object: metadata.ObjectRef{AZ: "az-" + bucket, Bucket: bucket, Key: key},
		Position: pos, Length: 10, UncompressedSize: 10, WriterBrokerID: 2}
}

// mark is epoch epoch of partition p starting at start, led by broker 2.
func mark(p int32, epoch int32, start int64) metadata.EpochStart {
	return metadata.EpochStart{Partition: tp(p), Epoch: epoch, StartOffset: start, LeaderBrokerID: 2}
}

// rec encodes a message of entries (all in one object) and markers.
func rec(t testing.TB, entries []metadata.Entry, markers ...metadata.EpochStart) metadata.Record {
	t.Helper()
	m := metadata.Message{WriterBrokerID: 2, Entries: entries, Markers: markers}
	if len(entries) > 0 {
		m.Object = entries[0].Object
	}
	b, err := metadata.AppendMessage(nil, &m)
	require.NoError(t, err)
	return metadata.Record{Value: b}
}

// batchesOf is the section an entry announces: one batch per entry.
func batchesOf(e metadata.Entry) []combiner.Batch {
	return []combiner.Batch{{Epoch: e.RecordEpoch, FirstOffset: e.FirstOffset, LastOffset: e.LastOffset, MaxTimestamp: e.MaxTimestamp,
		Data: []byte(fmt.Sprintf("%s/%d-%d@%d", e.Partition, e.FirstOffset, e.LastOffset, e.RecordEpoch))}}
}

// ok is a fetch result carrying e's section.
func ok(e metadata.Entry) Result { return Result{Entry: e, Outcome: Fetched, Batches: batchesOf(e)} }

// failed is a fetch result of outcome o for e.
func failed(e metadata.Entry, o Outcome) Result {
	return Result{Entry: e, Outcome: o, Err: fmt.Errorf("injected %d", o)}
}

// event is one step of a table: something that happens to the core at a
// time, and the Ready it must hand out afterwards.
type event struct {
	ms   int
	do   func(t testing.TB, c *Core, now time.Time)
	want string
}

func follow(p, epoch, leader int32) func(testing.TB, *Core, time.Time) {
	return func(t testing.TB, c *Core, now time.Time) { require.NoError(t, c.Follow(now, tp(p), epoch, leader)) }
}

func unfollow(p int32) func(testing.TB, *Core, time.Time) {
	return func(t testing.TB, c *Core, now time.Time) { c.Unfollow(now, tp(p)) }
}

func loaded(id uint64, end int64, epochs ...fencing.EpochEntry) func(testing.TB, *Core, time.Time) {
	return func(t testing.TB, c *Core, now time.Time) {
		c.Loaded(now, id, LocalState{EndOffset: end, Epochs: epochs}, nil)
	}
}

func loadFailed(id uint64) func(testing.TB, *Core, time.Time) {
	return func(t testing.TB, c *Core, now time.Time) { c.Loaded(now, id, LocalState{}, fmt.Errorf("disk gone")) }
}

func records(rs ...func(testing.TB) metadata.Record) func(testing.TB, *Core, time.Time) {
	return func(t testing.TB, c *Core, now time.Time) {
		var recs []metadata.Record
		for _, r := range rs {
			recs = append(recs, r(t))
		}
		c.Records(now, recs)
	}
}

func msg(entries []metadata.Entry, markers ...metadata.EpochStart) func(testing.TB) metadata.Record {
	return func(t testing.TB) metadata.Record { return rec(t, entries, markers...) }
}

func garbage() func(testing.TB) metadata.Record {
	return func(testing.TB) metadata.Record { return metadata.Record{Value: []byte{0xff, 0, 1}} }
}

func fetched(id uint64, rs ...Result) func(testing.TB, *Core, time.Time) {
	return func(t testing.TB, c *Core, now time.Time) { c.Fetched(now, id, rs) }
}

func appended(id uint64, end int64) func(testing.TB, *Core, time.Time) {
	return func(t testing.TB, c *Core, now time.Time) { c.Appended(now, id, end, nil) }
}

func appendFailed(id uint64) func(testing.TB, *Core, time.Time) {
	return func(t testing.TB, c *Core, now time.Time) { c.Appended(now, id, 0, fmt.Errorf("disk full")) }
}

func truncated(id uint64, to, end int64) func(testing.TB, *Core, time.Time) {
	return func(t testing.TB, c *Core, now time.Time) { c.Truncated(now, id, to, end, nil) }
}

func tick() func(testing.TB, *Core, time.Time) {
	return func(t testing.TB, c *Core, now time.Time) { c.Tick(now) }
}

// run plays events on a new core with cfg and checks each Ready.
func run(t *testing.T, cfg Config, events []event) *Core {
	t.Helper()
	c, err := New(cfg)
	require.NoError(t, err)
	for i, ev := range events {
		ev.do(t, c, at(ev.ms))
		got := render(c.Ready())
		require.Equal(t, ev.want, got, "after event %d (at %d ms)", i, ev.ms)
	}
	return c
}

// render prints a Ready in one line per request, in a fixed order, with
// times as milliseconds from t0. It appends with strconv rather than fmt:
// the fuzz target renders every Ready twice per input.
func render(rd Ready) string {
	var b []byte
	num := func(n int64) { b = append(b, ' '); b = strconv.AppendInt(b, n, 10) }
	part := func(tp metadata.TopicPartition) {
		b = append(b, ' ')
		b = append(b, tp.Topic...)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(tp.Partition), 10)
	}
	word := func(w string) { b = append(b, w...) }
	for _, l := range rd.Loads {
		word("load")
		num(int64(l.ID))
		part(l.Partition)
		word("\n")
	}
	for _, tr := range rd.Truncates {
		word("truncate")
		num(int64(tr.ID))
		part(tr.Partition)
		word(" to")
		num(tr.To)
		if tr.AtBatch {
			word(" at batch")
		}
		word("\n")
	}
	for _, a := range rd.Appends {
		word("append")
		num(int64(a.ID))
		part(a.Partition)
		for _, bt := range a.Batches {
			num(bt.FirstOffset)
			word("-")
			b = strconv.AppendInt(b, bt.LastOffset, 10)
			word("@")
			b = strconv.AppendInt(b, int64(bt.Epoch), 10)
		}
		word("\n")
	}
	for _, f := range rd.Fetches {
		word("fetch")
		num(int64(f.ID))
		if f.HedgeOf != 0 {
			word(" hedging")
			num(int64(f.HedgeOf))
		}
		word(" " + f.Bucket)
		for _, e := range f.Entries {
			part(e.Partition)
			word(":")
			b = strconv.AppendInt(b, e.FirstOffset, 10)
			word("-")
			b = strconv.AppendInt(b, e.LastOffset, 10)
			word("@")
			b = strconv.AppendInt(b, int64(e.RecordEpoch), 10)
		}
		word("\n")
	}
	for _, id := range rd.Cancels {
		word("cancel")
		num(int64(id))
		word("\n")
	}
	for _, pr := range rd.Progress {
		word("progress")
		part(pr.Partition)
		word(" end")
		num(pr.EndOffset)
		word(" epoch")
		num(int64(pr.LastEpoch))
		word(" leader")
		num(int64(pr.Leader))
		word("\n")
	}
	for _, a := range rd.Applied {
		word("applied")
		part(a.Partition)
		num(int64(a.Bytes))
		word(" bytes\n")
	}
	for _, l := range rd.Lags {
		word("lag")
		part(l.Partition)
		num(l.Offsets)
		word("\n")
	}
	for _, f := range rd.Failures {
		if f.Err == nil {
			word("recovered")
			part(f.Partition)
			word("\n")
			continue
		}
		word("failing")
		part(f.Partition)
		word(" since")
		num(f.Since.Sub(t0).Milliseconds())
		word(": " + f.Err.Error() + "\n")
	}
	if rd.Rewind {
		word("rewind\n")
	}
	if !rd.WakeAt.IsZero() {
		word("wake")
		num(rd.WakeAt.Sub(t0).Milliseconds())
		word("\n")
	}
	return string(b)
}
