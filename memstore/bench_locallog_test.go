package memstore_test

import (
	"context"
	"testing"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// benchLogParts and benchBatchBytes are the demo's shape: batches of 16
// KiB over many partitions.
const (
	benchLogParts   = 1000
	benchBatchBytes = 16 << 10
)

// fillLog appends n batches round-robin over benchLogParts partitions,
// from one reused buffer, as the demo's producer does.
func fillLog(b *testing.B, l *memstore.LocalLog, n int, data []byte) {
	ctx := context.Background()
	for i := range n {
		tp := metadata.TopicPartition{Topic: "logs", Partition: int32(i % benchLogParts)}
		off := int64(i / benchLogParts)
		if err := l.Append(ctx, tp, []storage.Batch{{FirstOffset: off, LastOffset: off, Data: data}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLocalLogAppend appends 16 KiB batches; the log is replaced,
// untimed, every 64 MiB so that the benchmark's memory stays bounded.
func BenchmarkLocalLogAppend(b *testing.B) {
	data := make([]byte, benchBatchBytes)
	const perLog = 4096
	b.SetBytes(benchBatchBytes)
	b.ReportAllocs()
	for done := 0; done < b.N; done += perLog {
		b.StopTimer()
		l := memstore.NewLocalLog()
		b.StartTimer()
		fillLog(b, l, min(perLog, b.N-done), data)
	}
}

// BenchmarkLocalLogVisit reads every partition's whole log, as the end of
// a demo run compares them: 64 MiB in all.
func BenchmarkLocalLogVisit(b *testing.B) {
	l := memstore.NewLocalLog()
	fillLog(b, l, 4096, make([]byte, benchBatchBytes))
	b.SetBytes(4096 * benchBatchBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		n := 0
		for p := range benchLogParts {
			tp := metadata.TopicPartition{Topic: "logs", Partition: int32(p)}
			_ = l.EachBatch(tp, 0, func(bt storage.Batch) error {
				n += len(bt.Data)
				return nil
			})
		}
		if n != 4096*benchBatchBytes {
			b.Fatalf("visited %d bytes", n)
		}
	}
}

// BenchmarkLocalLogAppendGrowing appends b.N 16 KiB batches to one log
// that keeps them all, as a demo's logs do; run it with a fixed
// -benchtime such as 16384x (256 MiB).
func BenchmarkLocalLogAppendGrowing(b *testing.B) {
	l := memstore.NewLocalLog()
	b.SetBytes(benchBatchBytes)
	b.ReportAllocs()
	fillLog(b, l, b.N, make([]byte, benchBatchBytes))
}
