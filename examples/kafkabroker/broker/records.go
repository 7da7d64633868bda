package broker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxDecompressedBatch bounds what the broker decompresses of one batch
// when it reads its records (a ListOffsets by time), against a batch
// that claims or inflates to more.
const maxDecompressedBatch = 64 << 20

// The compression codecs of a batch's attributes.
const (
	compressionNone   = 0
	compressionGzip   = 1
	compressionSnappy = 2
	compressionLz4    = 3
)

// errBadRecords is a batch whose records cannot be read.
var errBadRecords = errors.New("broker: malformed records in a batch")

// scanRecords calls visit with the offset delta and timestamp of each
// record of batch (a whole magic 2 batch), in order, until visit returns
// false. Only the first bytes of each record are read: the reader holds
// no record in memory, whatever its size. A batch with the log append
// time attribute gives every record the batch's max timestamp, as Kafka
// does.
func scanRecords(batch []byte, visit func(delta, ts int64) bool) error {
	if len(batch) < batchHeaderLen {
		return fmt.Errorf("%w: %d bytes", errBadRecords, len(batch))
	}
	h := readHeader(batch)
	src, closeSrc, err := recordsReader(batch[batchHeaderLen:], h.attrs&attrCompression)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadRecords, err)
	}
	defer closeSrc()
	r := &countingReader{r: bufio.NewReader(io.LimitReader(src, maxDecompressedBatch))}
	for i := int64(0); i < h.count; i++ {
		length, err := binary.ReadVarint(r)
		if err != nil {
			return fmt.Errorf("%w: record %d of %d: %w", errBadRecords, i, h.count, err)
		}
		r.n = 0
		_, err = r.ReadByte() // attributes
		var tsDelta, offDelta int64
		if err == nil {
			tsDelta, err = binary.ReadVarint(r)
		}
		if err == nil {
			offDelta, err = binary.ReadVarint(r)
		}
		if err == nil && r.n > length {
			err = fmt.Errorf("record length %d", length)
		}
		if err == nil {
			_, err = r.r.Discard(int(length - r.n))
		}
		if err != nil {
			return fmt.Errorf("%w: record %d of %d: %w", errBadRecords, i, h.count, err)
		}
		ts := h.firstTimestamp + tsDelta
		if h.attrs&attrLogAppendTime != 0 {
			ts = h.maxTimestamp
		}
		if !visit(offDelta, ts) {
			return nil
		}
	}
	return nil
}

// countingReader counts the bytes read through ReadByte.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// recordsReader returns the decompressed records of a batch, and what to
// call when done with them.
func recordsReader(src []byte, codec uint16) (io.Reader, func(), error) {
	nothing := func() {}
	switch codec {
	case compressionNone:
		return bytes.NewReader(src), nothing, nil
	case compressionGzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return r, func() { r.Close() }, nil
	case compressionSnappy:
		out, err := decodeSnappy(src)
		if err != nil {
			return nil, nil, fmt.Errorf("snappy: %w", err)
		}
		return bytes.NewReader(out), nothing, nil
	case compressionLz4:
		return lz4.NewReader(bytes.NewReader(src)), nothing, nil
	case compressionZstd:
		r, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(maxDecompressedBatch))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return r, r.Close, nil
	}
	return nil, nil, fmt.Errorf("compression codec %d", codec)
}

// xerialMagic begins snappy data in the framing of Java's xerial
// snappy-java, which the Java producer writes: then two 4-byte versions,
// and blocks, each a 4-byte big-endian length and a raw snappy block.
// Other producers (librdkafka) write one raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decodeSnappy decodes either form, to at most maxDecompressedBatch
// bytes: each block's decoded length is checked before it is decoded.
func decodeSnappy(src []byte) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return decodeSnappyBlock(nil, src)
	}
	if len(src) < len(xerialMagic)+8 {
		return nil, errors.New("xerial header truncated")
	}
	var out []byte
	for rest := src[len(xerialMagic)+8:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errors.New("xerial block length truncated")
		}
		n := binary.BigEndian.Uint32(rest)
		if uint64(n) > uint64(len(rest)-4) {
			return nil, fmt.Errorf("xerial block of %d bytes with %d left", n, len(rest)-4)
		}
		var err error
		if out, err = decodeSnappyBlock(out, rest[4:4+n]); err != nil {
			return nil, err
		}
		rest = rest[4+n:]
	}
	return out, nil
}

// decodeSnappyBlock appends the decoded block to out.
func decodeSnappyBlock(out, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > maxDecompressedBatch-len(out) {
		return nil, fmt.Errorf("decodes past %d bytes", maxDecompressedBatch)
	}
	dec, err := s2.Decode(make([]byte, n), block)
	if err != nil {
		return nil, err
	}
	return append(out, dec...), nil
}
