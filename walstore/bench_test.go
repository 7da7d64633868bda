package walstore_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/internal/cputime"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// benchCluster is a leader and two followers on one memstore cluster. The
// followers report their progress to the leader, as brokers relay it, so
// that the leader collects its objects and memstore reuses their memory:
// the steady state of a cluster that runs for long.
type benchCluster struct {
	cancel    context.CancelFunc
	done      chan struct{}
	objects   *memstore.Cluster
	leader    *walstore.Node
	followers []*walstore.Node
	logs      []*checkLog
}

func newBenchCluster(b *testing.B, profile string, partitions int, cfg walstore.NodeConfig, want func(metadata.TopicPartition, int64) []byte, fcfg ...walstore.NodeConfig) *benchCluster {
	p, err := memstore.ParseProfile(profile)
	if err != nil {
		b.Fatal(err)
	}
	objects, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "b1", "az2": "b2", "az3": "b3"}, Profile: p, Seed: 1,
	})
	if err != nil {
		b.Fatal(err)
	}
	meta, err := memstore.NewLog(4, memstore.WithMaxPollWait(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	bc := &benchCluster{cancel: cancel, done: make(chan struct{}), objects: objects}
	store, _ := objects.Store("az1")
	if cfg.GCInterval == 0 {
		cfg.GCInterval = 20 * time.Millisecond
	}
	leaderLog := memstore.NewLocalLog()
	cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local, cfg.Logger = 1, store, meta, leaderLog, discard()
	if bc.leader, err = walstore.NewNode(cfg); err != nil {
		b.Fatal(err)
	}
	running := 1
	go func() { bc.leader.Run(ctx); bc.done <- struct{}{} }()
	for id, az := range map[int32]string{2: "az2", 3: "az3"} {
		store, _ := objects.Store(az)
		log := newCheckLog(want)
		var fc walstore.NodeConfig
		if len(fcfg) > 0 {
			fc = fcfg[0]
		}
		fc.BrokerID, fc.Store, fc.Log, fc.Local, fc.Logger, fc.OnProgress = id, store, meta, log, discard(), bc.leader.RecordProgress
		f, err := walstore.NewNode(fc)
		if err != nil {
			b.Fatal(err)
		}
		for i := range partitions {
			if err := f.BecomeFollower(ctx, benchTP(i), 1, 1); err != nil {
				b.Fatal(err)
			}
		}
		bc.followers = append(bc.followers, f)
		bc.logs = append(bc.logs, log)
		running++
		go func() { f.Run(ctx); bc.done <- struct{}{} }()
	}
	for i := range partitions {
		// A leader's log holds its epoch from its end offset on, as
		// Kafka's makeLeader leaves it.
		if err := leaderLog.AssignEpoch(benchTP(i), 1, 0); err != nil {
			b.Fatal(err)
		}
		if err := bc.leader.BecomeLeader(ctx, benchTP(i), 1, []int32{2, 3}, -1); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		cancel()
		for range running {
			<-bc.done
		}
		meta.Close()
	})
	return bc
}

// checkLog is a follower's local log for benchmarks. It keeps each
// partition's end offset and epochs but not its records, as a broker keeps
// them on disk rather than on the heap, so that allocation measures the
// engines, not a copy of the log in memory. It checks every byte appended
// against what the leader was given (want) and remembers the first
// mismatch: buffers reused too early would show here.
type checkLog struct {
	want func(tp metadata.TopicPartition, first int64) []byte

	mu    sync.Mutex
	parts map[metadata.TopicPartition]*checkPart
	bad   error
}

type checkPart struct {
	end    int64
	epochs fencing.Lineage
}

func newCheckLog(want func(metadata.TopicPartition, int64) []byte) *checkLog {
	return &checkLog{want: want, parts: make(map[metadata.TopicPartition]*checkPart)}
}

func (l *checkLog) part(tp metadata.TopicPartition) *checkPart {
	p := l.parts[tp]
	if p == nil {
		p = &checkPart{}
		l.parts[tp] = p
	}
	return p
}

func (l *checkLog) EndOffset(tp metadata.TopicPartition) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.part(tp).end, nil
}

func (l *checkLog) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.part(tp).epochs.Entries(), nil
}

func (l *checkLog) Append(_ context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.part(tp)
	next := p.end
	for _, b := range batches {
		if b.FirstOffset != next || b.LastOffset < b.FirstOffset {
			return fmt.Errorf("%s batch %d-%d where %d was due: %w", tp, b.FirstOffset, b.LastOffset, next, storage.ErrNotContiguous)
		}
		if want := l.want(tp, b.FirstOffset); !bytes.Equal(b.Data, want) {
			err := fmt.Errorf("%s batch %d-%d: %d bytes appended differ from the %d produced", tp, b.FirstOffset, b.LastOffset, len(b.Data), len(want))
			if l.bad == nil {
				l.bad = err
			}
			return err
		}
		next = b.LastOffset + 1
	}
	for _, b := range batches {
		if latest, ok := p.epochs.Latest(); !ok || b.Epoch > latest.Epoch {
			if err := p.epochs.Assign(b.Epoch, b.FirstOffset); err != nil {
				return err
			}
		}
	}
	p.end = next
	return nil
}

func (l *checkLog) Truncate(_ context.Context, tp metadata.TopicPartition, offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.part(tp)
	if offset < p.end || p.epochs.Len() == 0 {
		p.end = offset
	}
	p.epochs.TruncateFromEnd(offset)
	return nil
}

// Read returns nothing: the log keeps no records. The engines read the
// local log only to republish, which these benchmarks never do.
func (l *checkLog) Read(context.Context, metadata.TopicPartition, int64, int) ([]storage.Batch, error) {
	return nil, nil
}

func (l *checkLog) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bad
}

func benchTP(i int) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: "bench", Partition: int32(i)}
}

// caughtUp waits until both followers hold every partition up to end,
// and fails b if one appended a byte the leader was not given.
func (bc *benchCluster) caughtUp(b *testing.B, partitions int, end []int64) {
	for _, log := range bc.logs {
		for i := range partitions {
			for {
				if err := log.err(); err != nil {
					b.Fatal(err)
				}
				e, _ := log.EndOffset(benchTP(i))
				if e >= end[i] {
					break
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
}

// logBatch returns a log-like batch of about size bytes: lines of JSON with
// repeated keys and varying values, as brokers carry.
func logBatch(rng *rand.Rand, size int) []byte {
	buf := make([]byte, 0, size+128)
	for len(buf) < size {
		buf = fmt.Appendf(buf, `{"ts":%d,"level":"info","svc":"checkout-%d","msg":"order placed","order":%d,"cents":%d}`+"\n",
			1764400000000+rng.IntN(1000), rng.IntN(8), rng.Uint32(), rng.IntN(100000))
	}
	return buf[:size]
}

// BenchmarkReplication measures end-to-end throughput: batches appended on
// the leader, at most two ops ahead of the followers, until both
// followers have applied them all, on memstore with no latency and codec
// none, in the steady state (sixteen ops run before the clock starts).
// BenchmarkReplicationLag measures latency. Compare with BenchmarkBaselineCopyXXHash, which
// only copies the same bytes once and hashes them; x-baseline is that
// ratio measured in the same process just before the run.
// alloc-B/replicated-B is the bytes allocated per byte a follower
// applied (two followers apply every produced byte). cpu-ns/B is the CPU
// time the process spent (user and system, every thread: leader,
// followers, the producing loop and the collector) per byte produced: on
// a machine other work shares, wall time and x-baseline swing with the
// load, and the CPU each byte costs is what a change is compared by.
// Its sub-benchmarks run the same replication with the leader publishing
// its rolling digests (digests=on, the default, which both followers
// check) and without (digests=off, NodeConfig.NoDigests): their ratio is
// what computing and checking the digests costs.
func BenchmarkReplication(b *testing.B) {
	for _, noDigests := range []bool{false, true} {
		b.Run(map[bool]string{false: "digests=on", true: "digests=off"}[noDigests], func(b *testing.B) {
			benchmarkReplication(b, noDigests)
		})
	}
}

// benchmarkReplication is BenchmarkReplication, with or without digests.
func benchmarkReplication(b *testing.B, noDigests bool) {
	const partitions, batchBytes, batchesPerOp, followers = 100, 4096, 2048, 2
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([][]byte, batchesPerOp)
	for i := range data {
		data[i] = logBatch(rng, batchBytes)
	}
	// Partition p takes batches p, p+partitions, ... of data in every op,
	// ten offsets each.
	want := func(tp metadata.TopicPartition, first int64) []byte {
		p := int(tp.Partition)
		per := (batchesPerOp - p + partitions - 1) / partitions
		return data[p+partitions*int((first/10)%int64(per))]
	}
	bc := newBenchCluster(b, "none", partitions, walstore.NodeConfig{Interval: 2 * time.Millisecond, NoDigests: noDigests}, want)
	end := make([]int64, partitions)
	ctx := context.Background()
	baseline := copyHashRate(data)
	b.SetBytes(batchesPerOp * batchBytes)
	b.ReportAllocs()
	var before, after runtime.MemStats
	// The producer runs at most window ops ahead of the followers, as
	// acks=all producers with a bounded number of requests in flight do:
	// the pipeline stays full, and the backlog (objects stored and not yet
	// read, sections fetched and not yet appended) stays bounded.
	const window = 2
	var ends [window][]int64
	for i := range ends {
		ends[i] = make([]int64, partitions)
	}
	op := 0
	produce := func() {
		if op >= window {
			bc.caughtUp(b, partitions, ends[op%window])
		}
		for i, d := range data {
			p := i % partitions
			batch := storage.Batch{Epoch: 1, FirstOffset: end[p], LastOffset: end[p] + 9, MaxTimestamp: time.Now().UnixMilli(), Data: d}
			if err := bc.leader.Append(ctx, benchTP(p), batch); err != nil {
				b.Fatal(err)
			}
			end[p] += 10
		}
		copy(ends[op%window], end)
		op++
	}
	// Sixteen ops before the clock starts: the buffer pools fill and the
	// heap reaches its size, as in a broker that has run for a while.
	for range 16 {
		produce()
	}
	bc.caughtUp(b, partitions, end)
	runtime.ReadMemStats(&before)
	cpu0, cpuOK := cputime.Process()
	b.ResetTimer()
	for range b.N {
		produce()
	}
	bc.caughtUp(b, partitions, end)
	b.StopTimer()
	cpu1, cpuOK1 := cputime.Process()
	runtime.ReadMemStats(&after)
	produced := float64(b.N) * batchesPerOp * batchBytes
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/(followers*produced), "alloc-B/replicated-B")
	b.ReportMetric(produced/b.Elapsed().Seconds()/baseline, "x-baseline")
	if cpuOK && cpuOK1 {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/produced, "cpu-ns/B")
	}
}

// copyHashRate is BenchmarkBaselineCopyXXHash's rate over data, in bytes
// per second: the best of a few rounds.
func copyHashRate(data [][]byte) float64 {
	var n int
	for _, d := range data {
		n += len(d)
	}
	dst := make([]byte, 0, n)
	best := time.Duration(1<<63 - 1)
	var sum uint64
	for range 20 {
		start := time.Now()
		dst = dst[:0]
		for _, d := range data {
			dst = append(dst, d...)
		}
		sum += xxhash.Sum64(dst)
		best = min(best, time.Since(start))
	}
	_ = sum
	return float64(n) / max(best.Seconds(), 1e-9)
}

// BenchmarkBaselineCopyXXHash copies and hashes the bytes
// BenchmarkReplication replicates: the floor any replication path pays.
func BenchmarkBaselineCopyXXHash(b *testing.B) {
	const batchBytes, batchesPerOp = 4096, 2048
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([][]byte, batchesPerOp)
	for i := range data {
		data[i] = logBatch(rng, batchBytes)
	}
	dst := make([]byte, 0, batchesPerOp*batchBytes)
	b.SetBytes(batchesPerOp * batchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	var sum uint64
	for range b.N {
		dst = dst[:0]
		for _, d := range data {
			dst = append(dst, d...)
		}
		sum += xxhash.Sum64(dst)
	}
	_ = sum
}

// BenchmarkReplicationLag produces at a fixed rate on memstore's s3express
// latency profile and reports the followers' replication lag, from a
// batch's timestamp to its append on a follower, in the steady state: a
// first second of producing is left out. put+get-ms is the
// modelled median PUT and GET for the object size; overhead-ms is p50
// minus half the interval (a batch waits half of it on average) minus
// those: the library's own share. bound-ms is what lag p99 should stay
// within when the lag is only the store's: the interval plus the
// modelled p99 PUT and p99 GET plus 20 ms. The nohedge cases turn hedged
// requests off, for comparison in the same run; hedge-% is the extra
// GETs hedging made, per GET, and put-hedge-% the extra PUTs per object.
func BenchmarkReplicationLag(b *testing.B) {
	for _, tc := range []struct {
		name        string
		partitions  int
		mbPerSec    float64
		interval    time.Duration
		objectBytes int
		noHedge     bool
	}{
		{"1000p-100MBps-100ms", 1000, 100, 100 * time.Millisecond, 16 << 20, false},
		{"1000p-100MBps-4MiB", 1000, 100, 100 * time.Millisecond, 4 << 20, false},
		{"1000p-100MBps-4MiB-nohedge", 1000, 100, 100 * time.Millisecond, 4 << 20, true},
		// At 100 MB/s the copies (encoding, memstore's PUT and a GET
		// per follower: four per produced byte) and the checks load a
		// small machine; at 20 MB/s the lag shows the engines' own share.
		{"1000p-20MBps-100ms", 1000, 20, 100 * time.Millisecond, 16 << 20, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const profile = "s3express"
			const tick = 10 * time.Millisecond
			perTick := int(tc.mbPerSec * 1e6 * tick.Seconds())
			batchBytes := max(perTick/tc.partitions, 64)
			rng := rand.New(rand.NewPCG(3, 4))
			payload := logBatch(rng, batchBytes)
			bc := newBenchCluster(b, profile, tc.partitions, walstore.NodeConfig{
				Interval: tc.interval, ObjectBytes: tc.objectBytes, BufferBytes: 256 << 20, MaxPartitions: 4096,
				UploadHedge: walstore.HedgeConfig{Disabled: tc.noHedge},
			}, func(metadata.TopicPartition, int64) []byte { return payload }, walstore.NodeConfig{FetchHedge: walstore.HedgeConfig{Disabled: tc.noHedge}})
			end := make([]int64, tc.partitions)
			ctx := context.Background()
			produce := func(d time.Duration) {
				deadline := time.Now().Add(d)
				next := time.Now()
				for time.Now().Before(deadline) {
					for p := range tc.partitions {
						batch := storage.Batch{Epoch: 1, FirstOffset: end[p], LastOffset: end[p], MaxTimestamp: time.Now().UnixMilli(), Data: payload}
						if err := bc.leader.Append(ctx, benchTP(p), batch); err != nil {
							b.Fatal(err)
						}
						end[p]++
					}
					next = next.Add(tick)
					time.Sleep(time.Until(next))
				}
				bc.caughtUp(b, tc.partitions, end)
			}
			// The first second is not measured: the buffer pools fill,
			// the heap grows and the hedges learn their thresholds, as
			// in the first seconds of a broker's life, not its steady
			// state.
			produce(time.Second)
			before := bc.lagStats()
			b.ResetTimer()
			for range b.N {
				produce(3 * time.Second)
			}
			b.StopTimer()
			st := bc.lagStats().since(before)
			lag := st.lag
			ls := st.leader
			objBytes := float64(ls.ObjectBytes) / float64(max(ls.Objects, 1))
			prof, err := memstore.ParseProfile(profile)
			if err != nil {
				b.Fatal(err)
			}
			// Each follower reads every section here: one GET of the
			// object, from another AZ.
			put, get := modelMs(prof.Put, objBytes, 0), modelMs(prof.Get, objBytes, 0)
			put99, get99 := modelMs(prof.Put, objBytes, z99), modelMs(prof.Get, objBytes, z99)+ms(prof.CrossAZMax)
			b.ReportMetric(ms(lag.Quantile(0.5)), "lag-p50-ms")
			b.ReportMetric(ms(lag.Quantile(0.99)), "lag-p99-ms")
			b.ReportMetric(ms(tc.interval)+put99+get99+20, "bound-ms")
			b.ReportMetric(objBytes/1e6, "object-MB")
			b.ReportMetric(put+get, "put+get-ms")
			b.ReportMetric(ms(lag.Quantile(0.5))-ms(tc.interval)/2-put-get, "overhead-ms")
			b.ReportMetric(100*float64(st.hedges)/float64(max(st.fetches, 1)), "hedge-%")
			b.ReportMetric(100*float64(ls.UploadHedges)/float64(max(ls.Objects, 1)), "put-hedge-%")
			b.ReportMetric(tc.mbPerSec, "MB/s")
		})
	}
}

// lagStats is what BenchmarkReplicationLag reports, summed over the
// followers: counters and histograms only grow, so the difference of two
// snapshots is what happened in between.
type lagStats struct {
	lag             walstore.Histogram
	fetches, hedges uint64
	leader          walstore.LeaderStats
}

func (bc *benchCluster) lagStats() lagStats {
	var s lagStats
	for _, f := range bc.followers {
		st := f.Stats().Follower
		s.lag.Merge(&st.ApplyLag)
		s.fetches += st.Fetches
		s.hedges += st.Hedges
	}
	s.leader = bc.leader.Stats().Leader
	return s
}

func (s lagStats) since(prev lagStats) lagStats {
	s.lag = s.lag.Since(&prev.lag)
	s.fetches -= prev.fetches
	s.hedges -= prev.hedges
	s.leader.Objects -= prev.leader.Objects
	s.leader.ObjectBytes -= prev.leader.ObjectBytes
	s.leader.UploadHedges -= prev.leader.UploadHedges
	return s
}

// BenchmarkIdlePartitionMemory measures the heap the engines (cores and
// drivers of the leader and the follower side) keep per idle partition:
// one Node leads n partitions and another follows them, with a metadata
// log and local logs that keep nothing, so that only the engines' memory
// counts. B/led-partition and B/followed-partition are HeapAlloc deltas
// after garbage collection, once the engines have settled.
func BenchmarkIdlePartitionMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			var led, followed float64
			for range b.N {
				led, followed = idlePartitionMemory(b, n)
			}
			b.ReportMetric(led, "B/led-partition")
			b.ReportMetric(followed, "B/followed-partition")
		})
	}
}

func idlePartitionMemory(b *testing.B, n int) (led, followed float64) {
	objects, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1", "az2": "b2"}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	meta := &nullLog{}
	local := nullLocalLog{}
	nodes := make([]*walstore.Node, 2)
	for i := range nodes {
		store, _ := objects.Store(fmt.Sprintf("az%d", i+1))
		nodes[i], err = walstore.NewNode(walstore.NodeConfig{BrokerID: int32(i + 1), Store: store, Log: meta, Local: local, Logger: discard(),
			MaxPartitions: 1000})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { nodes[i].Run(ctx) })
	}
	tp := func(i int) metadata.TopicPartition {
		return metadata.TopicPartition{Topic: "idle", Partition: int32(i)}
	}
	followers := []int32{2}
	base := settledHeap()
	for i := range n {
		if err := nodes[0].BecomeLeader(ctx, tp(i), 1, followers, -1); err != nil {
			b.Fatal(err)
		}
	}
	afterLead := settledHeap()
	for i := range n {
		if err := nodes[1].BecomeFollower(ctx, tp(i), 1, 1); err != nil {
			b.Fatal(err)
		}
	}
	afterFollow := settledHeap()
	runtime.KeepAlive(nodes)
	return float64(afterLead-base) / float64(n), float64(afterFollow-afterLead) / float64(n)
}

// settledHeap returns the live heap once the engines' background work
// (markers, loads, metadata rewinds) has settled: after garbage
// collection, when it stops changing by more than 1%.
func settledHeap() int64 {
	var ms runtime.MemStats
	last := int64(-1)
	for range 100 {
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		cur := int64(ms.HeapAlloc)
		if last >= 0 && max(cur-last, last-cur) <= cur/100 {
			return cur
		}
		last = cur
	}
	return last
}

// nullLog is a metadata log that accepts every append and keeps nothing,
// so that a benchmark counts the engines' memory, not the log's.
type nullLog struct{ next atomic.Int64 }

func (l *nullLog) Partitions() int32 { return 4 }
func (l *nullLog) Append(context.Context, int32, []byte) (int64, error) {
	return l.next.Add(1) - 1, nil
}
func (l *nullLog) Read(ctx context.Context, _ int32, _ int64, _ int) ([]metadata.Record, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(10 * time.Millisecond):
		return nil, nil
	}
}
func (l *nullLog) Watermarks(context.Context, int32) (int64, int64, error) { return 0, 0, nil }
func (l *nullLog) Trim(context.Context, int32, int64) error                { return nil }
func (l *nullLog) Close() error                                            { return nil }

// nullLocalLog is every partition's empty log at epoch 1, keeping
// nothing.
type nullLocalLog struct{}

func (nullLocalLog) EndOffset(metadata.TopicPartition) (int64, error) { return 0, nil }
func (nullLocalLog) Epochs(metadata.TopicPartition) ([]storage.EpochEntry, error) {
	return []storage.EpochEntry{{Epoch: 1, StartOffset: 0}}, nil
}
func (nullLocalLog) Append(context.Context, metadata.TopicPartition, []storage.Batch) error {
	return nil
}
func (nullLocalLog) Truncate(context.Context, metadata.TopicPartition, int64) error { return nil }
func (nullLocalLog) Read(context.Context, metadata.TopicPartition, int64, int) ([]storage.Batch, error) {
	return nil, nil
}

// z99 is the standard normal's 0.99 quantile.
const z99 = 2.3263

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// modelMs is memstore's latency for a request moving size bytes at the
// standard normal quantile z (0 for the median), in milliseconds.
func modelMs(l memstore.Latency, size, z float64) float64 {
	return (ms(l.Median) + ms(l.PerMiB)*size/(1<<20)) * math.Exp(l.Sigma*z)
}
