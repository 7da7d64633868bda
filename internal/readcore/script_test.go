package readcore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/internal/harness/scripttest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// TestScripts plays every script in testdata: the interaction tests, in
// the style of etcd-io/raft's. Run with -rewrite to write the output the
// core gives now below each command.
func TestScripts(t *testing.T) {
	scripttest.Run(t, func() func(*testing.T, *datadriven.TestData) string { return (&scriptEnv{}).handle })
}

// scriptEnv is what a script acts on: a core reading partition orders-0,
// and the sections its last plan wants.
type scriptEnv struct {
	c     *Core
	wants []Want
}

// scriptErrs names the fetch failures scripts inject.
var scriptErrs = map[string]error{
	"not-found":     storage.ErrNotFound,
	"get-not-found": fmt.Errorf("get: %w", storage.ErrNotFound),
	"corrupt":       fmt.Errorf("section: %w", combiner.ErrCorrupt),
	"unavailable":   fmt.Errorf("get: %w", storage.ErrUnavailable),
}

// handle runs one command and returns its output.
//
//	new start= [metadata=(MP, ...)] [unavailable-for=D] [violation]
//	                          a core reading orders-0 from start
//	round                     begins a round: its number, the rewinds
//	                          asked for, and the high watermarks wanted
//	learn mp= rec=            one message; one part a line:
//	    marker epoch= start= | entry epoch= publisher= first= last= key=
//	    commit epoch= offset= | other (an entry of another partition)
//	read mp= from= next= [high=] [at-end]   MetadataRead
//	plan                      Plan, and whether a partition waits for
//	                          a proof
//	fetched [want=I] [at=D] [err=E] [batches=(E:F-L, ...)]
//	                          the answer to fetch I of the last plan:
//	                          what it yields, gives up, and whether to
//	                          retry
//	position                  orders-0's next and committed offsets
//
// Errors are not-found, get-not-found, corrupt and unavailable; times are
// offsets from the start. The output of round, plan and fetched is the
// Ready the core hands out afterwards, as DescribeReady renders it, taken
// as a driver takes it (take).
func (e *scriptEnv) handle(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd == "new" {
		var start int64
		d.ScanArgs(t, "start", &start)
		cfg := Config{Partitions: map[metadata.TopicPartition]int64{tp: start}, MaxBytes: 1 << 20}
		if arg, ok := d.Arg("metadata"); ok {
			for i := range arg.Vals {
				var mp int32
				arg.Scan(t, i, &mp)
				cfg.MetadataPartitions = append(cfg.MetadataPartitions, mp)
			}
		}
		if arg, ok := d.Arg("unavailable-for"); ok {
			cfg.UnavailableFor = duration(t, d, arg.SingleVal(t))
		}
		if d.HasArg("violation") {
			cfg.Violation = func(call, detail string) error { return &violationError{call, detail} }
		}
		c, err := New(cfg)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		e.c, e.wants = c, nil
		return ""
	}
	require.NotNil(t, e.c, "%s: no core: begin with new", d.Pos)
	c := e.c
	switch d.Cmd {
	case "round":
		c.Round()
		return DescribeReady(take(t, c))
	case "learn":
		var mp int32
		var rec int64
		d.ScanArgs(t, "mp", &mp)
		d.ScanArgs(t, "rec", &rec)
		c.Learn(mp, rec, message(t, d))
	case "read":
		r := MetadataRead{HasHigh: d.HasArg("high"), AtEnd: d.HasArg("at-end")}
		d.ScanArgs(t, "mp", &r.Partition)
		d.ScanArgs(t, "from", &r.From)
		d.ScanArgs(t, "next", &r.Next)
		d.MaybeScanArgs(t, "high", &r.High)
		if err := c.MetadataRead(r); err != nil {
			var v *violationError
			if errors.As(err, &v) {
				return fmt.Sprintf("violation of %s\n", v.call)
			}
			return fmt.Sprintf("error: %v\n", err)
		}
	case "plan":
		c.Plan()
		rd := take(t, c)
		e.wants = rd.Fetches
		out := DescribeReady(rd)
		if c.waiting {
			out += "waiting for a proof\n"
		}
		return out
	case "fetched":
		i := 0
		d.MaybeScanArgs(t, "want", &i)
		require.Less(t, i, len(e.wants), "%s: the last plan wants %d sections", d.Pos, len(e.wants))
		w := e.wants[i]
		now := time.Time{}
		if arg, ok := d.Arg("at"); ok {
			now = t0.Add(duration(t, d, arg.SingleVal(t)))
		}
		r := followcore.Result{Entry: w.Entry}
		if arg, ok := d.Arg("err"); ok {
			err, known := scriptErrs[arg.SingleVal(t)]
			if !known {
				d.Fatalf(t, "unknown error %q", arg.SingleVal(t))
			}
			r.Err, r.Outcome = err, followcore.OutcomeOf(err)
		}
		if arg, ok := d.Arg("batches"); ok {
			for _, v := range arg.Vals {
				var b storage.Batch
				_, err := fmt.Sscanf(v, "%d:%d-%d", &b.Epoch, &b.FirstOffset, &b.LastOffset)
				require.NoError(t, err, "%s: batch %q is not E:F-L", d.Pos, v)
				b.Data = []byte{byte(b.FirstOffset)}
				r.Batches = append(r.Batches, b)
			}
		}
		c.Fetched(now, w, r)
		return DescribeReady(take(t, c))
	case "position":
		next, committed, ok := c.Position(tp)
		return fmt.Sprintf("next %d committed %d ok=%v\n", next, committed, ok)
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return ""
}

// take takes c's Ready as a driver does, Ready and then Advance, and
// checks the handshake on the way: Ready changes nothing, HasReady says
// whether it holds anything, and nothing is left after Advance.
func take(t *testing.T, c *Core) Ready {
	t.Helper()
	rd := c.Ready()
	text := DescribeReady(rd)
	require.Equal(t, text, DescribeReady(c.Ready()), "a second Ready differs from the first")
	require.Equal(t, text != "", c.HasReady(), "HasReady for:\n%s", text)
	c.Advance()
	require.False(t, c.HasReady(), "HasReady after Advance")
	require.Equal(t, text, DescribeReady(rd), "Advance changed the Ready it acknowledged")
	return rd
}

// t0 is the scripts' start.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// message is the metadata message the input of learn describes.
func message(t *testing.T, d *datadriven.TestData) *metadata.Message {
	m := &metadata.Message{}
	for _, line := range strings.Split(d.Input, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		kind, args, err := datadriven.ParseLine(line)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		part := &datadriven.TestData{Pos: d.Pos, Cmd: kind, CmdArgs: args}
		switch kind {
		case "marker":
			var epoch int32
			var start int64
			part.ScanArgs(t, "epoch", &epoch)
			part.ScanArgs(t, "start", &start)
			m.Markers = append(m.Markers, marker(epoch, start))
		case "entry":
			var epoch, publisher int32
			var first, last int64
			var key string
			part.ScanArgs(t, "epoch", &epoch)
			part.ScanArgs(t, "publisher", &publisher)
			part.ScanArgs(t, "first", &first)
			part.ScanArgs(t, "last", &last)
			part.ScanArgs(t, "key", &key)
			m.Entries = append(m.Entries, entry(epoch, publisher, first, last, key))
		case "commit":
			cm := metadata.Commit{Partition: tp}
			part.ScanArgs(t, "epoch", &cm.Epoch)
			part.ScanArgs(t, "offset", &cm.Offset)
			m.Commits = append(m.Commits, cm)
		case "other":
			m.Entries = append(m.Entries, other.Entries...)
		default:
			d.Fatalf(t, "unknown part %q of a message", kind)
		}
	}
	return m
}

func duration(t *testing.T, d *datadriven.TestData, s string) time.Duration {
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return dur
}
