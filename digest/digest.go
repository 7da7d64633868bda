package digest

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/storage"
)

// Origin is the value a chain begins with at its first offset: the value
// "before" the first batch it covers.
const Origin uint64 = 0x61637469_76657469 // "activeti"

// Next returns the chain value after b, given prev, the value before it.
func Next(prev uint64, b storage.Batch) uint64 {
	var head [28]byte
	binary.LittleEndian.PutUint64(head[0:], prev)
	binary.LittleEndian.PutUint64(head[8:], uint64(b.FirstOffset))
	binary.LittleEndian.PutUint64(head[16:], uint64(b.LastOffset))
	binary.LittleEndian.PutUint32(head[24:], uint32(b.Epoch))
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(head[:])
	_, _ = d.Write(b.Data)
	return nonZero(d.Sum64())
}

// Over returns the chain value after batches, given prev, the value before
// the first of them.
func Over(prev uint64, batches []storage.Batch) uint64 {
	for _, b := range batches {
		prev = Next(prev, b)
	}
	return prev
}

func nonZero(v uint64) uint64 {
	if v == 0 {
		return 1
	}
	return v
}
