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
	batchHeaderLen      = 61
	offBaseOffset       = 0
	offBatchLength      = 8
	offLeaderEpoch      = 12
	offMagic            = 16
	offCRC              = 17
	offAttributes       = 21
	offLastOffsetDelta  = 23
	offFirstTimestamp   = 27
	offMaxTimestamp     = 35
	offProducerID       = 43
	offProducerEpoch    = 51
	offBaseSequence     = 53
	offRecordCount      = 57
	attrCompression     = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
	compressionZstd     = 4
	produceVersionZstd  = 7 // the first Produce version that may carry zstd
	noProducerID        = -1
	maxCompressionCodec = compressionZstd
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is what the broker reads from a record batch's header: of a
// produced batch, and of a stored one when a new leader rebuilds its
// producers' state from its log.
type batchHeader struct {
	attrs          uint16
	lastDelta      int64
	firstTimestamp int64
	maxTimestamp   int64
	count          int64
	// The idempotent producer's fields: ProducerID is noProducerID for a
	// producer that is not idempotent.
	producerID    int64
	producerEpoch int16
	baseSequence  int32
}

// readHeader reads a batch header; b must hold at least batchHeaderLen
// bytes.
func readHeader(b []byte) batchHeader {
	return batchHeader{
		attrs:          binary.BigEndian.Uint16(b[offAttributes:]),
		lastDelta:      int64(int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))),
		firstTimestamp: int64(binary.BigEndian.Uint64(b[offFirstTimestamp:])),
		maxTimestamp:   int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		count:          int64(int32(binary.BigEndian.Uint32(b[offRecordCount:]))),
		producerID:     int64(binary.BigEndian.Uint64(b[offProducerID:])),
		producerEpoch:  int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		baseSequence:   int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
	}
}

// idempotent reports whether the batch comes from an idempotent producer.
func (h batchHeader) idempotent() bool { return h.producerID >= 0 }

// lastSequence is the sequence number of the batch's last record, which
// wraps after MaxInt32 as Kafka's does.
func (h batchHeader) lastSequence() int32 {
	return int32((int64(h.baseSequence) + h.lastDelta) % (1 << 31))
}

// producedBatch is the record batch of one partition of a produce request.
type producedBatch struct {
	data []byte // the whole batch; the broker rewrites its offset and epoch
	batchHeader
}

// errRefused carries the Kafka error a refused batch gets, and why.
type errRefused struct {
	kerr *kerr.Error
	why  string
}

func (e *errRefused) Error() string { return fmt.Sprintf("%s: %s", e.kerr.Message, e.why) }
func (e *errRefused) Unwrap() error { return e.kerr }

// parseProduced checks the records of one partition of a produce request
// at version and returns its batch. Kafka refuses what this refuses:
// anything but exactly one batch (Produce v3 and later carries exactly
// one, of magic 2), a length that does not match, a CRC that does not
// match (CORRUPT_MESSAGE), zstd before Produce v7, transactional or
// control batches (this broker has no transaction coordinator), offset
// deltas that do not number the records 0 to n-1, and an idempotent
// producer's batch with a negative epoch or sequence.
func parseProduced(records []byte, version int16) (producedBatch, error) {
	if len(records) == 0 {
		return producedBatch{}, &errRefused{kerr.InvalidRecord, "no record batch"}
	}
	if len(records) < batchHeaderLen {
		return producedBatch{}, &errRefused{kerr.CorruptMessage, fmt.Sprintf("%d bytes, shorter than a batch header", len(records))}
	}
	n := int64(int32(binary.BigEndian.Uint32(records[offBatchLength:]))) + 12
	switch {
	case n < batchHeaderLen || n > int64(len(records)):
		return producedBatch{}, &errRefused{kerr.CorruptMessage, fmt.Sprintf("batch length %d with %d bytes", n-12, len(records))}
	case n < int64(len(records)):
		return producedBatch{}, &errRefused{kerr.InvalidRecord, "more than one record batch for the partition"}
	case records[offMagic] != 2:
		return producedBatch{}, &errRefused{kerr.UnsupportedForMessageFormat, fmt.Sprintf("magic %d", records[offMagic])}
	case crc32.Checksum(records[offAttributes:], crc32c) != binary.BigEndian.Uint32(records[offCRC:]):
		return producedBatch{}, &errRefused{kerr.CorruptMessage, "CRC mismatch"}
	}
	h := readHeader(records)
	switch codec := h.attrs & attrCompression; {
	case codec > maxCompressionCodec:
		return producedBatch{}, &errRefused{kerr.UnsupportedCompressionType, fmt.Sprintf("compression codec %d", codec)}
	case codec == compressionZstd && version < produceVersionZstd:
		return producedBatch{}, &errRefused{kerr.UnsupportedCompressionType, fmt.Sprintf("zstd in a Produce v%d request", version)}
	case h.attrs&(attrTransactional|attrControl) != 0:
		return producedBatch{}, &errRefused{kerr.InvalidRecord, "transactional and control batches are not supported"}
	case h.count <= 0 || h.lastDelta != h.count-1:
		return producedBatch{}, &errRefused{kerr.InvalidRecord, fmt.Sprintf("%d records with last offset delta %d", h.count, h.lastDelta)}
	case h.idempotent() && (h.producerEpoch < 0 || h.baseSequence < 0):
		return producedBatch{}, &errRefused{kerr.InvalidRecord, fmt.Sprintf("producer %d with epoch %d and base sequence %d", h.producerID, h.producerEpoch, h.baseSequence)}
	}
	return producedBatch{data: records, batchHeader: h}, nil
}

// stamp sets the batch's base offset and leader epoch, as the leader does
// when it appends.
func (b producedBatch) stamp(base int64, epoch int32) {
	binary.BigEndian.PutUint64(b.data[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b.data[offLeaderEpoch:], uint32(epoch))
}
