package broker

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka's record batch (magic 2) header, as the protocol guide lays it out.
// The broker sets the base offset and the partition leader epoch, which lie
// outside the CRC, and reads the rest.
const (
	batchHeaderLen     = 61
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offMaxTimestamp    = 35
	offRecordCount     = 57

	attrTransactional = 0x10
	attrControl       = 0x20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// producedBatch is one record batch of a produce request.
type producedBatch struct {
	data         []byte // the whole batch; the broker rewrites its offset and epoch
	lastDelta    int64
	maxTimestamp int64
}

// errBadBatch carries the Kafka error a malformed produce gets.
type errBadBatch struct {
	kerr *kerr.Error
	why  string
}

func (e *errBadBatch) Error() string { return fmt.Sprintf("%s: %s", e.kerr.Message, e.why) }
func (e *errBadBatch) Unwrap() error { return e.kerr }

// splitBatches checks the record batches a producer sent and returns them.
// Kafka refuses what this refuses: anything but magic 2 (Produce v3 and
// later carries nothing else), a length that does not match, a CRC that
// does not match (CORRUPT_MESSAGE), transactional or control batches
// (this broker has no transaction coordinator), and offset deltas that do
// not number the records 0 to n-1.
func splitBatches(records []byte) ([]producedBatch, error) {
	if len(records) == 0 {
		return nil, &errBadBatch{kerr.InvalidRecord, "no record batch"}
	}
	var out []producedBatch
	for len(records) > 0 {
		if len(records) < batchHeaderLen {
			return nil, &errBadBatch{kerr.CorruptMessage, fmt.Sprintf("%d bytes left, shorter than a batch header", len(records))}
		}
		n := int64(int32(binary.BigEndian.Uint32(records[offBatchLength:]))) + 12
		if n < batchHeaderLen || n > int64(len(records)) {
			return nil, &errBadBatch{kerr.CorruptMessage, fmt.Sprintf("batch length %d with %d bytes left", n-12, len(records))}
		}
		b := records[:n:n]
		records = records[n:]
		if b[offMagic] != 2 {
			return nil, &errBadBatch{kerr.UnsupportedForMessageFormat, fmt.Sprintf("magic %d", b[offMagic])}
		}
		if crc32.Checksum(b[offAttributes:], crc32c) != binary.BigEndian.Uint32(b[offCRC:]) {
			return nil, &errBadBatch{kerr.CorruptMessage, "CRC mismatch"}
		}
		attrs := binary.BigEndian.Uint16(b[offAttributes:])
		if attrs&(attrTransactional|attrControl) != 0 {
			return nil, &errBadBatch{kerr.InvalidRecord, "transactional and control batches are not supported"}
		}
		delta := int64(int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])))
		count := int64(int32(binary.BigEndian.Uint32(b[offRecordCount:])))
		if count <= 0 || delta != count-1 {
			return nil, &errBadBatch{kerr.InvalidRecord, fmt.Sprintf("%d records with last offset delta %d", count, delta)}
		}
		out = append(out, producedBatch{data: b, lastDelta: delta, maxTimestamp: int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))})
	}
	return out, nil
}

// stamp sets the batch's base offset and leader epoch, as the leader does
// when it appends.
func (b producedBatch) stamp(base int64, epoch int32) {
	binary.BigEndian.PutUint64(b.data[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b.data[offLeaderEpoch:], uint32(epoch))
}
