package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
)

// mapStore is the baseline: the least an in-memory object store can do, a
// map under a lock with copies in and out.
type mapStore struct {
	mu sync.RWMutex
	m  map[string][]byte
}

var errExists = errors.New("exists")

func (s *mapStore) put(key string, body []byte) error {
	data := make([]byte, len(body))
	copy(data, body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; ok {
		return errExists
	}
	s.m[key] = data
	return nil
}

func (s *mapStore) get(key string, offset, length int64) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.m[key]
	if !ok || offset+length > int64(len(d)) {
		return nil, errExists
	}
	out := make([]byte, length)
	copy(out, d[offset:])
	return out, nil
}

// benchSizes are a small section read and a whole-partition upload.
var benchSizes = []int{4 << 10, 256 << 10}

// keysPerRound bounds the memory a Put benchmark holds: every so many
// iterations the store is replaced, untimed.
const keysPerRound = 256

func benchKeys() []string {
	keys := make([]string, keysPerRound)
	for i := range keys {
		keys[i] = fmt.Sprintf("wal/%08d", i)
	}
	return keys
}

func newBenchStore(b *testing.B) *memstore.Store {
	c, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1"}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := c.Store("az1")
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	keys := benchKeys()
	for _, size := range benchSizes {
		body := make([]byte, size)
		b.Run(fmt.Sprintf("memstore/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var s storage.ObjectStore
			for i := 0; b.Loop(); i++ {
				if i%keysPerRound == 0 {
					b.StopTimer()
					s = newBenchStore(b)
					b.StartTimer()
				}
				if _, err := s.Put(ctx, keys[i%keysPerRound], body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("baseline/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var s *mapStore
			for i := 0; b.Loop(); i++ {
				if i%keysPerRound == 0 {
					b.StopTimer()
					s = &mapStore{m: make(map[string][]byte)}
					b.StartTimer()
				}
				if err := s.put(keys[i%keysPerRound], body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGetRange(b *testing.B) {
	ctx := context.Background()
	object := make([]byte, 1<<20)
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("memstore/%dKiB", size>>10), func(b *testing.B) {
			s := newBenchStore(b)
			ref, err := s.Put(ctx, "obj", object)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := s.GetRange(ctx, ref, int64(i%4)*int64(size), int64(size)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("baseline/%dKiB", size>>10), func(b *testing.B) {
			s := &mapStore{m: make(map[string][]byte)}
			if err := s.put("obj", object); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := s.get("obj", int64(i%4)*int64(size), int64(size)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetRangeParallel reads from every core at once, where the
// cluster's shared lock would show.
func BenchmarkGetRangeParallel(b *testing.B) {
	ctx := context.Background()
	const size = 4 << 10
	b.Run("memstore", func(b *testing.B) {
		s := newBenchStore(b)
		ref, err := s.Put(ctx, "obj", make([]byte, 1<<20))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.GetRange(ctx, ref, 0, size); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("baseline", func(b *testing.B) {
		s := &mapStore{m: make(map[string][]byte)}
		if err := s.put("obj", make([]byte, 1<<20)); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.get("obj", 0, size); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
