package walstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// benchCluster is a leader and two followers on one memstore cluster.
type benchCluster struct {
	cancel    context.CancelFunc
	done      chan struct{}
	objects   *memstore.Cluster
	leader    *walstore.Node
	followers []*walstore.Node
	logs      []*memstore.LocalLog
}

func newBenchCluster(b *testing.B, profile string, partitions int, cfg walstore.LeaderConfig) *benchCluster {
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
	if bc.leader, err = walstore.NewNode(walstore.NodeConfig{BrokerID: 1, Store: store, Log: meta, Local: memstore.NewLocalLog(), Leader: cfg, Logger: discard()}); err != nil {
		b.Fatal(err)
	}
	running := 1
	go func() { bc.leader.Run(ctx); bc.done <- struct{}{} }()
	for id, az := range map[int32]string{2: "az2", 3: "az3"} {
		store, _ := objects.Store(az)
		log := memstore.NewLocalLog()
		f, err := walstore.NewNode(walstore.NodeConfig{BrokerID: id, Store: store, Log: meta, Local: log, Logger: discard()})
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

func benchTP(i int) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: "bench", Partition: int32(i)}
}

// caughtUp waits until both followers hold every partition up to end.
func (bc *benchCluster) caughtUp(b *testing.B, partitions int, end []int64) {
	for _, log := range bc.logs {
		for i := range partitions {
			for {
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
// the leader until both followers have applied them, on memstore with no
// latency and codec none. Compare with BenchmarkBaselineCopyXXHash, which
// only copies the same bytes once and hashes them.
func BenchmarkReplication(b *testing.B) {
	const partitions, batchBytes, batchesPerOp = 100, 4096, 2048
	bc := newBenchCluster(b, "none", partitions, walstore.LeaderConfig{Interval: 2 * time.Millisecond})
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([][]byte, batchesPerOp)
	for i := range data {
		data[i] = logBatch(rng, batchBytes)
	}
	end := make([]int64, partitions)
	ctx := context.Background()
	b.SetBytes(batchesPerOp * batchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i, d := range data {
			p := i % partitions
			batch := combiner.Batch{Epoch: 1, FirstOffset: end[p], LastOffset: end[p] + 9, MaxTimestamp: time.Now().UnixMilli(), Data: d}
			if err := bc.leader.Append(ctx, benchTP(p), batch); err != nil {
				b.Fatal(err)
			}
			end[p] += 10
		}
		bc.caughtUp(b, partitions, end)
	}
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
// batch's timestamp to its append on a follower. model-ms is the interval
// plus the modelled median PUT and GET for the object size; overhead-ms is
// p50 minus half the interval (a batch waits half of it on average) minus
// the modelled PUT and GET: the library's own share.
func BenchmarkReplicationLag(b *testing.B) {
	for _, tc := range []struct {
		name        string
		partitions  int
		mbPerSec    float64
		interval    time.Duration
		objectBytes int
	}{
		{"1000p-100MBps-100ms", 1000, 100, 100 * time.Millisecond, 16 << 20},
		{"1000p-100MBps-4MiB", 1000, 100, 100 * time.Millisecond, 4 << 20},
		// At 100 MB/s memstore's and the local logs' copies (six per
		// replicated byte) saturate a small machine; at 20 MB/s the lag
		// shows the engines' own share.
		{"1000p-20MBps-100ms", 1000, 20, 100 * time.Millisecond, 16 << 20},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bc := newBenchCluster(b, "s3express", tc.partitions, walstore.LeaderConfig{
				Interval: tc.interval, ObjectBytes: tc.objectBytes, BufferBytes: 256 << 20, MaxPartitions: 4096,
			})
			const tick = 10 * time.Millisecond
			perTick := int(tc.mbPerSec * 1e6 * tick.Seconds())
			batchBytes := max(perTick/tc.partitions, 64)
			rng := rand.New(rand.NewPCG(3, 4))
			payload := logBatch(rng, batchBytes)
			end := make([]int64, tc.partitions)
			ctx := context.Background()
			run := 3 * time.Second
			b.ResetTimer()
			for range b.N {
				deadline := time.Now().Add(run)
				next := time.Now()
				for time.Now().Before(deadline) {
					for p := range tc.partitions {
						batch := combiner.Batch{Epoch: 1, FirstOffset: end[p], LastOffset: end[p], MaxTimestamp: time.Now().UnixMilli(), Data: payload}
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
			b.StopTimer()
			var lag walstore.Histogram
			for _, f := range bc.followers {
				h := f.Stats().Follower.ApplyLag
				lag.Merge(&h)
			}
			ls := bc.leader.Stats().Leader
			objBytes := float64(ls.ObjectBytes) / float64(max(ls.Objects, 1))
			put := 6.5 + 10*objBytes/(1<<20)
			get := 2.5 + 10*objBytes/(1<<20) // each follower reads every section here: one GET of the object
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			b.ReportMetric(ms(lag.Quantile(0.5)), "lag-p50-ms")
			b.ReportMetric(ms(lag.Quantile(0.99)), "lag-p99-ms")
			b.ReportMetric(objBytes/1e6, "object-MB")
			b.ReportMetric(put+get, "put+get-ms")
			b.ReportMetric(ms(lag.Quantile(0.5))-ms(tc.interval)/2-put-get, "overhead-ms")
			b.ReportMetric(tc.mbPerSec, "MB/s")
		})
	}
}
