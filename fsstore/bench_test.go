package fsstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/activetier/activetier/storage/storagetest"
)

// benchSizes are the object sizes the benchmarks compare at: a small
// object, and the engines' default ObjectBytes.
var benchSizes = []struct {
	name string
	n    int
}{{"64KiB", 64 << 10}, {"4MiB", 4 << 20}}

// BenchmarkPut compares Put with the system calls it makes, made directly:
// create a temporary file, write, fsync, close, link, unlink the temporary
// name, fsync the directory. The difference is the store's own work: key
// encoding, the bucket's slot, error handling. Each iteration makes both,
// in alternating order, and times each, so that the two share the
// machine's state (a shared disk's fsync latency drifts by multiples):
// fsstore-ns/op and raw-ns/op are their means, ratio fsstore over raw.
func BenchmarkPut(b *testing.B) {
	for _, size := range benchSizes {
		body := make([]byte, size.n)
		_, _ = rand.Read(body)
		b.Run(size.name, func(b *testing.B) {
			s := newStore(b, twoAZs(b, "az1"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dir := filepath.Join(b.TempDir(), "raw")
			mkdir(b, dir)
			var p paired
			for i := 0; b.Loop(); i++ {
				p.run(b, i, func() error {
					_, err := s.Put(ctx, fmt.Sprintf("bench/%09d", i), body)
					return err
				}, func() error {
					return rawPut(dir, fmt.Sprintf("%09d", i), body)
				})
			}
			p.report(b, int64(size.n))
		})
	}
}

// paired times two ways of doing one thing, alternately.
type paired struct {
	store, raw time.Duration
	n          int
}

// run times store and raw once each, raw first on odd iterations.
func (p *paired) run(b *testing.B, i int, store, raw func() error) {
	fns := []func() error{store, raw}
	took := []*time.Duration{&p.store, &p.raw}
	for k := range 2 {
		j := k
		if i%2 == 1 {
			j = 1 - k
		}
		start := time.Now()
		if err := fns[j](); err != nil {
			b.Fatal(err)
		}
		*took[j] += time.Since(start)
	}
	p.n++
}

func (p *paired) report(b *testing.B, size int64) {
	if p.n == 0 {
		return
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(p.store.Nanoseconds())/float64(p.n), "fsstore-ns/op")
	b.ReportMetric(float64(p.raw.Nanoseconds())/float64(p.n), "raw-ns/op")
	b.ReportMetric(float64(p.store)/float64(p.raw), "ratio")
	b.ReportMetric(float64(size)/(float64(p.store.Nanoseconds())/float64(p.n))*1e3, "fsstore-MB/s")
}

// rawPut is Put's system calls without the store.
func rawPut(dir, name string, body []byte) error {
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := filepath.Join(dir, ".tmp-"+hex.EncodeToString(r[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return err
	}
	if _, err := f.Write(body); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	if err := os.Remove(tmp); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		return err
	}
	return d.Close()
}

// BenchmarkGetRange compares reading a whole object with GetRange (on a
// cancellable context, as the engines call it, so through the goroutine
// that lets a call return from a hung file server) with the system calls
// it makes, made directly: open, fstat, pread into a new buffer, close.
// The file is in the page cache, so this is the store's overhead, not the
// disk's speed. Timed in pairs as BenchmarkPut is. The "background"
// variants call GetRange with context.Background, which cannot end, so
// the store runs the read on the caller's goroutine: the difference
// between the two is the hand-off's cost.
func BenchmarkGetRange(b *testing.B) {
	for _, size := range benchSizes {
		body := make([]byte, size.n)
		_, _ = rand.Read(body)
		for _, background := range []bool{false, true} {
			name := size.name + "/cancellable"
			if background {
				name = size.name + "/background"
			}
			b.Run(name, func(b *testing.B) { benchGetRange(b, body, background) })
		}
	}
}

func benchGetRange(b *testing.B, body []byte, background bool) {
	opts := twoAZs(b, "az1")
	s := newStore(b, opts)
	ref, err := s.Put(context.Background(), "bench/object", body)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(opts.Buckets["az1"].Dir, "bench%", "object")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if background {
		ctx = context.Background()
	}
	n := int64(len(body))
	var p paired
	for i := 0; b.Loop(); i++ {
		p.run(b, i, func() error {
			_, err := s.GetRange(ctx, ref, 0, n)
			return err
		}, func() error {
			return rawRead(path, n)
		})
	}
	p.report(b, n)
}

// rawRead is GetRange's system calls without the store.
func rawRead(path string, n int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Stat(); err != nil {
		return err
	}
	buf := make([]byte, n)
	_, err = f.ReadAt(buf, 0)
	return err
}

// BenchmarkReadRange compares GetRange with ReadRange into a reused buffer,
// from 64 KiB to 4 MiB of a file in the page cache, in one run: B/op and
// MB/s per method, and a logged line per size (-v) with ReadRange's time
// and allocation as multiples of GetRange's. The reads have a context
// that can end, as the follower's do, so both go through the bucket's
// goroutine.
func BenchmarkReadRange(b *testing.B) {
	opts := twoAZs(b, "az1")
	storagetest.BenchmarkRanges(b, newStore(b, opts), newStore(b, peerOf(opts, "az2")))
}
