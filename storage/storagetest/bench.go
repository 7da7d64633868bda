package storagetest

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// BenchmarkRanges compares GetRange with ReadRange (into one reused
// buffer, as the follower's pooled buffers are) on ranges of each of
// sizes (if none: 64 KiB, 256 KiB, 1 MiB and 4 MiB, from a
// small section to a whole object), reading through reader an object
// writer puts, and deletes it when b ends. Each size has a sub-benchmark
// per method, with B/op and MB/s; then a line logs ReadRange's time and
// allocated bytes per read as multiples of GetRange's, measured in the
// same run (go test -v shows it). reader must implement
// storage.RangeReader.
func BenchmarkRanges(b *testing.B, writer, reader storage.ObjectStore, sizes ...int) {
	if len(sizes) == 0 {
		sizes = []int{64 << 10, 256 << 10, 1 << 20, 4 << 20}
	}
	rr, ok := reader.(storage.RangeReader)
	require.True(b, ok, "%T does not implement storage.RangeReader", reader)
	objectSize := 0
	for _, n := range sizes {
		require.Positive(b, n, "range sizes must be positive")
		objectSize = max(objectSize, 2*n)
	}
	// A context that can end, like the follower's (FetchTimeout): a
	// store may read differently when it cannot.
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	ref, err := writer.Put(ctx, newRunPrefix(b)+"bench-object", body(30, objectSize))
	require.NoError(b, err)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(b, writer.Delete(ctx, []metadata.ObjectRef{ref}))
	})
	for _, size := range sizes {
		// Ranges walk through the object so that consecutive reads do
		// not hit the same bytes.
		offset := func(i int) int64 { return int64(i*size) % int64(objectSize-size) }
		var get, read benchResult
		b.Run(fmt.Sprintf("size=%s/method=GetRange", sizeName(size)), func(b *testing.B) {
			get = measure(b, size, func(i int) error {
				_, err := reader.GetRange(ctx, ref, offset(i), int64(size))
				return err
			})
		})
		b.Run(fmt.Sprintf("size=%s/method=ReadRange", sizeName(size)), func(b *testing.B) {
			dst := make([]byte, size)
			read = measure(b, size, func(i int) error {
				n, err := rr.ReadRange(ctx, ref, offset(i), dst)
				if err == nil && n != size {
					err = fmt.Errorf("ReadRange returned %d of %d bytes", n, size)
				}
				return err
			})
		})
		if get.ns > 0 && read.ns > 0 {
			b.Logf("size=%s: ReadRange/GetRange: time per read %.2fx, bytes allocated per read %.3fx (%.0f B vs %.0f B)",
				sizeName(size), read.ns/get.ns, read.bytes/max(get.bytes, 1), read.bytes, get.bytes)
		}
	}
}

// benchResult is one sub-benchmark's time and heap allocation per read.
type benchResult struct{ ns, bytes float64 }

// measure runs read under b.Loop with size bytes per op and returns what
// it took per read.
func measure(b *testing.B, size int, read func(i int) error) benchResult {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	i := 0
	for ; b.Loop(); i++ {
		if err := read(i); err != nil {
			b.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if i == 0 {
		return benchResult{}
	}
	return benchResult{ns: float64(b.Elapsed().Nanoseconds()) / float64(i), bytes: float64(after.TotalAlloc-before.TotalAlloc) / float64(i)}
}

// sizeName writes a size in KiB or MiB, as benchmark names do.
func sizeName(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}
