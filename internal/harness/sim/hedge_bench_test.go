package sim_test

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/internal/hedge"
	"github.com/activetier/activetier/internal/leadcore"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// The hedging benchmarks drive the engines' cores in simulated time, with
// every store request's latency drawn from memstore's s3express profile
// (log-normal) and nothing else taking time, with hedging on (walstore's
// defaults) and off over the same arrivals: the two compare like with
// like on any machine, since the CPU plays no part. The seed is fixed (1),
// so a run replays exactly.

// hedgeOn is walstore's default HedgeConfig as the cores take it.
var hedgeOn = hedge.Policy{Quantile: 0.95, Min: 5 * time.Millisecond, Max: 500 * time.Millisecond, Budget: 0.05, Burst: 3}

var t0 = time.Unix(1_700_000_000, 0)

// BenchmarkHedgedFetchLag measures the follower's share of the lag: from
// an object's entries reaching the follower to their append, every GET
// from another AZ. One 4 MiB object of 10 partitions' sections every
// 100 ms, 3,000 of them.
func BenchmarkHedgedFetchLag(b *testing.B) {
	prof := s3express(b)
	for _, tc := range []struct {
		name   string
		policy hedge.Policy
	}{{"hedge", hedgeOn}, {"nohedge", hedge.Policy{}}} {
		b.Run(tc.name, func(b *testing.B) {
			var r simRun
			for range b.N {
				r = runFetches(b, prof, tc.policy, 1)
			}
			r.report(b, "lag", "extra-get-%")
		})
	}
}

// BenchmarkHedgedUploadLatency measures the leader's uploads: the time
// from cutting an object to storing it. Ten partitions, an object cut
// every 100 ms for 300 simulated seconds, each PUT's latency drawn as for
// a 4 MiB object (the objects themselves are small: the CPU plays no part
// here, and encoding gigabytes would only slow the run).
func BenchmarkHedgedUploadLatency(b *testing.B) {
	prof := s3express(b)
	for _, tc := range []struct {
		name   string
		policy hedge.Policy
	}{{"hedge", hedgeOn}, {"nohedge", hedge.Policy{}}} {
		b.Run(tc.name, func(b *testing.B) {
			var r simRun
			for range b.N {
				r = runUploads(b, prof, tc.policy, 1)
			}
			r.report(b, "upload", "extra-put-%")
		})
	}
}

func s3express(b *testing.B) memstore.Profile {
	prof, err := memstore.ParseProfile("s3express")
	if err != nil {
		b.Fatal(err)
	}
	return prof
}

// simRun is what a simulated run measured: latencies in ms, requests
// made and hedges sent.
type simRun struct {
	lats             []float64
	requests, hedges uint64
}

func (r *simRun) quantile(q float64) float64 {
	s := slices.Clone(r.lats)
	slices.Sort(s)
	return s[max(int(math.Ceil(q*float64(len(s))))-1, 0)]
}

func (r *simRun) report(b *testing.B, what, extra string) {
	b.ReportMetric(r.quantile(0.5), what+"-p50-ms")
	b.ReportMetric(r.quantile(0.99), what+"-p99-ms")
	b.ReportMetric(r.quantile(0.999), what+"-p999-ms")
	b.ReportMetric(100*float64(r.hedges)/float64(max(r.requests, 1)), extra)
}

// sample draws one latency of l for a request moving size bytes, from
// another AZ if crossAZ, as memstore does.
func sample(rng *rand.Rand, prof memstore.Profile, l memstore.Latency, size int64, crossAZ bool) time.Duration {
	median := float64(l.Median) + float64(l.PerMiB)*float64(size)/(1<<20)
	d := time.Duration(median * math.Exp(l.Sigma*rng.NormFloat64()))
	if crossAZ {
		d += prof.CrossAZMin + time.Duration(rng.Int64N(int64(prof.CrossAZMax-prof.CrossAZMin)+1))
	}
	return d
}

// simClock is a queue of events in simulated time.
type simClock struct {
	q   simQueue
	seq int
}

func (s *simClock) at(t time.Time, do func(time.Time)) {
	s.seq++
	heap.Push(&s.q, simEvent{at: t, seq: s.seq, do: do})
}

// run plays the events in time order until none is left or the next
// comes after end (a leader's core always has a timer set).
func (s *simClock) run(end time.Time) {
	for s.q.Len() > 0 && !s.q[0].at.After(end) {
		e := heap.Pop(&s.q).(simEvent)
		e.do(e.at)
	}
}

type simEvent struct {
	at  time.Time
	seq int
	do  func(now time.Time)
}

type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if c := q[i].at.Compare(q[j].at); c != 0 {
		return c < 0
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func benchTP(p int) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: "t", Partition: int32(p)}
}

func runFetches(b *testing.B, prof memstore.Profile, policy hedge.Policy, seed uint64) simRun {
	const (
		partitions  = 10
		objects     = 3000
		objectBytes = 4 << 20
		interval    = 100 * time.Millisecond
	)
	rng := rand.New(rand.NewPCG(seed, 0x1a9))
	c, err := followcore.New(followcore.Config{BrokerID: 1, Readahead: 16, MaxHeld: 100_000, FetchConcurrency: 8,
		HedgeAfter: time.Second, BackoffInitial: 10 * time.Millisecond, BackoffMax: time.Second,
		CoalesceGap: 50_000, Hedge: policy, ReportInterval: time.Second, Seed: seed})
	if err != nil {
		b.Fatal(err)
	}
	var clock simClock
	var run simRun
	cancelled := map[uint64]bool{}
	var wake time.Time
	var drive func(now time.Time)
	drive = func(now time.Time) {
		for {
			rd := c.Ready()
			for _, l := range rd.Loads {
				c.Loaded(now, l.ID, followcore.LocalState{}, nil)
			}
			for _, a := range rd.Appends {
				c.Appended(now, a.ID, a.Batches[len(a.Batches)-1].LastOffset+1, nil)
			}
			for _, ap := range rd.Applied {
				run.lats = append(run.lats, float64(now.UnixMilli()-ap.MaxTimestamp))
			}
			for _, id := range rd.Cancels {
				cancelled[id] = true
			}
			for _, f := range rd.Fetches {
				var size int64
				results := make([]followcore.Result, len(f.Entries))
				for i, e := range f.Entries {
					size += e.Length
					results[i] = followcore.Result{Entry: e, Batches: []storage.Batch{{Epoch: 1, FirstOffset: e.FirstOffset, LastOffset: e.LastOffset, MaxTimestamp: e.MaxTimestamp, Data: []byte{1}}}}
				}
				clock.at(now.Add(sample(rng, prof, prof.Get, size, true)), func(now time.Time) {
					if !cancelled[f.ID] {
						c.Fetched(now, f.ID, results)
						drive(now)
					}
				})
			}
			if !rd.WakeAt.IsZero() && !rd.WakeAt.Equal(wake) {
				wake = rd.WakeAt
				clock.at(wake, func(now time.Time) { c.Tick(now); drive(now) })
			}
			if len(rd.Loads)+len(rd.Appends) == 0 {
				return
			}
		}
	}
	var markers []metadata.EpochStart
	for p := range partitions {
		if err := c.Follow(t0, benchTP(p), 1, 2); err != nil {
			b.Fatal(err)
		}
		markers = append(markers, metadata.EpochStart{Partition: benchTP(p), Epoch: 1, StartOffset: 0, LeaderBrokerID: 2})
	}
	drive(t0)
	for i := range objects {
		clock.at(t0.Add(time.Duration(i+1)*interval), func(now time.Time) {
			ref := metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: fmt.Sprintf("o%d", i)}
			m := metadata.Message{WriterBrokerID: 2, Object: ref}
			if i == 0 {
				m.Markers = markers
			}
			const section = objectBytes / partitions
			for p := range partitions {
				m.Entries = append(m.Entries, metadata.Entry{Partition: benchTP(p), RecordEpoch: 1, PublisherEpoch: 1,
					FirstOffset: int64(i), LastOffset: int64(i), MaxTimestamp: now.UnixMilli(), Object: ref,
					Position: int64(p) * section, Length: section, UncompressedSize: section, WriterBrokerID: 2})
			}
			rec, err := metadata.AppendMessage(nil, &m)
			if err != nil {
				b.Fatal(err)
			}
			c.Records(now, []metadata.Record{{Value: rec}})
			drive(now)
		})
	}
	clock.run(t0.Add(objects*interval + time.Minute))
	if want := partitions * objects; len(run.lats) != want {
		b.Fatalf("%d appends, want %d", len(run.lats), want)
	}
	run.requests, run.hedges = c.Fetches, c.Hedges
	return run
}

func runUploads(b *testing.B, prof memstore.Profile, policy hedge.Policy, seed uint64) simRun {
	const (
		partitions = 10
		batchBytes = 4 << 10
		every      = 10 * time.Millisecond
		batches    = 30_000
		putBytes   = 4 << 20
	)
	rng := rand.New(rand.NewPCG(seed, 0x7075))
	c, err := leadcore.New(leadcore.Config{BrokerID: 1, MetadataPartitions: 1, Interval: 100 * time.Millisecond,
		ObjectBytes: 4 << 20, MaxPartitions: 1000, BufferBytes: 256 << 20, MaxInflight: 4, DegradedAfter: 5 * time.Second,
		MarkerRefresh: time.Hour, GCInterval: time.Hour, BackoffInitial: 10 * time.Millisecond, BackoffMax: time.Second,
		Hedge: policy, Seed: seed})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var clock simClock
	var run simRun
	cancelled := map[uint64]bool{}
	var wake time.Time
	offset := int64(0)
	var drive func(now time.Time)
	put := func(now time.Time, u leadcore.Upload, answer func(time.Time, uint64, metadata.ObjectRef)) {
		ref := metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: fmt.Sprintf("k%d", clock.seq)}
		clock.at(now.Add(sample(rng, prof, prof.Put, putBytes, false)), func(now time.Time) {
			if !cancelled[u.ID] {
				answer(now, u.ID, ref)
				drive(now)
			}
		})
	}
	drive = func(now time.Time) {
		for c.HasReady() {
			rd := c.Ready()
			c.Advance()
			for _, d := range rd.UploadLatency {
				run.lats = append(run.lats, float64(d)/1e6)
			}
			for _, id := range rd.Cancels {
				cancelled[id] = true
			}
			for _, e := range rd.Encodes {
				objs, err := e.Builder.Cut(nil)
				c.Encoded(now, e.ID, objs, err)
			}
			for _, u := range rd.Uploads {
				put(now, u, func(now time.Time, id uint64, ref metadata.ObjectRef) { c.Uploaded(now, id, ref, nil, leadcore.Other) })
			}
			for _, h := range rd.Hedges {
				put(now, h, func(now time.Time, id uint64, ref metadata.ObjectRef) { c.HedgeUploaded(now, id, ref, nil) })
			}
			for _, p := range rd.Publishes {
				offset++
				c.Published(now, p.ID, offset, nil, leadcore.Other)
			}
			for _, r := range rd.Reads {
				c.Read(now, r.ID, r.What, leadcore.LocalResult{Epochs: []storage.EpochEntry{{Epoch: 1, StartOffset: 0}}})
			}
			if !rd.WakeAt.IsZero() && !rd.WakeAt.Equal(wake) {
				wake = rd.WakeAt
				clock.at(wake, func(now time.Time) { c.Tick(now); drive(now) })
			}
		}
	}
	c.Start(t0)
	for p := range partitions {
		if err := c.BecomeLeader(t0, benchTP(p), 1, []int32{2}, -1, 0, digest.Chain{}); err != nil {
			b.Fatal(err)
		}
	}
	drive(t0)
	data := make([]byte, batchBytes)
	for i := range batches {
		clock.at(t0.Add(time.Duration(i+1)*every), func(now time.Time) {
			off := int64(i / partitions)
			if err := c.Append(now, benchTP(i%partitions), storage.Batch{Epoch: 1, FirstOffset: off, LastOffset: off, MaxTimestamp: now.UnixMilli(), Data: data}); err != nil {
				b.Fatal(err)
			}
			drive(now)
		})
	}
	clock.run(t0.Add(batches*every + time.Minute))
	st := c.Stats()
	if st.Objects == 0 || st.BufferedBytes != 0 {
		b.Fatalf("%d objects stored, %d bytes still buffered", st.Objects, st.BufferedBytes)
	}
	run.requests, run.hedges = st.Objects, st.UploadHedges
	return run
}
