package digest

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/metadata"
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

// Mismatch is a replica's digest that differs from the one its leader
// published at the same offset: the replica's log and the leader's differ
// somewhere in [From, To), where From is the last offset at which the two
// were known to agree (a check against the same publisher's log that
// passed, or the point the replica took its value; for a publisher it was
// not checked against before, a new leader or a second leader of one
// epoch, where the chain began) and To the offset compared. It is an error, and
// matches ErrMismatch.
type Mismatch struct {
	Partition metadata.TopicPartition
	// Epoch and Publisher are the leader epoch and broker of the entry
	// whose digest was compared.
	Epoch     int32
	Publisher int32
	From, To  int64
	// Want is the published value, Got the replica's.
	Want, Got uint64
	// What says which comparison failed: "applied" for an entry the
	// replica appended, "held" for one whose records it already held,
	// "reread" for batches read back from its local log.
	What string
}

// ErrMismatch is what every Mismatch matches with errors.Is.
var ErrMismatch = errors.New("activetier: replica digest differs from the leader's")

// Error names the partition, the range, the publisher and both values.
func (m *Mismatch) Error() string {
	return fmt.Sprintf("%v: %s: offsets %d-%d differ from epoch %d's leader (broker %d): digest %016x, published %016x",
		ErrMismatch, m.Partition, m.From, m.To-1, m.Epoch, m.Publisher, m.Got, m.Want)
}

// Is reports whether target is ErrMismatch.
func (m *Mismatch) Is(target error) bool { return target == ErrMismatch }
