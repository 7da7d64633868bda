package gcsstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"

	gcs "cloud.google.com/go/storage"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage/storagetest"
)

// The benchmarks compare the store with the client library's own calls
// for the same requests against the same emulator, in one run, so that
// their ratio is the store's overhead: its key and range checks, its
// attempt bookkeeping, the read-back-free happy path. Run them with
//
//	bash scripts/test.sh go test -run '^$' -bench . -benchtime 200x ./gcsstore/

// benchSizes are the object sizes Put is measured with; GetRange reads a
// 16 KiB range from a 1 MiB object, a follower's typical section read.
var benchSizes = []int{4 << 10, 256 << 10}

const (
	benchObject = 1 << 20
	benchRange  = 16 << 10
)

// rawClient is a client library client configured as the store's: the
// emulator endpoint, a transport of its own with as many idle connections
// per host under the library's transport layers (no authentication for an
// emulator), no library retries.
func rawClient(b *testing.B, ep string) *gcs.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 100
	rt, err := htransport.NewTransport(context.Background(), tr, option.WithoutAuthentication())
	require.NoError(b, err)
	c, err := gcs.NewClient(context.Background(),
		option.WithEndpoint(ep+"/storage/v1/"), option.WithHTTPClient(&http.Client{Transport: rt}))
	require.NoError(b, err)
	c.SetRetry(gcs.WithPolicy(gcs.RetryNever))
	b.Cleanup(func() {
		c.Close()
		tr.CloseIdleConnections()
	})
	return c
}

func BenchmarkPut(b *testing.B) {
	ep := gcsEndpoint(b)
	createBuckets(b, ep, emulatorBuckets)
	s := newStore(b, ep, emulatorBuckets, zoneA, nil)
	raw := rawClient(b, ep).Bucket(emulatorBuckets[zoneA])
	for _, size := range benchSizes {
		body := bytes.Repeat([]byte{'x'}, size)
		b.Run(fmt.Sprintf("store/%dKiB", size>>10), func(b *testing.B) {
			run := fmt.Sprintf("bench/%016x/", rand.Uint64())
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				if _, err := s.Put(b.Context(), fmt.Sprintf("%sstore-%d-%d", run, size, i), body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("raw/%dKiB", size>>10), func(b *testing.B) {
			run := fmt.Sprintf("bench/%016x/", rand.Uint64())
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				w := raw.Object(fmt.Sprintf("%sraw-%d-%d", run, size, i)).If(gcs.Conditions{DoesNotExist: true}).NewWriter(b.Context())
				w.ChunkSize = 0
				w.ContentType = "application/octet-stream"
				if _, err := w.Write(body); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGetRange(b *testing.B) {
	ep := gcsEndpoint(b)
	createBuckets(b, ep, emulatorBuckets)
	s := newStore(b, ep, emulatorBuckets, zoneB, nil)
	key := fmt.Sprintf("bench/%016x/object", rand.Uint64())
	writer := newStore(b, ep, emulatorBuckets, zoneA, nil)
	ref, err := writer.Put(context.Background(), key, bytes.Repeat([]byte{'y'}, benchObject))
	require.NoError(b, err)
	b.Cleanup(func() { _ = writer.Delete(context.Background(), []metadata.ObjectRef{ref}) })
	obj := rawClient(b, ep).Bucket(ref.Bucket).Object(key)
	offset := func(i int) int64 { return int64(i*benchRange) % (benchObject - benchRange) }

	b.Run("store", func(b *testing.B) {
		b.SetBytes(benchRange)
		for i := 0; b.Loop(); i++ {
			if _, err := s.GetRange(b.Context(), ref, offset(i), benchRange); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.SetBytes(benchRange)
		buf := make([]byte, benchRange)
		for i := 0; b.Loop(); i++ {
			r, err := obj.NewRangeReader(b.Context(), offset(i), benchRange)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(r, buf); err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
	})
}

// BenchmarkReadRange compares GetRange with ReadRange into a reused buffer,
// from 64 KiB to 4 MiB, in one run: B/op and MB/s per method, and a logged
// line per size (-v) with ReadRange's time and allocation as multiples of
// GetRange's.
func BenchmarkReadRange(b *testing.B) {
	ep := gcsEndpoint(b)
	createBuckets(b, ep, emulatorBuckets)
	storagetest.BenchmarkRanges(b, newStore(b, ep, emulatorBuckets, zoneA, nil), newStore(b, ep, emulatorBuckets, zoneB, nil))
}
