package walstore_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// BenchmarkWaitedAck measures how long an append whose producer waits for
// it to be durable (WaitDurable, as acks on upload does) takes to be
// acknowledged, with NodeConfig.WaitCutDelay off (cut at the 100ms
// Interval) and at 2ms, on memstore's s3express latency profile. 300
// partitions each append a 1 KiB batch every 10ms (30 MB/s); one append
// in ten waits, open loop: the producer does not wait for the acks. One
// op is one round of appends. ack-p50-ms and ack-p99-ms are the waited
// appends' latency from the Append call to WaitDurable's return;
// puts/s is what the cuts cost.
func BenchmarkWaitedAck(b *testing.B) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{{"off", 0}, {"2ms", 2 * time.Millisecond}} {
		b.Run(tc.name, func(b *testing.B) {
			const partitions, tick, waitEvery = 300, 10 * time.Millisecond, 10
			payload := logBatch(rand.New(rand.NewPCG(5, 6)), 1024)
			bc := newBenchCluster(b, "s3express", partitions, walstore.NodeConfig{WaitCutDelay: tc.delay},
				func(metadata.TopicPartition, int64) []byte { return payload })
			ctx := context.Background()
			end := make([]int64, partitions)
			var (
				mu   sync.Mutex
				acks []time.Duration
				wg   sync.WaitGroup
				errs = make(chan error, 1)
			)
			round := func(i int, record bool) {
				for p := range partitions {
					tp := benchTP(p)
					off := end[p]
					start := time.Now()
					batch := storage.Batch{Epoch: 1, FirstOffset: off, LastOffset: off, MaxTimestamp: start.UnixMilli(), Data: payload}
					if err := bc.leader.Append(ctx, tp, batch); err != nil {
						b.Fatal(err)
					}
					end[p]++
					if (p+i)%waitEvery != 0 {
						continue
					}
					wg.Go(func() {
						if err := bc.leader.WaitDurable(ctx, tp, 1, off); err != nil {
							select {
							case errs <- err:
							default:
							}
							return
						}
						if record {
							d := time.Since(start)
							mu.Lock()
							acks = append(acks, d)
							mu.Unlock()
						}
					})
				}
			}
			// Half a second not measured: pools fill, hedges learn.
			next := time.Now()
			for i := range 50 {
				round(i, false)
				next = next.Add(tick)
				time.Sleep(time.Until(next))
			}
			wg.Wait()
			before := bc.leader.Stats().Leader.Objects
			began := time.Now()
			b.ResetTimer()
			next = time.Now()
			for i := range b.N {
				round(i, true)
				next = next.Add(tick)
				time.Sleep(time.Until(next))
			}
			wg.Wait()
			b.StopTimer()
			elapsed := time.Since(began)
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			slices.Sort(acks)
			q := func(f float64) float64 { return ms(acks[min(len(acks)-1, int(f*float64(len(acks))))]) }
			b.ReportMetric(q(0.5), "ack-p50-ms")
			b.ReportMetric(q(0.99), "ack-p99-ms")
			b.ReportMetric(float64(bc.leader.Stats().Leader.Objects-before)/elapsed.Seconds(), "puts/s")
			b.ReportMetric(float64(len(acks)), "acks")
		})
	}
}
