package followcore

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/scripttest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// The interaction tests are the scripts in testdata/*.txt, played by
// TestScripts through scriptEnv.handle: the style of etcd-io/raft's
// interaction tests. Times are offsets from t0 in milliseconds; ids are
// the core's, in the order it hands them out, as the output above them
// shows.

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
func batchesOf(e metadata.Entry) []storage.Batch {
	return []storage.Batch{{Epoch: e.RecordEpoch, FirstOffset: e.FirstOffset, LastOffset: e.LastOffset, MaxTimestamp: e.MaxTimestamp,
		Data: []byte(fmt.Sprintf("%s/%d-%d@%d", e.Partition, e.FirstOffset, e.LastOffset, e.RecordEpoch))}}
}

// ok is a fetch result carrying e's section.
func ok(e metadata.Entry) Result { return Result{Entry: e, Outcome: Fetched, Batches: batchesOf(e)} }

// hold counts its releases: the memory a fetched section is lent.
type hold struct{ n int }

func (h *hold) Release() { h.n++ }

// TestScripts plays every script in testdata. Run with -rewrite to write
// the output the core gives now below each command.
func TestScripts(t *testing.T) {
	scripttest.Run(t, func() func(*testing.T, *datadriven.TestData) string {
		return (&scriptEnv{entries: map[string]metadata.Entry{}}).handle
	})
}

// scriptEnv is what a script acts on: a core, the entries the script
// named, and the buffers fetched sections were lent.
type scriptEnv struct {
	c       *Core
	cfg     Config
	entries map[string]metadata.Entry
	holds   map[string]*hold
}

// handle runs one command and returns its output: for an event, the Ready
// the core hands out afterwards, as DescribeReady renders it, taken as a
// driver takes it (take).
//
//	new [max-held=N] [hedge]                  a core of testConfig
//	entry name=X p= first= last= epoch= bucket= key= pos= [writer=]
//	follow at= p= epoch= leader=
//	unfollow at= p=
//	loaded at= id= end= [epochs=(E@S, ...)]
//	load-failed at= id=
//	records at=                               one message a line:
//	    entries=(X, ...) markers=(P:E@S, ...)   or: garbage
//	fetched at= id=                           one result a line:
//	    <outcome> X [batches-of=Y] [hold=H]
//	appended at= id= end=
//	append-failed at= id=
//	truncated at= id= to= end=
//	tick at=
//	stats                                     the core's counters
//	releases                                  each buffer's releases
//	latency bucket=B                          samples learned
func (e *scriptEnv) handle(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd == "new" {
		e.cfg = testConfig()
		d.MaybeScanArgs(t, "max-held", &e.cfg.MaxHeld)
		if d.HasArg("hedge") {
			hedgeConfig(&e.cfg)
		}
		c, err := New(e.cfg)
		require.NoError(t, err)
		e.c, e.holds = c, map[string]*hold{}
		return ""
	}
	if d.Cmd == "entry" {
		var name, bucket, key string
		var p, epoch int
		var first, last, pos int64
		d.ScanArgs(t, "name", &name)
		d.ScanArgs(t, "p", &p)
		d.ScanArgs(t, "first", &first)
		d.ScanArgs(t, "last", &last)
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "bucket", &bucket)
		d.ScanArgs(t, "key", &key)
		d.ScanArgs(t, "pos", &pos)
		en := ent(int32(p), first, last, int32(epoch), bucket, key, pos)
		var writer int
		if d.MaybeScanArgs(t, "writer", &writer) {
			en.WriterBrokerID = int32(writer)
		}
		e.entries[name] = en
		return ""
	}
	require.NotNil(t, e.c, "%s: no core: begin with new", d.Pos)
	c := e.c
	switch d.Cmd {
	case "stats":
		return fmt.Sprintf("applied %d messages %d held %d not-found %d forged %d dropped %d truncations %d\n"+
			"local-errors %d evicted %d poisoned %d fetches %d fetch-errors %d hedges %d hedge-wins %d hedges-denied %d\n",
			c.Applied, c.Messages, c.Held, c.NotFound, c.Forged, c.Dropped, c.Truncations,
			c.LocalErrors, c.Evicted, c.Poisoned, c.Fetches, c.FetchErrors, c.Hedges, c.HedgeWins, c.HedgesDenied)
	case "releases":
		var b strings.Builder
		for _, name := range slices.Sorted(maps.Keys(e.holds)) {
			fmt.Fprintf(&b, "%s released %d\n", name, e.holds[name].n)
		}
		return b.String()
	case "latency":
		var bucket string
		d.ScanArgs(t, "bucket", &bucket)
		n := 0
		if est := c.latency[bucket]; est != nil {
			n = est.Samples()
		}
		return fmt.Sprintf("%d samples\n", n)
	}
	var ms, id int
	d.ScanArgs(t, "at", &ms)
	now := at(ms)
	if d.HasArg("id") {
		d.ScanArgs(t, "id", &id)
	}
	switch d.Cmd {
	case "follow":
		var p, epoch, leader int
		d.ScanArgs(t, "p", &p)
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "leader", &leader)
		if err := c.Follow(now, tp(int32(p)), int32(epoch), int32(leader)); err != nil {
			return "error: " + err.Error() + "\n"
		}
	case "unfollow":
		var p int
		d.ScanArgs(t, "p", &p)
		c.Unfollow(now, tp(int32(p)))
	case "loaded":
		var end int64
		d.ScanArgs(t, "end", &end)
		var epochs []storage.EpochEntry
		if arg, ok := d.Arg("epochs"); ok {
			for _, v := range arg.Vals {
				var ee storage.EpochEntry
				_, err := fmt.Sscanf(v, "%d@%d", &ee.Epoch, &ee.StartOffset)
				require.NoError(t, err, "%s: epoch %q is not E@S", d.Pos, v)
				epochs = append(epochs, ee)
			}
		}
		c.Loaded(now, uint64(id), LocalState{EndOffset: end, Epochs: epochs}, nil)
	case "load-failed":
		c.Loaded(now, uint64(id), LocalState{}, fmt.Errorf("disk gone"))
	case "records":
		var recs []metadata.Record
		for _, line := range inputLines(d) {
			recs = append(recs, e.record(t, d, line))
		}
		c.Records(now, recs)
	case "fetched":
		var rs []Result
		for _, line := range inputLines(d) {
			rs = append(rs, e.result(t, d, line))
		}
		c.Fetched(now, uint64(id), rs)
	case "appended":
		var end int64
		d.ScanArgs(t, "end", &end)
		c.Appended(now, uint64(id), end, nil)
	case "append-failed":
		c.Appended(now, uint64(id), 0, fmt.Errorf("disk full"))
	case "truncated":
		var to, end int64
		d.ScanArgs(t, "to", &to)
		d.ScanArgs(t, "end", &end)
		c.Truncated(now, uint64(id), to, end, nil)
	case "tick":
		c.Tick(now)
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return DescribeReady(take(t, c), t0)
}

// take takes c's Ready as a driver does, Ready and then Advance, and
// checks the handshake on the way: Ready changes nothing (a second call
// renders the same), HasReady says whether it holds anything new, and
// after Advance nothing is left but the WakeAt acknowledged.
func take(t testing.TB, c *Core) Ready {
	t.Helper()
	rd := c.Ready()
	text := DescribeReady(rd, t0)
	require.Equal(t, text, DescribeReady(c.Ready(), t0), "a second Ready differs from the first")
	require.Equal(t, !rd.Empty() || !rd.WakeAt.Equal(c.lastWake), c.HasReady(), "HasReady for:\n%s", text)
	c.Advance()
	require.False(t, c.HasReady(), "HasReady after Advance")
	after := c.Ready()
	require.True(t, after.Empty(), "a Ready after Advance asks for more:\n%s", DescribeReady(after, t0))
	require.Equal(t, rd.WakeAt, after.WakeAt)
	require.Equal(t, text, DescribeReady(rd, t0), "Advance changed the Ready it acknowledged")
	return rd
}

func inputLines(d *datadriven.TestData) []string {
	var lines []string
	for _, l := range strings.Split(d.Input, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// entry is the entry the script named name.
func (e *scriptEnv) entry(t *testing.T, d *datadriven.TestData, name string) metadata.Entry {
	en, ok := e.entries[name]
	if !ok {
		d.Fatalf(t, "no entry named %q", name)
	}
	return en
}

// record is the metadata record a line of records describes.
func (e *scriptEnv) record(t *testing.T, d *datadriven.TestData, line string) metadata.Record {
	if line == "garbage" {
		return metadata.Record{Value: []byte{0xff, 0, 1}}
	}
	args := parseArgs(t, d, "message "+line)
	var es []metadata.Entry
	var ms []metadata.EpochStart
	for _, arg := range args {
		switch arg.Key {
		case "entries":
			for _, v := range arg.Vals {
				es = append(es, e.entry(t, d, v))
			}
		case "markers":
			for _, v := range arg.Vals {
				var p, epoch int32
				var start int64
				_, err := fmt.Sscanf(v, "%d:%d@%d", &p, &epoch, &start)
				require.NoError(t, err, "%s: marker %q is not P:E@S", d.Pos, v)
				ms = append(ms, mark(p, epoch, start))
			}
		default:
			d.Fatalf(t, "unknown message argument %q", arg.Key)
		}
	}
	return rec(t, es, ms...)
}

// outcomes names each Outcome in scripts.
var outcomes = map[string]Outcome{
	"ok": Fetched, "gone": Gone, "corrupt": Corrupt, "refused": Refused, "unavailable": Unavailable, "failed": Failed,
}

// result is the fetch result a line of fetched describes.
func (e *scriptEnv) result(t *testing.T, d *datadriven.TestData, line string) Result {
	fields := strings.Fields(line)
	require.GreaterOrEqual(t, len(fields), 2, "%s: a result is <outcome> <entry>", d.Pos)
	o, known := outcomes[fields[0]]
	if !known {
		d.Fatalf(t, "unknown outcome %q", fields[0])
	}
	en := e.entry(t, d, fields[1])
	r := Result{Entry: en, Outcome: o}
	if o == Fetched {
		r.Batches = batchesOf(en)
	} else {
		r.Err = fmt.Errorf("injected %d", o)
	}
	for _, arg := range parseArgs(t, d, "result "+strings.Join(fields[2:], " ")) {
		switch arg.Key {
		case "batches-of":
			r.Batches = batchesOf(e.entry(t, d, arg.SingleVal(t)))
		case "hold":
			name := arg.SingleVal(t)
			if e.holds[name] == nil {
				e.holds[name] = &hold{}
			}
			r.Buffer = e.holds[name]
		default:
			d.Fatalf(t, "unknown result argument %q", arg.Key)
		}
	}
	return r
}

func parseArgs(t *testing.T, d *datadriven.TestData, line string) []datadriven.CmdArg {
	_, args, err := datadriven.ParseLine(line)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return args
}
