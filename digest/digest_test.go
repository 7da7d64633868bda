package digest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/storage"
)

func TestNextDependsOnEveryPart(t *testing.T) {
	base := storage.Batch{FirstOffset: 10, LastOffset: 14, Epoch: 3, Data: []byte("hello, log")}
	want := digest.Next(digest.Origin, base)
	flipped := append([]byte(nil), base.Data...)
	flipped[4] ^= 0x01
	for _, tc := range []struct {
		name string
		prev uint64
		b    storage.Batch
	}{
		{"prev", digest.Origin + 1, base},
		{"first offset", digest.Origin, storage.Batch{FirstOffset: 11, LastOffset: 14, Epoch: 3, Data: base.Data}},
		{"last offset", digest.Origin, storage.Batch{FirstOffset: 10, LastOffset: 15, Epoch: 3, Data: base.Data}},
		{"epoch", digest.Origin, storage.Batch{FirstOffset: 10, LastOffset: 14, Epoch: 4, Data: base.Data}},
		{"one bit of data", digest.Origin, storage.Batch{FirstOffset: 10, LastOffset: 14, Epoch: 3, Data: flipped}},
		{"one byte less", digest.Origin, storage.Batch{FirstOffset: 10, LastOffset: 14, Epoch: 3, Data: base.Data[:len(base.Data)-1]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.NotEqual(t, want, digest.Next(tc.prev, tc.b))
		})
	}
	assert.Equal(t, want, digest.Next(digest.Origin, base), "the same input gives the same value")
}

func TestOverFoldsNext(t *testing.T) {
	bs := []storage.Batch{
		{FirstOffset: 0, LastOffset: 0, Epoch: 1, Data: []byte("a")},
		{FirstOffset: 1, LastOffset: 9, Epoch: 1, Data: []byte("bcdefghij")},
		{FirstOffset: 10, LastOffset: 10, Epoch: 2, Data: []byte{}},
	}
	v := digest.Origin
	for _, b := range bs {
		v = digest.Next(v, b)
	}
	assert.Equal(t, v, digest.Over(digest.Origin, bs))
	assert.Equal(t, digest.Origin, digest.Over(digest.Origin, nil), "no batches leave the value as it was")
	// Where the batches are split does not matter: the value is the log's.
	assert.Equal(t, v, digest.Over(digest.Over(digest.Origin, bs[:1]), bs[1:]))
}

func TestNeverZero(t *testing.T) {
	// Zero means "no digest" in the metadata format; no input may give it.
	// The mapping cannot be reached by search, so check it on many values.
	for i := range int64(100000) {
		require.NotZero(t, digest.Next(uint64(i), storage.Batch{FirstOffset: i, LastOffset: i, Data: []byte{byte(i)}}))
	}
	assert.NotZero(t, digest.Origin)
}

func TestNextAllocatesNothing(t *testing.T) {
	b := storage.Batch{FirstOffset: 1, LastOffset: 2, Data: make([]byte, 4096)}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = digest.Next(digest.Origin, b) }))
}

func BenchmarkNext(b *testing.B) {
	for _, size := range []int{256, 16 << 10} {
		batch := storage.Batch{FirstOffset: 1, LastOffset: 100, Data: make([]byte, size)}
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			v := digest.Origin
			for b.Loop() {
				v = digest.Next(v, batch)
			}
		})
	}
}
