package followcore

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/hedge"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// FuzzCore drives the core with arbitrary sequences of events: role
// changes, metadata (entries and markers of any epoch, from any broker),
// fetch outcomes, local-log answers (honest or failing), and time. The
// local log is a model that refuses what a real one refuses. Whatever the
// sequence, the core never has two local-log requests outstanding for one
// partition, never hands out an id twice, never appends a byte that is not
// the partition's own section at those offsets and epoch, holds at most
// MaxHeld entries, and replays identically.
func FuzzCore(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 3, 0, 0, 9, 1, 4, 0, 5, 0, 6, 0})
	f.Add([]byte{0, 1, 2, 2, 3, 1, 0, 4, 2, 0, 3, 0, 5, 1, 6, 0, 7, 40, 0, 2, 3, 1, 4, 5, 6})
	f.Add(bytes.Repeat([]byte{3, 0, 0, 9, 1, 5, 0, 6, 0, 4, 0}, 8))
	f.Fuzz(func(t *testing.T, in []byte) {
		first := play(t, in)
		second := play(t, in)
		require.Equal(t, first, second, "the same events must give the same Readies")
	})
}

// fuzzLog is an honest local log of one partition.
type fuzzLog struct {
	batches []storage.Batch
	start   int64 // the end offset of an empty log
	epochs  []storage.EpochEntry
}

func (l *fuzzLog) end() int64 {
	if len(l.batches) == 0 {
		return l.start
	}
	return l.batches[len(l.batches)-1].LastOffset + 1
}

func (l *fuzzLog) append(bs []storage.Batch) error {
	for _, b := range bs {
		latest := int32(-1)
		if n := len(l.epochs); n > 0 {
			latest = l.epochs[n-1].Epoch
		}
		if b.FirstOffset != l.end() || b.LastOffset < b.FirstOffset || b.Epoch < latest {
			return fmt.Errorf("not contiguous: batch %d-%d@%d at end %d, epoch %d", b.FirstOffset, b.LastOffset, b.Epoch, l.end(), latest)
		}
	}
	for _, b := range bs {
		if n := len(l.epochs); n == 0 || b.Epoch > l.epochs[n-1].Epoch {
			l.epochs = append(l.epochs, storage.EpochEntry{Epoch: b.Epoch, StartOffset: b.FirstOffset})
		}
		l.batches = append(l.batches, b)
	}
	return nil
}

func (l *fuzzLog) truncate(to int64) {
	if len(l.batches) == 0 {
		l.start = to
		l.epochs = nil
		return
	}
	i := slices.IndexFunc(l.batches, func(b storage.Batch) bool { return b.FirstOffset >= to })
	if i >= 0 {
		l.batches = l.batches[:i]
	}
	if len(l.batches) == 0 {
		l.start = min(l.start, to)
	}
	l.epochs = slices.DeleteFunc(l.epochs, func(e storage.EpochEntry) bool { return e.StartOffset >= to })
}

// play runs one sequence and returns every Ready rendered. Its checks are
// plain comparisons: the fuzzer runs it twice per input, and testify's
// reflection would cost more than the core.
func play(t *testing.T, in []byte) string {
	cfg := testConfig()
	cfg.MaxHeld = 6
	cfg.Hedge = hedge.Policy{Quantile: 0.9, Min: 20 * time.Millisecond, Max: 300 * time.Millisecond, Budget: 0.2, Burst: 2}
	c, err := New(cfg)
	require.NoError(t, err)
	logs := map[metadata.TopicPartition]*fuzzLog{}
	var loads []Load
	var truncs []Truncate
	var appends []Append
	var fetches []Fetch
	seen := map[uint64]bool{}
	outstanding := map[metadata.TopicPartition]int{} // local-log requests
	done := func(id uint64, tp metadata.TopicPartition) { outstanding[tp]-- }
	var out strings.Builder
	now := t0
	next := func() byte {
		if len(in) == 0 {
			return 0
		}
		b := in[0]
		in = in[1:]
		return b
	}
	logOf := func(tp metadata.TopicPartition) *fuzzLog {
		if logs[tp] == nil {
			logs[tp] = &fuzzLog{}
		}
		return logs[tp]
	}
	take := func(id uint64, tp metadata.TopicPartition) {
		if seen[id] {
			t.Fatalf("id %d handed out twice", id)
		}
		seen[id] = true
		outstanding[tp]++
		if outstanding[tp] > 1 {
			t.Fatalf("two local-log requests outstanding for %s", tp)
		}
	}
	for steps := 0; len(in) > 0 && steps < 200; steps++ {
		now = now.Add(time.Duration(next()%64) * 10 * time.Millisecond)
		switch op := next() % 8; op {
		case 0: // a role change
			p, epoch, leader := int32(next()%3), int32(next()%5), int32(next()%4)
			if leader == 1 {
				leader = 2
			}
			_ = c.Follow(now, tp(p), epoch, leader)
		case 1:
			// The driver performs no request of a partition it unfollowed
			// after it did: those not performed yet are dropped.
			p := tp(int32(next() % 3))
			c.Unfollow(now, p)
			outstanding[p] = 0
			mine := func(q metadata.TopicPartition) bool { return q == p }
			loads = slices.DeleteFunc(loads, func(l Load) bool { return mine(l.Partition) })
			truncs = slices.DeleteFunc(truncs, func(tr Truncate) bool { return mine(tr.Partition) })
			appends = slices.DeleteFunc(appends, func(a Append) bool { return mine(a.Partition) })
		case 2: // a message of markers
			p := int32(next() % 3)
			var mks []metadata.EpochStart
			for n := next() % 3; n > 0; n-- {
				mks = append(mks, metadata.EpochStart{Partition: tp(p), Epoch: int32(next() % 5), StartOffset: int64(next() % 40), LeaderBrokerID: int32(next() % 4)})
			}
			if m := (metadata.Message{WriterBrokerID: 2, Markers: mks}); m.Validate() == nil {
				b, _ := metadata.AppendMessage(nil, &m)
				c.Records(now, []metadata.Record{{Value: b}})
			}
		case 3: // a message of one entry
			p, first, n, epoch := int32(next()%3), int64(next()%40), int64(next()%8), int32(next()%5)
			e := ent(p, first, first+n, epoch, string(rune('a'+next()%2)), fmt.Sprintf("k%d", next()%4), int64(next()%4)*10)
			e.PublisherEpoch = epoch + int32(next()%2)
			e.WriterBrokerID = int32(next() % 4)
			if m := (metadata.Message{WriterBrokerID: e.WriterBrokerID, Object: e.Object, Entries: []metadata.Entry{e}}); m.Validate() == nil {
				b, _ := metadata.AppendMessage(nil, &m)
				c.Records(now, []metadata.Record{{Value: b}})
			}
		case 4: // a fetch round answers
			if len(fetches) == 0 {
				break
			}
			i := int(next()) % len(fetches)
			fe := fetches[i]
			fetches = slices.Delete(fetches, i, i+1)
			rs := make([]Result, len(fe.Entries))
			for j, e := range fe.Entries {
				rs[j] = Result{Entry: e, Outcome: Outcome(next() % 7)}
				if rs[j].Outcome == Fetched || rs[j].Outcome > Failed {
					rs[j] = ok(e)
				}
			}
			c.Fetched(now, fe.ID, rs)
		case 5: // the oldest local-log request answers
			fail := next()%8 == 0
			switch {
			case len(loads) > 0:
				l := loads[0]
				loads = loads[1:]
				done(l.ID, l.Partition)
				lg := logOf(l.Partition)
				if fail {
					c.Loaded(now, l.ID, LocalState{}, fmt.Errorf("injected"))
				} else {
					c.Loaded(now, l.ID, LocalState{EndOffset: lg.end(), Epochs: slices.Clone(lg.epochs)}, nil)
				}
			case len(truncs) > 0:
				tr := truncs[0]
				truncs = truncs[1:]
				done(tr.ID, tr.Partition)
				lg := logOf(tr.Partition)
				to := tr.To
				if tr.AtBatch {
					for _, b := range lg.batches {
						if b.FirstOffset < to && to <= b.LastOffset {
							to = b.FirstOffset
						}
					}
				}
				if fail {
					c.Truncated(now, tr.ID, 0, 0, fmt.Errorf("injected"))
				} else {
					lg.truncate(to)
					c.Truncated(now, tr.ID, to, lg.end(), nil)
				}
			case len(appends) > 0:
				a := appends[0]
				appends = appends[1:]
				done(a.ID, a.Partition)
				for _, b := range a.Batches {
					if want := string(batchesOf(metadata.Entry{Partition: a.Partition, FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, RecordEpoch: b.Epoch})[0].Data); string(b.Data) != want {
						t.Fatalf("a batch appended to %s is not its own section: %q, want %q", a.Partition, b.Data, want)
					}
				}
				lg := logOf(a.Partition)
				if err := lg.append(a.Batches); err != nil || fail {
					c.Appended(now, a.ID, 0, fmt.Errorf("injected or refused: %v", err))
				} else {
					c.Appended(now, a.ID, lg.end(), nil)
				}
			}
		default:
			c.Tick(now)
		}
		rd := c.Ready()
		text := DescribeReady(rd, t0)
		out.WriteString(text)
		if !c.HasReady() && !rd.Empty() {
			t.Fatalf("HasReady is false for a Ready asking for:\n%s", text)
		}
		c.Advance()
		if after := c.Ready(); c.HasReady() || !after.Empty() {
			t.Fatalf("a Ready after Advance asks for more than:\n%s", text)
		}
		if c.Held > cfg.MaxHeld {
			t.Fatalf("%d entries held, more than MaxHeld %d", c.Held, cfg.MaxHeld)
		}
		for _, l := range rd.Loads {
			take(l.ID, l.Partition)
		}
		for _, tr := range rd.Truncates {
			take(tr.ID, tr.Partition)
		}
		for _, a := range rd.Appends {
			take(a.ID, a.Partition)
		}
		for _, fe := range rd.Fetches {
			if seen[fe.ID] {
				t.Fatalf("id %d handed out twice", fe.ID)
			}
			seen[fe.ID] = true
			if fe.HedgeOf != 0 {
				i := slices.IndexFunc(fetches, func(f Fetch) bool { return f.ID == fe.HedgeOf })
				if i < 0 || fetches[i].HedgeOf != 0 || len(fetches[i].Entries) != len(fe.Entries) || &fetches[i].Entries[0] != &fe.Entries[0] {
					t.Fatalf("fetch %d hedges %d, which is not an outstanding fetch of the same entries", fe.ID, fe.HedgeOf)
				}
			}
		}
		// A cancelled fetch stays in the list: a driver may still answer
		// it late, and the core must ignore that.
		for _, id := range rd.Cancels {
			if !slices.ContainsFunc(fetches, func(f Fetch) bool { return f.ID == id }) {
				t.Fatalf("fetch %d cancelled, but it is not outstanding", id)
			}
		}
		loads, truncs, appends, fetches = append(loads, rd.Loads...), append(truncs, rd.Truncates...), append(appends, rd.Appends...), append(fetches, rd.Fetches...)
		for _, pr := range rd.Progress {
			if end := logOf(pr.Partition).end(); pr.EndOffset != end {
				t.Fatalf("progress reported for %s: end %d, the log ends at %d", pr.Partition, pr.EndOffset, end)
			}
		}
	}
	return out.String()
}
