package followcore

import (
	"fmt"
	"testing"
	"time"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// BenchmarkCoreStep measures one round of replication for 10 partitions
// (a message announcing one entry each, its fetch answered, the appends
// answered) on a core following n partitions in all. Its cost should not
// grow with n: a step visits the partitions that have work.
func BenchmarkCoreStep(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			cfg := testConfig()
			cfg.MaxHeld = 1 << 20
			c, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			now := t0
			answer := func(rd Ready) {
				for _, l := range rd.Loads {
					c.Loaded(now, l.ID, LocalState{}, nil)
				}
				for _, a := range rd.Appends {
					c.Appended(now, a.ID, a.Batches[len(a.Batches)-1].LastOffset+1, nil)
				}
			}
			markers := make([]metadata.EpochStart, 0, n)
			for p := range n {
				if err := c.Follow(now, tp(int32(p)), 1, 2); err != nil {
					b.Fatal(err)
				}
				markers = append(markers, mark(int32(p), 1, 0))
			}
			answer(taken(c))
			c.Records(now, []metadata.Record{rec(b, nil, markers...)})
			taken(c)
			next := make([]int64, n)
			const k = 10
			msgs := make([][]metadata.Record, 0, 64)
			b.ResetTimer()
			for i := range b.N {
				if i%64 == 0 {
					// Encoding is the leader's cost; build the next 64
					// messages outside the timer.
					b.StopTimer()
					msgs = msgs[:0]
					for j := range 64 {
						es := make([]metadata.Entry, 0, k)
						for q := range k {
							p := ((i+j)*k + q) % n
							es = append(es, ent(int32(p), next[p], next[p]+9, 1, "a", fmt.Sprintf("o%d", i+j), int64(q)*10))
							next[p] += 10
						}
						msgs = append(msgs, []metadata.Record{rec(b, es)})
					}
					b.StartTimer()
				}
				now = now.Add(time.Millisecond)
				c.Records(now, msgs[i%64])
				rd := taken(c)
				for _, f := range rd.Fetches {
					rs := make([]Result, len(f.Entries))
					for j, e := range f.Entries {
						rs[j] = ok(e)
					}
					c.Fetched(now, f.ID, rs)
				}
				answer(taken(c))
				taken(c)
			}
		})
	}
}

// BenchmarkIdleReports measures what reminding leaders of partitions at
// rest costs a follower: each iteration is one ReportInterval, in which
// every one of n followed partitions, whose log does not change, reports
// its progress again.
func BenchmarkIdleReports(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			c, err := New(testConfig())
			if err != nil {
				b.Fatal(err)
			}
			now := t0
			for p := range n {
				if err := c.Follow(now, tp(int32(p)), 1, 2); err != nil {
					b.Fatal(err)
				}
			}
			for _, l := range taken(c).Loads {
				c.Loaded(now, l.ID, LocalState{EndOffset: 10, Epochs: []storage.EpochEntry{{Epoch: 1, StartOffset: 0}}}, nil)
			}
			taken(c)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				now = now.Add(testConfig().ReportInterval)
				c.Tick(now)
				if got := len(taken(c).Progress); got != n {
					b.Fatalf("%d reports, want %d", got, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/report")
		})
	}
}

// taken takes c's Ready as a driver does, without take's checks: their
// cost is not the core's.
func taken(c *Core) Ready {
	rd := c.Ready()
	c.Advance()
	return rd
}
